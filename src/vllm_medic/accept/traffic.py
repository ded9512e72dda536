"""Traffic for the ramp and soak steps: one level of load through the load generator
(``accept.loadgen``), with the server's metrics scraped before and after it.

A ramp level is ``concurrency`` requests kept in flight (the generator's closed-loop schedule: that is
what "concurrency N" means to a capacity plan). The generator measures every latency from the
request's intended send time, takes timestamps on socket read, counts tokens from ``usage``, samples
``/health`` and ``/metrics`` while it runs (and once after), and checks itself (event-loop lag, CPU): a
level it cannot drive honestly comes back ``valid=False`` and the ramp calls it client saturation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vllm_medic.accept.context import RunContext, probes
from vllm_medic.accept.gpumem import GpuMemorySampler

WATCH_INTERVAL_S = 1.0
SERVER_GONE_KINDS = ("refused", "reset", "disconnect", "connect_timeout", "dns")
TIMEOUT_KINDS = ("timeout", "stall")


@dataclass
class LevelRun:
    concurrency: int
    result: Any  # accept.loadgen.StepResult
    metrics_before: Any = None
    metrics_after: Any = None
    gpu_memory_peak_mib: float | None = None
    gpu_memory_source: str = "unknown"


def request_body(max_tokens: int) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": probes()["load_prompt"]}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }


def stop_when_server_gone(record: Any) -> str | None:
    """Nothing listening any more: stop sending into a dead port; the verdict says why."""
    if record.error_kind == "refused":
        return f"connection refused (request #{record.index}): nothing is listening any more"
    return None


async def _metrics_or_none(ctx: RunContext) -> Any:
    from vllm_medic.serve.client import EndpointError

    try:
        return await ctx.client.metrics()
    except EndpointError:
        return None


async def run_level(
    ctx: RunContext,
    concurrency: int,
    requests: int | None,
    duration_s: float | None,
    on_partial: Callable[[Any], None] | None = None,
    label: str | None = None,
) -> LevelRun:
    """Drive one level; on cancellation (Ctrl-C) hand the partial StepResult to ``on_partial`` first."""
    from vllm_medic.accept.loadgen import LoadStep
    from vllm_medic.serve.client import ServerClient

    opts = ctx.opts
    body = request_body(opts.max_tokens)
    model = ctx.model or opts.model
    before = await _metrics_or_none(ctx)
    step = LoadStep(
        lambda: ServerClient(opts.url, api_key=opts.api_key, timeout_s=opts.request_timeout_s, model=model),
        concurrency=concurrency,
        body_factory=lambda _i: body,
        requests=requests,
        duration_s=duration_s,
        timeout_s=opts.request_timeout_s,
        stall_timeout_s=opts.request_timeout_s,
        metrics_interval_s=WATCH_INTERVAL_S,
        max_lag_ms=opts.max_client_lag_ms,
        stop_when=stop_when_server_gone,
    )
    gpu = GpuMemorySampler(opts.url).start()
    try:
        if opts.workers > 1:
            result = await _run_distributed(ctx, concurrency, requests, duration_s, body, model)
        else:
            from vllm_medic.accept.progress import QUIET

            live = ctx.live or QUIET
            async with live.watch(
                label or f"concurrency {concurrency}", lambda: step.result, requests, duration_s
            ):
                result = await step.run()
    except asyncio.CancelledError:
        if on_partial is not None:
            on_partial(step.result)
        raise
    finally:
        gpu.stop()
    run = LevelRun(concurrency, result, before, await _metrics_or_none(ctx))
    run.gpu_memory_peak_mib = None if gpu.peak_mib is None else round(gpu.peak_mib, 1)
    run.gpu_memory_source = gpu.source
    return run


async def _run_distributed(
    ctx: RunContext,
    concurrency: int,
    requests: int | None,
    duration_s: float | None,
    body: dict[str, Any],
    model: str | None,
) -> Any:
    """The same level split over ``--workers`` Ray actors; their StepResults merge exactly."""
    opts = ctx.opts
    loop = asyncio.get_running_loop()
    if ctx.distributed is None:
        start = ctx.start_distributed
        if start is None:
            from vllm_medic.errors import ToolError

            raise ToolError(
                "--workers: distributed load is not available (the cluster package is not plugged in)"
            )
        ctx.distributed = await loop.run_in_executor(None, start, opts, model)
    return await loop.run_in_executor(
        None,
        lambda: ctx.distributed.run_step(
            concurrency=concurrency,
            body_factory=lambda _i: body,
            requests=requests,
            duration_s=duration_s,
            timeout_s=opts.request_timeout_s,
            stall_timeout_s=opts.request_timeout_s,
            metrics_interval_s=WATCH_INTERVAL_S,
            max_lag_ms=opts.max_client_lag_ms,
            stop_when=stop_when_server_gone,
        ),
    )


def ms_percentiles(summary: dict[str, Any]) -> dict[str, float] | None:
    """The generator's seconds summary → the sheet's ``{"p50": ms, ...}`` (None when nothing was measured)."""
    if not summary or not summary.get("count"):
        return None
    return {
        q: round(float(summary[q]) * 1000.0, 2)
        for q in ("p50", "p90", "p95", "p99")
        if summary.get(q) is not None
    }


def health_failures(result: Any) -> list[dict[str, Any]]:
    out = []
    for s in result.server:
        if s.health_status != 200:
            out.append(
                {
                    "t_s": round(s.t, 2),
                    "status": s.health_status,
                    "error_kind": "unreachable" if s.health_status is None else f"http_{s.health_status}",
                    "error": (s.health_error or "")[:200],
                }
            )
    return out
