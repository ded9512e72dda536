"""Step 1, start: bounded readiness wait, /health, /v1/models, /version; with logs, the triage verdict and
every rank registered."""

from __future__ import annotations

import asyncio
from typing import Any

from vllm_medic.accept.context import RunContext
from vllm_medic.accept.logs import rank_summary, read_sources
from vllm_medic.accept.outcome import DOCS_SERVE_ARGS, StepOutcome
from vllm_medic.model import Category, Finding, Severity


async def run_start(ctx: RunContext) -> StepOutcome:
    from vllm_medic.serve.client import EndpointError

    out = StepOutcome("start")
    url = ctx.opts.url
    ready = await ctx.client.wait_ready(deadline_s=ctx.opts.ready_timeout_s)
    out.data["ready"] = ready.to_dict()
    if not ready.ready:
        out.add(not_ready_finding(url, ready.to_dict(), ctx.opts.ready_timeout_s))
        ctx.server_reachable = False
    else:
        ctx.server_reachable = True
        models = ready.models
        out.data["models"] = [{"id": m.get("id"), "max_model_len": m.get("max_model_len")} for m in models]
        chosen = choose_model(models, ctx.opts.model)
        if chosen is None:
            out.add(
                Finding(
                    "ACC-START-004", Severity.FAIL, Category.OTHER,
                    f"model {ctx.opts.model!r} is not served at {url}",
                    [f"GET /v1/models lists: {', '.join(str(m.get('id')) for m in models)}"],
                    ["pass --model with one of the listed ids, or fix --served-model-name on the server"],
                )
            )  # fmt: skip
        else:
            ctx.model = str(chosen.get("id"))
            ctx.client.model = ctx.model
            ctx.max_model_len = chosen.get("max_model_len")
            out.add(
                Finding(
                    "ACC-START-000", Severity.PASS, Category.OTHER,
                    f"server ready in {ready.waited_s:.1f}s, serving {ctx.model}",
                    [f"GET {url}/health → 200 after {ready.attempts} attempt(s)",
                     f"GET /v1/models → {ctx.model} (max_model_len {ctx.max_model_len})"],
                )
            )  # fmt: skip
        try:
            ctx.version = await ctx.client.version()
        except EndpointError as exc:
            out.add(
                Finding(
                    "ACC-START-005", Severity.WARN, Category.OTHER, "GET /version failed",
                    [str(exc)], ["a vLLM server answers /version; check the URL points at vLLM, not a proxy"],
                )
            )  # fmt: skip
        else:
            out.data["version"] = ctx.version
            if ctx.version is None:
                out.add(
                    Finding(
                        "ACC-START-005", Severity.INFO, Category.OTHER,
                        "no /version endpoint (not vLLM, or behind a proxy)", [f"GET {url}/version → 404"],
                    )
                )  # fmt: skip
    if ctx.opts.has_logs:
        await _check_logs(ctx, out)
    else:
        out.data["logs"] = (
            "not given (pass --logs FILE, --docker C or --kubectl POD to check ranks and init errors)"
        )
    return out.settle()


def not_ready_finding(url: str, ready: dict[str, Any], timeout_s: float) -> Finding:
    last = ready.get("last_health") or {}
    kind = last.get("error_kind")
    status = last.get("status")
    evidence = [
        f"polled {url}/health {ready.get('attempts')} time(s) over {ready.get('waited_s', 0):.1f}s "
        f"(--ready-timeout {timeout_s:.0f}s)",
        f"last answer: {last.get('error') or ('HTTP ' + str(status))}",
    ]
    if ready.get("reason"):
        evidence.append(f"reason: {ready['reason']}")
    if kind in ("refused", "dns", "connect_timeout"):
        return Finding(
            "ACC-START-001", Severity.FAIL, Category.OTHER, f"nothing is answering at {url}", evidence,
            ["check the server process is running and listening on that host:port (`ss -ltnp`)",
             "if it is still loading weights, raise --ready-timeout",
             "run `vllm-medic triage` on its log to see why it did not come up"],
        )  # fmt: skip
    if status == 503:
        return Finding(
            "ACC-START-002", Severity.FAIL, Category.OTHER,
            "server answers but /health is 503: the engine is dead or not initialised", evidence,
            ["read the server log for EngineDeadError and the first error before it (`vllm-medic triage LOG`)",
             "restart the server once the cause is fixed"],
        )  # fmt: skip
    reason = str(ready.get("reason") or "")
    if status in (401, 403) or "HTTP 401" in reason or "HTTP 403" in reason:
        return Finding(
            "ACC-START-006", Severity.FAIL, Category.OTHER, "the server rejected our credentials (HTTP 401/403)",
            evidence, ["export the key in an environment variable and pass --api-key-env VAR (never on the command line)"],
        )  # fmt: skip
    return Finding(
        "ACC-START-003", Severity.FAIL, Category.OTHER, "the server did not become ready", evidence,
        ["check the URL is the vLLM OpenAI server (it serves /health and /v1/models)"], [DOCS_SERVE_ARGS],
    )  # fmt: skip


def choose_model(models: list[dict[str, Any]], wanted: str | None) -> dict[str, Any] | None:
    if not models:
        return None
    if wanted is None:
        return models[0]
    for m in models:
        if m.get("id") == wanted or m.get("root") == wanted:
            return m
    return None


async def _check_logs(ctx: RunContext, out: StepOutcome) -> None:
    opts = ctx.opts
    sources = await asyncio.to_thread(read_sources, opts.log_paths, opts.docker, opts.kubectl)
    ctx.log_sources = sources
    out.data["logs"] = [{"source": s.name, "lines": len(s.lines), "error": s.error} for s in sources]
    for s in sources:
        if s.error:
            out.add(
                Finding(
                    "ACC-START-012", Severity.WARN, Category.OTHER, f"could not read log {s.name}", [s.error],
                    ["fix the path/container/pod name so the start-up log can be checked"],
                )
            )  # fmt: skip
    readable = [s for s in sources if not s.error]
    if not readable:
        return
    for f in await asyncio.to_thread(triage_findings, opts):
        out.add(f)
    ranks = rank_summary(readable)
    out.data["ranks"] = {"expected": ranks.expected, "seen": ranks.seen, "workers": ranks.workers}
    for f in rank_findings(ranks):
        out.add(f)


def rank_findings(ranks: Any) -> list[Finding]:
    if ranks.expected is None:
        return [
            Finding(
                "ACC-START-011", Severity.INFO, Category.PARALLEL_LAYOUT,
                "could not tell how many ranks to expect: no engine config line in the log",
                [f"worker prefixes seen: {', '.join(sorted(ranks.workers)) or 'none'}"],
                ["give the log from the start of the server (it has 'Initializing a V1 LLM engine ... with config:')"],
            )
        ]  # fmt: skip
    if ranks.seen == 0 and ranks.expected == 1:
        # Single-process engines (CPU, or older versions) log no per-worker prefix at world size 1.
        return [
            Finding(
                "ACC-START-010", Severity.PASS, Category.PARALLEL_LAYOUT, "single-rank engine started",
                [ranks.expected_evidence or ""],
            )
        ]  # fmt: skip
    if ranks.seen < ranks.expected:
        return [
            Finding(
                "ACC-START-011", Severity.FAIL, Category.PARALLEL_LAYOUT,
                f"only {ranks.seen} of {ranks.expected} ranks registered in the log",
                [ranks.expected_evidence or "",
                 *[f"{name} first seen at {where}" for name, where in sorted(ranks.workers.items())]],
                ["find the missing rank's log (other node / pod) and triage it: `vllm-medic triage LOG`",
                 "check every node reached the rendezvous (--master-addr, --nnodes, --node-rank)"],
            )
        ]  # fmt: skip
    return [
        Finding(
            "ACC-START-010", Severity.PASS, Category.PARALLEL_LAYOUT,
            f"all {ranks.expected} ranks registered",
            [ranks.expected_evidence or "", *[f"{n} at {w}" for n, w in sorted(ranks.workers.items())][:16]],
        )
    ]  # fmt: skip


def triage_findings(opts: Any) -> list[Finding]:
    """The triage engine's verdict on the start-up log: a root cause found fails the start step."""
    try:
        from vllm_medic.triage import api as triage_api
    except ImportError:
        return [
            Finding(
                "ACC-START-013", Severity.INFO, Category.OTHER,
                "start-up log not triaged: the triage engine is not available in this build",
            )
        ]  # fmt: skip
    from vllm_medic.errors import MedicError

    try:
        result = triage_api.triage(
            [str(p) for p in opts.log_paths],
            docker=[opts.docker] if opts.docker else [],
            kubectl=[opts.kubectl] if opts.kubectl else [],
        )
    except MedicError as exc:
        return [
            Finding(
                "ACC-START-012", Severity.WARN, Category.OTHER, "the start-up log could not be triaged", [str(exc)],
                ["check the log paths / container / pod, or run `vllm-medic triage` on the log by hand"],
            )
        ]  # fmt: skip
    return adapt_triage(result.findings() if result.found else [])


def adapt_triage(findings: list[Any]) -> list[Finding]:
    """Triage findings that name a known root cause fail the start step; an unclassified earliest error
    line (triage's generic match, low confidence) and warnings are kept as warnings."""
    out: list[Finding] = []
    for f in findings:
        if not isinstance(f, Finding):
            f = Finding.from_dict(f)
        generic = "generic" in f.id  # earliest error line without a known signature: low confidence
        if f.severity is Severity.FAIL and not generic:
            out.append(
                Finding(
                    f"ACC-START-020:{f.id}", Severity.FAIL, f.category, f"start-up log: {f.title}", f.evidence,
                    f.fix, f.docs,
                )
            )  # fmt: skip
        elif f.severity in (Severity.WARN, Severity.FAIL):
            out.append(
                Finding(
                    f"ACC-START-021:{f.id}", Severity.WARN, f.category, f"start-up log: {f.title}", f.evidence,
                    f.fix, f.docs,
                )
            )  # fmt: skip
    if not out:
        out.append(
            Finding(
                "ACC-START-014", Severity.PASS, Category.OTHER, "start-up log triaged: no root cause found"
            )
        )
    return out
