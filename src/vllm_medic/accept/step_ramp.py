"""Step 4, ramp: concurrency raised step by step; per level the latency percentiles, throughput, errors,
KV usage, queue, preemptions and restarts; stop at the first level that breaks and say why."""

from __future__ import annotations

import re
from typing import Any

from vllm_medic.accept.context import RunContext
from vllm_medic.accept.outcome import StepOutcome
from vllm_medic.accept.traffic import (
    SERVER_GONE_KINDS,
    LevelRun,
    health_failures,
    ms_percentiles,
    run_level,
)
from vllm_medic.model import Category, Finding, Severity

OOM_LINE = re.compile(r"out of memory|OutOfMemoryError|CUDA error: out of memory|OOM", re.IGNORECASE)
ENGINE_DEATH_LINE = re.compile(
    r"EngineDeadError|Engine core .*died|Worker proc .* died|EngineCore.*(?:died|failed)"
)
KV_FULL = 0.99
HEALTH_AFTER_BREAK_S = 10.0


def summarise_level(run: LevelRun) -> dict[str, Any]:
    """One level in the sheet's canonical shape (see store/views.py)."""
    from vllm_medic.serve.metrics import NUM_PREEMPTIONS, diff

    res = run.result
    pct = res.percentiles()
    peaks = res.server_peaks()
    lag = res.loop_lag.summary()
    level: dict[str, Any] = {
        "concurrency": run.concurrency,
        "status": "ok",
        "reason": "",
        "requests": res.sent,
        "ok": res.ok,
        "errors": dict(res.errors_by_kind),
        "error_count": res.failed,
        "timeouts": res.timeouts,
        "ttft_ms": ms_percentiles(pct["ttft"]),
        "tpot_ms": ms_percentiles(pct["tpot"]),
        "itl_ms": ms_percentiles(pct["itl"]),
        "e2e_ms": ms_percentiles(pct["e2e"]),
        "queue_delay_ms": ms_percentiles(pct["queue_delay"]),
        "wall_s": round(res.duration_s, 3),
        "throughput": {
            "requests_per_s": round(res.request_throughput, 3),
            "output_tokens_per_s": round(res.output_throughput, 2),
        },
        "kv_cache_usage_max": peaks["kv_cache_usage_max"],
        "queue_max": peaks["waiting_max"],
        "running_max": peaks["running_max"],
        "health_checks": peaks["samples"],
        "health_failures": health_failures(res)[:20],
        "self_check": {
            "valid": res.valid,
            "reasons": list(res.invalid_reasons),
            "client_cpu": None if res.client_cpu is None else round(res.client_cpu, 3),
            "loop_lag_p99_ms": None if lag.get("p99") is None else round(lag["p99"] * 1000.0, 2),
        },
        "stopped_reason": res.stopped_reason,
        "gpu_memory_peak_mib": run.gpu_memory_peak_mib,
        "gpu_memory_source": run.gpu_memory_source,
        "preemptions": peaks["preemptions_delta"],
        "error_examples": [str(e)[:300] for e in res.first_errors[:3]],
    }
    if run.metrics_before is not None and run.metrics_after is not None:
        delta = diff(run.metrics_before, run.metrics_after)
        level["preemptions"] = delta.counter(NUM_PREEMPTIONS)
        # A vLLM counter that went backwards means the engine restarted between the two scrapes.
        level["engine_restarts"] = len({r for r in delta.resets if str(r).startswith("vllm:")})
    return level


def break_reason(
    level: dict[str, Any], error_budget: float, log_hits: dict[str, list[str]]
) -> tuple[str, str] | None:
    """(kind, explanation) when this level broke, else None. Kinds: oom, engine_death, kv_full,
    client_saturation, queueing, errors."""
    n = level["requests"] or 0
    errors = level["error_count"]
    kinds: dict[str, int] = level["errors"]
    gone = sum(kinds.get(k, 0) for k in SERVER_GONE_KINDS)
    if log_hits.get("oom"):
        return "oom", f"server OOM in the log: {log_hits['oom'][0]}"
    health_503 = any(h.get("status") == 503 for h in level["health_failures"])
    dead_replies = [e for e in level.get("error_examples", []) if ENGINE_DEATH_LINE.search(e)]
    if dead_replies and not log_hits.get("engine_death"):
        log_hits = {**log_hits, "engine_death": [f"server answered: {dead_replies[0]}"]}
    refused = any(h.get("error_kind") == "unreachable" for h in level["health_failures"])
    restarted = bool(level.get("engine_restarts")) and errors > 0
    if health_503 or log_hits.get("engine_death") or restarted:
        why = (
            "/health answered 503"
            if health_503
            else (log_hits.get("engine_death") or ["vLLM counters went backwards (engine restarted)"])[0]
        )
        return "engine_death", f"engine death at concurrency {level['concurrency']}: {why}"
    if refused or (n and gone >= max(1, errors // 2) and gone > 0):
        return "engine_death", (
            f"server gone at concurrency {level['concurrency']}: {gone} request(s) failed with "
            f"{', '.join(k for k in SERVER_GONE_KINDS if kinds.get(k))}"
            + ("; /health unreachable" if refused else "")
        )
    if level["self_check"].get("valid") is False:
        return "client_saturation", (
            f"the load generator itself saturated at concurrency {level['concurrency']} "
            f"({'; '.join(level['self_check'].get('reasons') or ['self-check failed'])}): this level measures the "
            "client, not the server"
        )
    budget = max(0, int(error_budget * n))
    kv = level.get("kv_cache_usage_max")
    if errors > budget:
        if (kv is not None and kv >= KV_FULL) or (level.get("preemptions") or 0) > 0:
            return "kv_full", (
                f"KV cache full at concurrency {level['concurrency']}: usage max {kv}, "
                f"preemptions {level.get('preemptions')}, {errors}/{n} requests failed"
            )
        if level["timeouts"] and (level.get("queue_max") or 0) > 0:
            return "queueing", (
                f"queueing at concurrency {level['concurrency']}: {level['timeouts']} timeouts with up to "
                f"{level['queue_max']:.0f} requests waiting"
            )
        return "errors", (
            f"{errors}/{n} requests failed at concurrency {level['concurrency']} (budget {budget}): "
            + ", ".join(f"{k}={v}" for k, v in sorted(kinds.items()))
        )
    return None


FIXES = {
    "oom": (Category.OOM_RUNTIME, [
        "lower --max-num-seqs or --max-num-batched-tokens, or --gpu-memory-utilization, and rerun the ramp",
        "check activation memory for long prompts: `vllm-medic plan` sizes KV and weights per GPU",
    ]),
    "engine_death": (Category.OTHER, [
        "read the server log around the failure: `vllm-medic triage LOG` (look for EngineDeadError and what preceded it)",
        "rerun the ramp with --logs so the cause lands on the sheet",
    ]),
    "kv_full": (Category.OOM_RUNTIME, [
        "the KV cache cannot hold this many sequences: cap --max-num-seqs at the last good level, or add memory "
        "(--gpu-memory-utilization, more GPUs, FP8 KV cache)",
    ]),
    "queueing": (Category.OTHER, [
        "requests wait longer than --request-timeout: cap concurrency at the last good level or scale out",
    ]),
    "errors": (Category.OTHER, [
        "look at the error kinds and the server log at this level; rerun with --logs",
    ]),
    "client_saturation": (Category.OTHER, [
        "run accept from a machine with more free CPU, or lower the ramp cap; the server was not the limit here",
    ]),
}  # fmt: skip


def scan_logs(ctx: RunContext, start_line: dict[str, int]) -> dict[str, list[str]]:
    """New OOM / engine-death lines in the log files since the last scan (files only: cheap to reread)."""
    hits: dict[str, list[str]] = {"oom": [], "engine_death": []}
    for path in ctx.opts.log_paths:
        try:
            lines = path.read_text("utf-8", "replace").splitlines()
        except OSError:
            continue
        first = start_line.get(str(path), 0)
        for i, line in enumerate(lines[first:], start=first + 1):
            if OOM_LINE.search(line):
                hits["oom"].append(f"{path}:{i}: {line.strip()[:300]}")
            elif ENGINE_DEATH_LINE.search(line):
                hits["engine_death"].append(f"{path}:{i}: {line.strip()[:300]}")
        start_line[str(path)] = len(lines)
    return hits


async def run_ramp(ctx: RunContext) -> StepOutcome:
    out = StepOutcome("ramp")
    opts = ctx.opts
    levels: list[dict[str, Any]] = []
    out.data.update(
        {
            "levels": levels,
            "plan": {
                "concurrency": list(opts.concurrency),
                "requests_per_step": opts.requests_per_step,
                "step_duration_s": opts.step_duration_s,
                "max_tokens": opts.max_tokens,
                "error_budget": opts.error_budget,
            },
        }
    )
    log_pos: dict[str, int] = {}
    scan_logs(ctx, log_pos)  # skip what was there before the ramp
    last_good: int | None = None
    for c in opts.concurrency:
        requests = None if opts.step_duration_s else max(opts.requests_per_step or 1, c)

        def keep_partial(result: Any, c: int = c) -> None:
            partial = summarise_level(LevelRun(c, result))
            partial.update(status="interrupted", reason="interrupted during this level")
            levels.append(partial)
            ctx.progress("ramp", out.data)

        run = await run_level(
            ctx, c, requests, opts.step_duration_s, on_partial=keep_partial, label=f"ramp level c={c}"
        )
        level = summarise_level(run)
        broke = break_reason(level, opts.error_budget, scan_logs(ctx, log_pos))
        if broke:
            level["status"] = "invalid" if broke[0] == "client_saturation" else "broken"
            level["reason"] = broke[1]
            level["break_kind"] = broke[0]
        levels.append(level)
        ctx.progress("ramp", out.data)
        if broke:
            out.data["stop_reason"] = broke[1]
            out.data["stop_kind"] = broke[0]
            break
        last_good = c
    out.data["max_sustainable_concurrency"] = last_good
    # A limit was found only when a level broke; otherwise the highest level tried is a lower bound.
    out.data["limit_found"] = out.data.get("stop_kind") not in (None, "client_saturation")
    out.data["highest_tried"] = levels[-1]["concurrency"] if levels else None
    ctx.sustainable_concurrency = last_good
    if out.data.get("stop_kind"):
        await _mark_engine_after_break(ctx, out.data, levels[-1]["concurrency"])
    for f in ramp_findings(levels, last_good, out.data.get("stop_kind"), out.data.get("stop_reason")):
        out.add(f)
    return out.settle()


async def _mark_engine_after_break(ctx: RunContext, data: dict[str, Any], level: int) -> None:
    """After any break, ask the server whether it still answers (never assume from the break's kind):
    an OOM, a KV-full or an error-budget break can leave the engine dead or alive. When /health does not
    answer 200 the engine is marked dead with what it answered, and later load steps are skipped."""
    health = await ctx.client.health(timeout_s=HEALTH_AFTER_BREAK_S)
    data["health_after_break"] = health.to_dict()
    if health.ok and data["stop_kind"] != "engine_death":
        return
    if health.ok:  # it died during the level and answers again (restarted): not the engine that was ramped
        why = f"{data['stop_reason']}; /health answers again (restarted)"
    else:
        why = f"/health {'answered HTTP ' + str(health.status) if health.status else 'unreachable'} after the break"
        if health.status is None and health.error_kind:
            why += f" ({health.error_kind})"
    ctx.engine_dead = f"engine dead at ramp level {level}: {why}"
    data["engine_dead"] = ctx.engine_dead


def _level_line(level: dict[str, Any]) -> str:
    e2e = (level.get("e2e_ms") or {}).get("p99")
    ttft = (level.get("ttft_ms") or {}).get("p99")
    tput = (level.get("throughput") or {}).get("output_tokens_per_s")
    kv = level.get("kv_cache_usage_max")
    kv_text = "n/a" if kv is None else f"{kv * 100:.1f}%"
    return (
        f"c={level['concurrency']}: {level['ok']}/{level['requests']} ok, TTFT p99 {ttft} ms, E2E p99 {e2e} ms, "
        f"{tput} tok/s, KV max {kv_text}, queue max {level.get('queue_max')}, "
        f"errors {level['errors'] or 0}"
    )


def ramp_findings(
    levels: list[dict[str, Any]], last_good: int | None, stop_kind: str | None, stop_reason: str | None
) -> list[Finding]:
    evidence = [_level_line(lv) for lv in levels]
    extra = flap_findings(levels)
    if stop_kind is None:
        top = levels[-1]["concurrency"] if levels else None
        return [
            Finding(
                "ACC-RAMP-000",
                Severity.PASS,
                Category.OTHER,
                f"every level up to concurrency {top} held",
                evidence,
            ),
            *extra,
        ]
    category, fix = FIXES[stop_kind]
    broken = levels[-1]
    evidence = [stop_reason or "", *evidence, *[f"error: {e}" for e in broken.get("error_examples", [])]]
    if stop_kind == "client_saturation":
        return [
            Finding(
                "ACC-RAMP-005", Severity.WARN, category,
                f"level {broken['concurrency']} is invalid: the client saturated (last valid level {last_good})",
                evidence, fix,
            ),
            *extra,
        ]  # fmt: skip
    ids = {"oom": "ACC-RAMP-001", "engine_death": "ACC-RAMP-002", "kv_full": "ACC-RAMP-003",
           "queueing": "ACC-RAMP-004", "errors": "ACC-RAMP-006"}  # fmt: skip
    titles = {
        "oom": "server ran out of memory", "engine_death": "the engine died / the server went away",
        "kv_full": "KV cache full", "queueing": "requests queued past the timeout", "errors": "error budget exceeded",
    }  # fmt: skip
    return [
        Finding(
            ids[stop_kind], Severity.FAIL, category,
            f"ramp broke at concurrency {broken['concurrency']}: {titles[stop_kind]} (last good level: {last_good})",
            evidence, fix,
        ),
        *extra,
    ]  # fmt: skip


def flap_findings(levels: list[dict[str, Any]]) -> list[Finding]:
    """/health failures during levels that otherwise held: a liveness probe would have restarted the pod."""
    flaps = [
        f"c={lv['concurrency']}: /health failed {len(lv['health_failures'])}x "
        f"({', '.join(sorted({str(h.get('error_kind')) for h in lv['health_failures']}))})"
        for lv in levels
        if lv.get("health_failures") and lv.get("status") == "ok"
    ]
    if not flaps:
        return []
    return [
        Finding(
            "ACC-RAMP-007", Severity.WARN, Category.OTHER,
            "/health failed during levels that otherwise held (health flaps)", flaps,
            ["check the server log at those times; a slow /health under load gets a pod restarted by its "
             "liveness probe: give the probe a longer timeout"],
        )
    ]  # fmt: skip
