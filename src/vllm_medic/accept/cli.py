"""`vllm-medic accept URL`: the six-step acceptance loop, recorded as one acceptance sheet."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vllm_medic.accept_steps import STEP_NAMES
from vllm_medic.cli_common import JsonOpt, JunitOpt, StrictOpt, VerboseOpt
from vllm_medic.errors import UsageError
from vllm_medic.hooks import Hook
from vllm_medic.model import ExitCode

if TYPE_CHECKING:
    from vllm_medic.accept.context import StartDistributed

#: `--workers N`: the load workers each level is split over; plugged by the cluster package
#: (cluster/cli.py: Ray actors, cluster/distload.py) and handed to the run through its RunContext
DISTRIBUTED: Hook[StartDistributed] = Hook("accept --workers")


def register(app: typer.Typer) -> None:
    app.command(
        "accept",
        help=f"Run the acceptance loop ({', '.join(STEP_NAMES)}) against a live "
        "OpenAI-compatible server and record one acceptance sheet. Exit 0 only when every step that ran "
        "passed; 1 otherwise; 130 when interrupted (what was measured is kept); 2 usage; 3 tool error.",
        no_args_is_help=True,
    )(accept)


def accept(
    url: Annotated[str, typer.Argument(help="Server base URL, e.g. http://127.0.0.1:8000", metavar="URL")],
    steps: Annotated[
        str | None,
        typer.Option("--steps", help=f"Comma-separated subset of {','.join(STEP_NAMES)}."),
    ] = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Small ramp, few requests, short soak: under a minute.")
    ] = False,
    model: Annotated[
        str | None, typer.Option("--model", help="Served model name (default: the first listed).")
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env", help="Name of the environment variable holding the API key.", metavar="VAR"
        ),
    ] = None,
    logs: Annotated[
        list[Path] | None,
        typer.Option("--logs", help="Server log file(s) for the start/soak steps.", metavar="PATH"),
    ] = None,
    docker: Annotated[
        str | None, typer.Option("--docker", help="Read the server log with `docker logs C`.", metavar="C")
    ] = None,
    kubectl: Annotated[
        str | None,
        typer.Option("--kubectl", help="Read the server log with `kubectl logs POD`.", metavar="POD"),
    ] = None,
    concurrency: Annotated[
        str | None, typer.Option("--concurrency", help="Ramp levels, e.g. 1,2,4,8.", metavar="LIST")
    ] = None,
    max_concurrency: Annotated[
        int | None, typer.Option("--max-concurrency", help="Ramp 1,2,4,... up to N.", metavar="N")
    ] = None,
    requests_per_step: Annotated[
        int | None,
        typer.Option(
            "--requests-per-step", help="Requests per ramp level (default 32; quick 8).", metavar="N"
        ),
    ] = None,
    step_duration: Annotated[
        str | None,
        typer.Option(
            "--step-duration", help="Duration per ramp level instead of a count, e.g. 30s.", metavar="S"
        ),
    ] = None,
    error_budget: Annotated[
        float,
        typer.Option("--error-budget", help="Max error fraction per ramp level before it counts as broken."),
    ] = 0.01,
    max_client_lag: Annotated[
        float,
        typer.Option(
            "--max-client-lag-ms",
            help="Load-generator self-check: a level whose event-loop lag p99 exceeds this is invalid "
            "(client saturation). Raise it only on a client host you know is shared.",
            metavar="MS",
        ),
    ] = 20.0,
    request_timeout: Annotated[
        str, typer.Option("--request-timeout", help="Per-request timeout, e.g. 60s.", metavar="S")
    ] = "60s",
    ready_timeout: Annotated[
        str, typer.Option("--ready-timeout", help="How long the start step waits for readiness.", metavar="S")
    ] = "60s",
    soak: Annotated[
        str | None,
        typer.Option("--soak", help="Soak duration, e.g. 10m (default 5m; quick 10s).", metavar="DURATION"),
    ] = None,
    bundle: Annotated[
        Path | None,
        typer.Option(
            "--bundle", help="Environment snapshot collected elsewhere (dir or .tgz).", metavar="DIR_OR_TGZ"
        ),
    ] = None,
    collect: Annotated[
        bool, typer.Option("--collect/--no-collect", help="Collect the environment here in the archive step.")
    ] = True,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            help="Run each load level in N Ray actors (pip install 'vllm-medic[ray]'); their latency "
            "histograms merge bucket by bucket. Default 1: a single process.",
            metavar="N",
        ),
    ] = 1,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray",
            help="With --workers: the Ray cluster to place actors on (default: local).",
            metavar="ADDRESS",
        ),
    ] = None,
    recipe: Annotated[
        str,
        typer.Option(
            "--recipe",
            help="Recipe the archive step's preflight (`check`) judges the snapshot against: a shipped "
            "name (kimi-k3, generic) or a YAML path.",
            metavar="NAME_OR_PATH",
        ),
    ] = "generic",
    strategy: Annotated[
        str | None,
        typer.Option(
            "--strategy", help="Recipe strategy for the preflight (default: detected).", metavar="NAME"
        ),
    ] = None,
    db: Annotated[
        str | None, typer.Option("--db", help="SQLAlchemy URL of the run history.", metavar="URL")
    ] = None,
    html: Annotated[
        Path | None, typer.Option("--html", help="Write the acceptance sheet as HTML.", metavar="FILE")
    ] = None,
    as_json: JsonOpt = False,
    junit: JunitOpt = None,
    strict: StrictOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    from vllm_medic.accept.options import (
        AcceptOptions,
        normalise_url,
        parse_concurrency,
        parse_duration,
        parse_steps,
    )

    api_key = None
    if api_key_env:
        api_key = os.environ.get(api_key_env)
        if api_key is None:
            raise UsageError(f"--api-key-env {api_key_env}: that environment variable is not set")
    if requests_per_step is not None and requests_per_step < 1:
        raise UsageError("--requests-per-step must be at least 1")
    if requests_per_step is not None and step_duration is not None:
        raise UsageError("give either --requests-per-step or --step-duration, not both")
    if not 0.0 <= error_budget < 1.0:
        raise UsageError("--error-budget is a fraction in [0, 1), e.g. 0.01")
    if max_client_lag <= 0:
        raise UsageError("--max-client-lag-ms must be positive")
    if workers < 1:
        raise UsageError("--workers must be at least 1")
    if ray_address is not None and workers == 1:
        raise UsageError("--ray places load actors: give --workers N (N > 1) with it")
    if bundle is not None and not bundle.exists():
        raise UsageError(f"--bundle {bundle}: no such file or directory")
    from vllm_medic.recipes import load_recipe

    load_recipe(recipe)  # a bad --recipe is a usage error now, not a broken archive step later
    if html is not None and not html.expanduser().resolve().parent.is_dir():
        raise UsageError(f"--html {html}: directory {html.expanduser().resolve().parent} does not exist")
    from vllm_medic.safeio import kind_of

    for p in logs or []:
        if not p.exists():
            raise UsageError(f"--logs {p}: no such file")
        kind = kind_of(p.resolve())
        if kind is not None and kind != "a directory":  # a FIFO would block the start step's read forever
            raise UsageError(f"--logs {p} is {kind}, not a regular file: refused")
    opts = AcceptOptions(
        url=normalise_url(url),
        steps=parse_steps(steps),
        quick=quick,
        model=model,
        api_key_env=api_key_env,
        api_key=api_key,
        log_paths=tuple(logs or ()),
        docker=docker,
        kubectl=kubectl,
        concurrency=parse_concurrency(concurrency, max_concurrency, quick),
        requests_per_step=None if step_duration else (requests_per_step or (8 if quick else 32)),
        step_duration_s=parse_duration(step_duration, "--step-duration") if step_duration else None,
        error_budget=error_budget,
        max_client_lag_ms=max_client_lag,
        request_timeout_s=parse_duration(request_timeout, "--request-timeout"),
        ready_timeout_s=parse_duration(ready_timeout, "--ready-timeout"),
        soak_s=parse_duration(soak, "--soak") if soak else (10.0 if quick else 300.0),
        max_tokens=16 if quick else 64,
        bundle=bundle,
        collect=collect,
        workers=workers,
        ray_address=ray_address,
        recipe=recipe,
        strategy=strategy,
    )
    from vllm_medic.accept.render import emit
    from vllm_medic.accept.runner import run_accept
    from vllm_medic.store.api import open_store

    store = open_store(db)
    try:
        from vllm_medic.accept.progress import LiveProgress, wanted

        summary = run_accept(opts, store, strict, LiveProgress(wanted(as_json)), DISTRIBUTED.plugged)
        code = emit(
            summary,
            store,
            as_json=as_json,
            junit=junit,
            html=html,
            strict=strict,
            verbose=verbose,
            secret=api_key,
        )
    finally:
        store.close()
    sys.stdout.flush()
    raise typer.Exit(int(code if not summary.interrupted else ExitCode.INTERRUPTED))
