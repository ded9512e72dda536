"""``vllm-medic sim``: run the vLLM-compatible simulator in the foreground (see sim/server.py)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from vllm_medic.cli_common import JsonOpt


def register(app: typer.Typer) -> None:
    app.command(
        "sim",
        help="Run a vLLM-compatible server (same endpoints and metric names) with fault injection, "
        "to try `accept` without a GPU and to produce faults a real server cannot on demand. "
        "Prints 'vllm-medic sim listening on URL' once it listens (--port 0 picks a free port). "
        "Exit 0 on Ctrl-C, 1 after an injected crash, 2 on bad options or a busy port.",
    )(sim_command)


def sim_command(
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port, printed at start).")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    model: Annotated[str, typer.Option(help="Served model name.")] = "sim-model",
    max_model_len: Annotated[int, typer.Option(help="Context length reported by /v1/models.")] = 4096,
    api_key_env: Annotated[
        str | None, typer.Option(help="Require this env var's value as Bearer key on /v1/* (never on argv).")
    ] = None,
    ttft_ms: Annotated[float, typer.Option(help="Base time to first token.")] = 5.0,
    prefill_ms_per_token: Annotated[float, typer.Option(help="Extra TTFT per uncached prompt token.")] = 0.02,
    itl_ms: Annotated[float, typer.Option(help="Time between output tokens.")] = 2.0,
    output_tokens: Annotated[int, typer.Option(help="Natural answer length in tokens.")] = 16,
    engines: Annotated[
        int, typer.Option(help="Data-parallel engines (each its own cache, 'engine' label).")
    ] = 1,
    routing: Annotated[
        str, typer.Option(help="round_robin or hash (prefix-aware) across engines.")
    ] = "round_robin",
    block_size: Annotated[int, typer.Option(help="KV block size in tokens (prefix-cache unit).")] = 16,
    num_gpu_blocks: Annotated[int, typer.Option(help="KV-cache capacity per engine, in blocks.")] = 4096,
    max_num_seqs: Annotated[int, typer.Option(help="Running requests per engine; the rest queue.")] = 256,
    enable_prefix_caching: Annotated[
        bool, typer.Option(help="Prefix caching on (off: no hits, no counters).")
    ] = True,
    enable_prompt_tokens_details: Annotated[bool, typer.Option(help="Report usage...cached_tokens.")] = False,
    hybrid: Annotated[
        bool, typer.Option(help="Hybrid model: mamba cache mode 'align', checkpoint hits only.")
    ] = False,
    retention_interval: Annotated[
        int | None, typer.Option(help="Hybrid: checkpoint interval in tokens; 0 = prompt ends only.")
    ] = None,
    metric_names: Annotated[
        str, typer.Option(help="current (vLLM >= 0.12) or legacy (gpu_* names).")
    ] = "current",
    tool_call_parser: Annotated[
        str | None, typer.Option(help="Pretend this tool parser is configured.")
    ] = None,
    enable_auto_tool_choice: Annotated[bool, typer.Option(help="Allow tool_choice 'auto'.")] = False,
    error_rate: Annotated[
        float, typer.Option(help="Fault: share of generation requests answered with an HTTP error.")
    ] = 0.0,
    error_status: Annotated[int, typer.Option(help="Fault: the HTTP status of those errors.")] = 500,
    disconnect_rate: Annotated[float, typer.Option(help="Fault: share of streams cut mid-way.")] = 0.0,
    disconnect_after: Annotated[int, typer.Option(help="Fault: chunks sent before the cut.")] = 3,
    stall_rate: Annotated[float, typer.Option(help="Fault: share of streams that stall.")] = 0.0,
    stall_after: Annotated[
        int, typer.Option(help="Fault: chunks sent before the stall / malformed chunk.")
    ] = 3,
    stall_s: Annotated[float, typer.Option(help="Fault: stall length in seconds.")] = 30.0,
    malformed_sse_rate: Annotated[
        float, typer.Option(help="Fault: share of streams with a broken SSE chunk.")
    ] = 0.0,
    bad_tool_args: Annotated[
        bool, typer.Option(help="Fault: tool-call arguments that break their schema.")
    ] = False,
    crash_at_concurrency: Annotated[
        int | None, typer.Option(help="Fault: the engine dies when this many requests are in flight.")
    ] = None,
    crash_kind: Annotated[
        str, typer.Option(help="Fault: engine_dead or oom (what the log says).")
    ] = "engine_dead",
    crash_exit_after_s: Annotated[
        float, typer.Option(help="Fault: /health 503 this long, then the port closes.")
    ] = 1.0,
    log_file: Annotated[str | None, typer.Option(help="Write vLLM-format log lines here.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for the fault draws.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    import asyncio
    import json
    import sys

    from vllm_medic.cli_common import fail_usage
    from vllm_medic.sim.config import SimConfig
    from vllm_medic.sim.server import serve_forever

    if not 0 <= port <= 65535:
        raise fail_usage(f"--port must be 0..65535 (0: any free port), got {port}")
    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise fail_usage(f"--api-key-env {api_key_env}: that environment variable is not set or empty")
    cfg = SimConfig(
        host=host, port=port, model=model, max_model_len=max_model_len, api_key=api_key, seed=seed,
        ttft_ms=ttft_ms, prefill_ms_per_token=prefill_ms_per_token, itl_ms=itl_ms, output_tokens=output_tokens,
        engines=engines, routing=routing, block_size=block_size, num_gpu_blocks=num_gpu_blocks,
        max_num_seqs=max_num_seqs, enable_prefix_caching=enable_prefix_caching,
        enable_prompt_tokens_details=enable_prompt_tokens_details, hybrid=hybrid,
        retention_interval=retention_interval, metric_names=metric_names, tool_call_parser=tool_call_parser,
        enable_auto_tool_choice=enable_auto_tool_choice, error_rate=error_rate, error_status=error_status,
        disconnect_rate=disconnect_rate, disconnect_after=disconnect_after, stall_rate=stall_rate,
        stall_after=stall_after, stall_s=stall_s, malformed_sse_rate=malformed_sse_rate, bad_tool_args=bad_tool_args,
        crash_at_concurrency=crash_at_concurrency, crash_kind=crash_kind, crash_exit_after_s=crash_exit_after_s,
        log_file=log_file,
    )  # fmt: skip
    problems = cfg.validate()
    if problems:
        raise fail_usage("; ".join(problems))

    def announce(line: str) -> None:
        if as_json:
            url = line.rsplit(" ", 1)[-1]
            sys.stdout.write(json.dumps({"url": url, "config": cfg.to_dict()}) + "\n")
        else:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()

    try:
        code = asyncio.run(serve_forever(cfg, announce))
    except KeyboardInterrupt:
        sys.stderr.write("vllm-medic sim: interrupted, stopped\n")
        raise typer.Exit(0) from None
    except OSError as exc:
        raise fail_usage(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    if code:
        sys.stderr.write("vllm-medic sim: the engine died (injected crash); exiting 1\n")
    raise typer.Exit(code)
