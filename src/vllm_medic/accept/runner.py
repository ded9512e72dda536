"""Orchestration of one acceptance run: steps in order, each recorded to the store as it goes.

Every step is written as ``running`` when it starts, with partial data while it measures (long steps
call ``ctx.progress``), and with its final status at the end. Ctrl-C (SIGINT) and SIGTERM cancel the
step in flight; what it measured so far is saved with the step, the run is marked interrupted, and the
command exits 130. A second Ctrl-C still leaves the run marked interrupted (``finally``).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import signal
from dataclasses import dataclass, field
from typing import Any

from vllm_medic.accept.context import RunContext, StartDistributed
from vllm_medic.accept.options import AcceptOptions
from vllm_medic.accept.outcome import StepOutcome, run_verdict, skipped
from vllm_medic.accept_steps import BY_NAME
from vllm_medic.model import Category, Finding, Severity
from vllm_medic.store.step_row import StepRow


@dataclass
class RunSummary:
    run_id: str
    verdict: str
    steps: list[StepOutcome] = field(default_factory=list)
    interrupted: str | None = None
    tool_error: str | None = None
    db_url: str = ""
    store_errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "verdict": self.verdict,
            "status": "interrupted" if self.interrupted else "finished",
            "interrupted_reason": self.interrupted,
            "store_errors": self.store_errors,
            "steps": [s.to_dict() for s in self.steps],
        }


def scrub(obj: Any, secret: str | None) -> Any:
    """Replace a literal secret anywhere in a JSON-like value (keys may not match any known shape)."""
    if not secret:
        return obj
    if isinstance(obj, str):
        return obj.replace(secret, "<redacted>")
    if isinstance(obj, dict):
        return {scrub(k, secret): scrub(v, secret) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [scrub(v, secret) for v in obj]
    return obj


class Recorder:
    """Writes steps to the store with the secret scrubbed; a store failure mid-run is kept, not fatal."""

    def __init__(self, store: Any, run_id: str, secret: str | None) -> None:
        self.store = store
        self.run_id = run_id
        self.secret = secret
        self.errors: list[str] = []

    def step(self, name: str, status: str, findings: list[Finding], data: dict[str, Any]) -> None:
        secret = self.secret
        row = StepRow(
            scrub(name, secret),
            scrub(status, secret),
            scrub([f.to_dict() for f in findings], secret),
            scrub(data, secret),
        )
        try:
            self.store.record_step(self.run_id, row)
        except Exception as exc:  # noqa: BLE001 - keep measuring; report the store problem at the end
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def attach(self, name: str, content: str | bytes, media_type: str) -> None:
        if isinstance(content, str):
            content = scrub(content, self.secret)
        try:
            self.store.attach(self.run_id, name, content, media_type)
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"attach {name}: {type(exc).__name__}: {exc}")

    def outcome(self, outcome: StepOutcome) -> None:
        self.step(outcome.name, outcome.status, outcome.findings, outcome.data)


def crash_outcome(name: str, exc: BaseException, partial: dict[str, Any]) -> StepOutcome:
    out = StepOutcome(name=name, data=dict(partial))
    out.add(
        Finding(
            f"ACC-TOOL-{name.upper()}", Severity.FAIL, Category.OTHER,
            f"vllm-medic could not complete the {name} step (tool error, not a server verdict)",
            [f"{type(exc).__name__}: {exc}"],
            ["rerun with VLLM_MEDIC_DEBUG=1 and report the traceback"],
        )
    )  # fmt: skip
    out.data["tool_error"] = f"{type(exc).__name__}: {exc}"
    return out.settle()


async def run_steps(
    opts: AcceptOptions,
    recorder: Recorder,
    summary: RunSummary,
    live: Any = None,
    start_distributed: StartDistributed | None = None,
) -> None:
    from vllm_medic.serve.client import ServerClient

    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()
    reasons: list[str] = []

    def on_sigterm() -> None:
        reasons.append("terminated by SIGTERM")
        if main_task is not None:
            main_task.cancel()

    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGTERM, on_sigterm)
    partial: dict[str, dict[str, Any]] = {}

    def progress(name: str, data: dict[str, Any]) -> None:
        partial[name] = dict(data)
        recorder.step(name, "running", [], data)

    ctx: RunContext | None = None
    try:
        async with ServerClient(
            opts.url, api_key=opts.api_key, timeout_s=opts.request_timeout_s, model=opts.model
        ) as client:
            ctx = RunContext(
                opts=opts,
                client=client,
                progress=progress,
                attach=recorder.attach,
                start_distributed=start_distributed,
            )
            ctx.run_nonce = secrets.token_hex(4)
            ctx.live = live
            for name in opts.steps:
                dead = ctx.engine_dead
                if BY_NAME[name].needs_server and (ctx.server_reachable is False or dead):
                    reason = dead or "the server did not become ready in the start step"
                    outcome = skipped(name, reason)
                    recorder.outcome(outcome)
                    summary.steps.append(outcome)
                    continue
                recorder.step(name, "running", [], {})
                try:
                    outcome = await BY_NAME[name].function()(ctx)
                except asyncio.CancelledError:
                    summary.interrupted = reasons[0] if reasons else "interrupted by Ctrl-C (SIGINT)"
                    outcome = StepOutcome(name=name, status="skipped", data=dict(partial.get(name, {})))
                    outcome.data["interrupted"] = summary.interrupted
                    outcome.data["skipped_reason"] = (
                        f"{summary.interrupted} during this step; partial data kept"
                    )
                except Exception as exc:  # noqa: BLE001 - a step's bug must not lose the other steps' results
                    summary.tool_error = f"{name}: {type(exc).__name__}: {exc}"
                    outcome = crash_outcome(name, exc, partial.get(name, {}))
                recorder.outcome(outcome)
                summary.steps.append(outcome)
                if summary.interrupted:
                    break
    finally:
        if ctx is not None and ctx.distributed is not None:
            with contextlib.suppress(Exception):
                ctx.distributed.close()
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.remove_signal_handler(signal.SIGTERM)


def run_accept(
    opts: AcceptOptions,
    store: Any,
    strict: bool,
    live: Any = None,
    start_distributed: StartDistributed | None = None,
) -> RunSummary:
    meta = {
        "url": opts.url,
        "steps": list(opts.steps),
        "quick": opts.quick,
        "model": opts.model,
        "api_key_env": opts.api_key_env,
        "concurrency": list(opts.concurrency),
        "requests_per_step": opts.requests_per_step,
        "step_duration_s": opts.step_duration_s,
        "error_budget": opts.error_budget,
        "request_timeout_s": opts.request_timeout_s,
        "soak_s": opts.soak_s,
        "logs": [str(p) for p in opts.log_paths],
        "docker": opts.docker,
        "kubectl": opts.kubectl,
        "bundle": str(opts.bundle) if opts.bundle else None,
        "recipe": opts.recipe,
        "strategy": opts.strategy,
    }
    run_id = store.start_run("accept", opts.url, scrub(meta, opts.api_key))
    summary = RunSummary(run_id=run_id, verdict="incomplete")
    recorder = Recorder(store, run_id, opts.api_key)
    finished = False
    try:
        asyncio.run(run_steps(opts, recorder, summary, live, start_distributed))
        summary.verdict = run_verdict(
            summary.steps, interrupted=summary.interrupted is not None, strict=strict
        )
        finished = True
        try:
            if summary.interrupted:
                store.mark_interrupted(run_id, summary.interrupted)
            else:
                store.finish_run(run_id, summary.verdict)
        except Exception as exc:  # noqa: BLE001 - the results are still printed; the store problem is reported
            recorder.errors.append(f"closing the run: {type(exc).__name__}: {exc}")
    except KeyboardInterrupt:
        summary.interrupted = summary.interrupted or "interrupted by Ctrl-C (SIGINT)"
        summary.verdict = "incomplete"
    finally:
        if not finished:
            with contextlib.suppress(Exception):
                store.mark_interrupted(run_id, summary.interrupted or "aborted")
    summary.store_errors = list(recorder.errors)
    return summary
