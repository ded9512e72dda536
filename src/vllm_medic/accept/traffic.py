"""Traffic for the ramp and soak steps, and what is watched while it runs.

``run_level`` drives one concurrency level: the serve engineer's open-loop load generator
(``vllm_medic.accept.loadgen``) when it is importable, else a closed-loop fallback (``concurrency``
workers each sending back to back), whose self-check is reported as ``unavailable``. Alongside the
traffic a watcher polls ``/health`` and ``/metrics`` (bounded interval) for health flaps, KV-cache
usage, queue length and preemptions.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Any

from vllm_medic.accept.context import RunContext, probes

WATCH_INTERVAL_S = 1.0
SERVER_GONE_KINDS = ("refused", "reset", "disconnect", "connect_timeout", "dns")
TIMEOUT_KINDS = ("timeout", "stall")


@dataclass
class WatchLog:
    health_checks: int = 0
    health_failures: list[dict[str, Any]] = field(default_factory=list)
    kv_usage: list[tuple[float, float]] = field(default_factory=list)  # (t since start, 0..1)
    waiting_max: float | None = None
    running_max: float | None = None
    metrics_errors: int = 0

    @property
    def kv_usage_max(self) -> float | None:
        return max((v for _, v in self.kv_usage), default=None)

    @property
    def health_503(self) -> bool:
        return any(h.get("status") == 503 for h in self.health_failures)


@dataclass
class LevelRun:
    concurrency: int
    results: list[Any] = field(default_factory=list)  # serve.client.StreamResult
    wall_s: float = 0.0
    self_check: dict[str, Any] = field(default_factory=dict)
    watch: WatchLog = field(default_factory=WatchLog)
    metrics_before: Any = None
    metrics_after: Any = None


def request_body(max_tokens: int) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": probes()["load_prompt"]}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
    }


async def _watch(ctx: RunContext, log: WatchLog, stop: asyncio.Event, t0: float) -> None:
    from vllm_medic.serve.client import EndpointError
    from vllm_medic.serve.metrics import KV_CACHE_USAGE, REQUESTS_RUNNING, REQUESTS_WAITING

    while True:
        final = stop.is_set()  # one last look after the traffic stopped: a crash shows up there
        health = await ctx.client.health(timeout_s=5.0)
        log.health_checks += 1
        if not health.ok:
            log.health_failures.append(
                {
                    "t_s": round(time.perf_counter() - t0, 2),
                    "status": health.status,
                    "error_kind": health.error_kind,
                }
            )
        try:
            m = await ctx.client.metrics()
        except EndpointError:
            log.metrics_errors += 1
        else:
            kv = m.gauge(KV_CACHE_USAGE, agg="max")
            if kv is not None:
                log.kv_usage.append((round(time.perf_counter() - t0, 2), kv))
            for attr, names in (("waiting_max", REQUESTS_WAITING), ("running_max", REQUESTS_RUNNING)):
                v = m.gauge(names)
                if v is not None:
                    cur = getattr(log, attr)
                    setattr(log, attr, v if cur is None else max(cur, v))
        if final:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=WATCH_INTERVAL_S)


async def _metrics_or_none(ctx: RunContext) -> Any:
    from vllm_medic.serve.client import EndpointError

    try:
        return await ctx.client.metrics()
    except EndpointError:
        return None


async def _closed_loop(
    ctx: RunContext, concurrency: int, requests: int | None, duration_s: float | None, body: dict[str, Any]
) -> list[Any]:
    results: list[Any] = []
    remaining = [requests if requests is not None else math.inf]
    deadline = time.perf_counter() + duration_s if duration_s is not None else math.inf

    async def worker() -> None:
        while remaining[0] > 0 and time.perf_counter() < deadline:
            remaining[0] -= 1
            res = await ctx.client.chat_stream(
                body, timeout_s=ctx.opts.request_timeout_s, stall_timeout_s=ctx.opts.request_timeout_s,
                keep_chunks=False,
            )  # fmt: skip
            results.append(res)
            if res.error_kind in SERVER_GONE_KINDS and res.error_kind != "disconnect":
                # Nothing listening any more: stop hammering a dead port; the verdict says why.
                remaining[0] = 0

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return results


async def run_level(
    ctx: RunContext, concurrency: int, requests: int | None, duration_s: float | None
) -> LevelRun:
    body = request_body(ctx.opts.max_tokens)
    run = LevelRun(concurrency=concurrency)
    run.metrics_before = await _metrics_or_none(ctx)
    stop = asyncio.Event()
    t0 = time.perf_counter()
    watcher = asyncio.create_task(_watch(ctx, run.watch, stop, t0))
    try:
        loadgen = _loadgen()
        if loadgen is not None:
            run.results, run.self_check = await loadgen(ctx, concurrency, requests, duration_s, body)
        else:
            run.results = await _closed_loop(ctx, concurrency, requests, duration_s, body)
            run.self_check = {"valid": True, "mode": "closed-loop fallback", "checked": False}
    finally:
        run.wall_s = time.perf_counter() - t0
        stop.set()
        try:
            await asyncio.wait_for(watcher, timeout=15.0)
        except (TimeoutError, asyncio.CancelledError):
            watcher.cancel()
    run.metrics_after = await _metrics_or_none(ctx)
    return run


def _loadgen() -> Any:
    """The open-loop generator's adapter, or None while it is not part of this build."""
    try:
        from vllm_medic.accept import loadgen  # noqa: F401
    except ImportError:
        return None
    adapter = getattr(loadgen, "run_for_accept", None)
    return adapter if callable(adapter) else None


def percentiles_ms(values: list[float]) -> dict[str, float] | None:
    clean = sorted(v for v in values if v is not None)
    if not clean:
        return None
    out = {}
    for name, q in (("p50", 0.50), ("p90", 0.90), ("p95", 0.95), ("p99", 0.99)):
        idx = min(len(clean) - 1, max(0, math.ceil(q * len(clean)) - 1))
        out[name] = round(clean[idx] * 1000.0, 2)
    return out
