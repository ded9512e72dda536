"""The load generator: one step of streamed requests at a fixed concurrency, measured honestly.

API (stable; ``accept``'s ramp/soak and ``cluster``'s Ray actors build on it)::

    step = LoadStep(lambda: ServerClient(url, api_key=key), concurrency=8, requests=64,
                    body_factory=lambda i: {"messages": [...], "max_tokens": 64})
    result = await step.run()          # StepResult; on Ctrl-C/cancel: step.result holds the partial one
    # or: result = await run_step(client_factory, concurrency=8, requests=64, body_factory=...)

Scheduling:
- ``rate=None`` (closed loop): ``concurrency`` workers, each sends its next request when its last ends.
- ``rate=R`` (open loop): request *i* is *intended* at ``t0 + i/R`` (``arrival="poisson"``: seeded
  exponential gaps). At most ``concurrency`` are in flight; a request that has to wait for a free slot
  (or for a late event loop) keeps its intended time, and every latency (TTFT, E2E) is measured from
  it, so queueing delay is counted (no coordinated omission). ``queue_delay`` records the wait.
- The step ends after ``requests`` requests or once ``duration_s`` has passed (no new sends; the
  ones in flight finish or time out). ``stop_when(record) -> str | None`` ends it early with a reason
  (an error budget, say).
- ``on_record(RequestRecord)`` is called as each request ends (write it to the store as you go);
  ``on_stream(i, StreamResult)`` gives the whole stream (with ``keep_chunks=True`` its parsed chunks and
  SSE conformance problems) for checks the loop itself does not make.

Plain-HTTP reads are stamped with the kernel's receive time (Linux), whatever loop runs the step. For
TLS or other systems run it with ``vllm_medic.serve.timedloop.run(...)`` rather than ``asyncio.run``:
there a read is stamped when the poll that found it returned, so a burst of streams (continuous
batching answers all of them in one engine step) is not charged the client's processing of the others.

Measurements: times are taken on socket read (``ServerClient.chat_stream``); tokens come from
``usage`` (``stream_options.include_usage`` is switched on). Per request a ``RequestRecord``; per step
mergeable ``LatencyHistogram``s for ttft, tpot, itl, e2e and queue_delay (see docs/metrics.md).

Self-check: a ticker task measures how late the event loop wakes it (loop lag), and the CPU time of
the loop's thread is compared with wall time. When lag p99 exceeds ``max_lag_ms`` or CPU exceeds
``max_cpu`` (fraction of one core), ``StepResult.valid`` is False with the reason: the numbers then
describe the client, not the server.

Optional: ``metrics_interval_s`` polls ``/metrics`` during the step (KV-cache usage, waiting and
running requests, preemptions) and ``/health`` (flaps), into ``StepResult.server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vllm_medic.accept.histogram import LatencyHistogram
from vllm_medic.serve.client import ErrorKind, ServerClient, StreamResult
from vllm_medic.serve.metrics import KV_CACHE_USAGE, NUM_PREEMPTIONS, REQUESTS_RUNNING, REQUESTS_WAITING

LAG_TICK_S = 0.005
HIST_NAMES = ("ttft", "tpot", "itl", "e2e", "queue_delay")


@dataclass
class RequestRecord:
    index: int
    t_intended: float  # seconds from the step start
    t_sent: float
    ok: bool
    status: int | None
    error_kind: str | None
    error: str | None
    ttft_s: float | None
    tpot_s: float | None
    e2e_s: float | None
    queue_delay_s: float
    prompt_tokens: int | None
    completion_tokens: int | None
    cached_tokens: int | None
    n_chunks: int
    t_done: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ServerSample:
    t: float
    kv_cache_usage: float | None
    waiting: float | None
    running: float | None
    preemptions: float | None
    health_status: int | None
    health_error: str | None


@dataclass
class StepResult:
    concurrency: int
    rate: float | None
    requests_planned: int | None
    duration_planned_s: float | None
    started_at: float = field(default_factory=time.time)  # wall clock, for the record
    sent: int = 0
    ok: int = 0
    failed: int = 0
    errors_by_kind: dict[str, int] = field(default_factory=dict)
    first_errors: list[str] = field(default_factory=list)
    duration_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    hists: dict[str, LatencyHistogram] = field(
        default_factory=lambda: {n: LatencyHistogram() for n in HIST_NAMES}
    )
    loop_lag: LatencyHistogram = field(default_factory=LatencyHistogram)
    client_cpu: float | None = None  # CPU seconds of the loop thread / wall seconds
    valid: bool = True
    invalid_reasons: list[str] = field(default_factory=list)
    stopped_reason: str | None = None
    interrupted: bool = False
    records: list[RequestRecord] = field(default_factory=list)
    server: list[ServerSample] = field(default_factory=list)

    @property
    def timeouts(self) -> int:
        return self.errors_by_kind.get(ErrorKind.TIMEOUT, 0) + self.errors_by_kind.get(ErrorKind.STALL, 0)

    @property
    def error_rate(self) -> float:
        return self.failed / self.sent if self.sent else 0.0

    @property
    def request_throughput(self) -> float:
        return self.ok / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def output_throughput(self) -> float:
        return self.completion_tokens / self.duration_s if self.duration_s > 0 else 0.0

    def percentiles(self) -> dict[str, dict[str, float | int | None]]:
        return {name: h.summary() for name, h in self.hists.items()}

    def server_peaks(self) -> dict[str, float | int | None]:
        def peak(attr: str) -> float | None:
            vals = [getattr(s, attr) for s in self.server if getattr(s, attr) is not None]
            return max(vals) if vals else None

        pre = [s.preemptions for s in self.server if s.preemptions is not None]
        return {
            "kv_cache_usage_max": peak("kv_cache_usage"),
            "waiting_max": peak("waiting"),
            "running_max": peak("running"),
            "preemptions_delta": (pre[-1] - pre[0]) if len(pre) >= 2 else None,
            "health_failures": sum(1 for s in self.server if s.health_status != 200),
            "samples": len(self.server),
        }

    def to_dict(self, with_records: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {
            "concurrency": self.concurrency,
            "rate": self.rate,
            "requests_planned": self.requests_planned,
            "duration_planned_s": self.duration_planned_s,
            "started_at": self.started_at,
            "sent": self.sent,
            "ok": self.ok,
            "failed": self.failed,
            "error_rate": self.error_rate,
            "errors_by_kind": dict(self.errors_by_kind),
            "first_errors": list(self.first_errors),
            "timeouts": self.timeouts,
            "duration_s": self.duration_s,
            "request_throughput": self.request_throughput,
            "output_throughput": self.output_throughput,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "latency": self.percentiles(),
            "histograms": {n: h.to_dict() for n, h in self.hists.items()},
            "loop_lag": self.loop_lag.summary(),
            "client_cpu": self.client_cpu,
            "valid": self.valid,
            "invalid_reasons": list(self.invalid_reasons),
            "stopped_reason": self.stopped_reason,
            "interrupted": self.interrupted,
            "server": self.server_peaks(),
        }
        if with_records:
            d["records"] = [r.to_dict() for r in self.records]
            d["server_samples"] = [s.__dict__ for s in self.server]
        return d


def _with_usage(body: dict[str, Any]) -> dict[str, Any]:
    opts = dict(body.get("stream_options") or {})
    opts["include_usage"] = True
    return {**body, "stream_options": opts}


class LoadStep:
    """One load step; see the module docstring. ``result`` is filled as requests complete."""

    def __init__(
        self,
        client_factory: Callable[[], ServerClient],
        *,
        concurrency: int,
        body_factory: Callable[[int], dict[str, Any]],
        requests: int | None = None,
        duration_s: float | None = None,
        rate: float | None = None,
        arrival: str = "constant",
        timeout_s: float = 120.0,
        stall_timeout_s: float | None = None,
        max_lag_ms: float = 20.0,
        max_cpu: float = 0.9,
        keep_records: bool = True,
        metrics_interval_s: float | None = None,
        stop_when: Callable[[RequestRecord], str | None] | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
        on_stream: Callable[[int, StreamResult], None] | None = None,
        keep_chunks: bool = False,
        seed: int = 0,
        path: str = "/v1/chat/completions",
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if requests is None and duration_s is None:
            raise ValueError("give requests= or duration_s= (or both)")
        if rate is not None and rate <= 0:
            raise ValueError("rate must be > 0")
        if arrival not in ("constant", "poisson"):
            raise ValueError("arrival must be constant or poisson")
        self.client_factory = client_factory
        self.concurrency = concurrency
        self.body_factory = body_factory
        self.requests = requests
        self.duration_s = duration_s
        self.rate = rate
        self.arrival = arrival
        self.timeout_s = timeout_s
        self.stall_timeout_s = stall_timeout_s
        self.max_lag_ms = max_lag_ms
        self.max_cpu = max_cpu
        self.keep_records = keep_records
        self.metrics_interval_s = metrics_interval_s
        self.stop_when = stop_when
        self.on_record = on_record
        self.on_stream = on_stream
        self.keep_chunks = keep_chunks
        self.seed = seed
        self.path = path
        self.result = StepResult(concurrency, rate, requests, duration_s)
        self._t0 = 0.0
        self._next = 0
        self._stop = asyncio.Event()
        self._t_last_done = 0.0

    # -- bookkeeping -----------------------------------------------------------------------------
    def _claim(self) -> int | None:
        """Index of the next request to send, or None when the step has sent enough."""
        if self._stop.is_set():
            return None
        if self.requests is not None and self._next >= self.requests:
            return None
        if self.duration_s is not None and time.perf_counter() - self._t0 >= self.duration_s:
            return None
        i = self._next
        self._next += 1
        return i

    def _record(self, i: int, s: StreamResult) -> None:
        r = self.result
        t0 = self._t0
        rec = RequestRecord(
            index=i,
            t_intended=s.t_intended - t0,
            t_sent=s.t_send - t0,
            ok=s.ok,
            status=s.status,
            error_kind=str(s.error_kind) if s.error_kind else None,
            error=s.error,
            ttft_s=s.ttft_s,
            tpot_s=s.tpot_s,
            e2e_s=s.e2e_s,
            queue_delay_s=s.queue_delay_s,
            prompt_tokens=s.prompt_tokens,
            completion_tokens=s.completion_tokens,
            cached_tokens=s.cached_tokens,
            n_chunks=len(s.token_times),
            t_done=(s.t_last or time.perf_counter()) - t0,
        )
        self._t_last_done = max(self._t_last_done, rec.t_done)
        r.hists["queue_delay"].record(rec.queue_delay_s)
        if s.ok:
            r.ok += 1
            h = r.hists
            if rec.ttft_s is not None:
                h["ttft"].record(rec.ttft_s)
            if rec.tpot_s is not None:
                h["tpot"].record(rec.tpot_s)
            if rec.e2e_s is not None:
                h["e2e"].record(rec.e2e_s)
            h["itl"].record_many(s.itl_s)
            r.prompt_tokens += rec.prompt_tokens or 0
            r.completion_tokens += rec.completion_tokens or 0
            r.cached_tokens += rec.cached_tokens or 0
        else:
            r.failed += 1
            kind = rec.error_kind or "other"
            r.errors_by_kind[kind] = r.errors_by_kind.get(kind, 0) + 1
            if len(r.first_errors) < 5:
                r.first_errors.append(f"#{i} {kind}: {rec.error}")
        if self.keep_records:
            r.records.append(rec)
        if self.on_record is not None:
            self.on_record(rec)
        if self.stop_when is not None and not self._stop.is_set():
            reason = self.stop_when(rec)
            if reason:
                r.stopped_reason = reason
                self._stop.set()

    async def _one(self, client: ServerClient, i: int, t_intended: float) -> None:
        self.result.sent += 1
        s = await client.chat_stream(
            _with_usage(self.body_factory(i)),
            t_intended=t_intended,
            timeout_s=self.timeout_s,
            stall_timeout_s=self.stall_timeout_s,
            keep_chunks=self.keep_chunks,
            path=self.path,
        )
        self._record(i, s)
        if self.on_stream is not None:
            self.on_stream(i, s)

    # -- schedules -------------------------------------------------------------------------------
    async def _closed_loop(self, client: ServerClient) -> None:
        async def worker() -> None:
            while (i := self._claim()) is not None:
                await self._one(client, i, time.perf_counter())

        await asyncio.gather(*(worker() for _ in range(self.concurrency)))

    async def _open_loop(self, client: ServerClient) -> None:
        assert self.rate is not None
        rng = random.Random(self.seed)
        slots = asyncio.Semaphore(self.concurrency)
        tasks: set[asyncio.Task[None]] = set()
        t_next = self._t0

        async def run_one(i: int, t_intended: float) -> None:
            try:
                await self._one(client, i, t_intended)
            finally:
                slots.release()

        try:
            while True:
                delay = t_next - time.perf_counter()
                if delay > 0:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self._stop.wait(), delay)
                if self.duration_s is not None and t_next - self._t0 >= self.duration_s:
                    break
                i = self._claim()
                if i is None:
                    break
                await slots.acquire()  # waiting here is queueing: t_intended stays t_next
                task = asyncio.create_task(run_one(i, t_next))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                gap = rng.expovariate(self.rate) if self.arrival == "poisson" else 1.0 / self.rate
                t_next += gap
            if tasks:
                await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()

    # -- self-check and server sampling ----------------------------------------------------------
    async def _lag_ticker(self) -> None:
        perf = time.perf_counter
        while True:
            t = perf()
            await asyncio.sleep(LAG_TICK_S)
            self.result.loop_lag.record(max(0.0, perf() - t - LAG_TICK_S))

    async def _sample_once(self, client: ServerClient) -> None:
        t = time.perf_counter() - self._t0
        h = await client.health(timeout_s=5.0)
        kv = waiting = running = pre = None
        try:
            m = await client.metrics()
            kv = m.gauge(KV_CACHE_USAGE, agg="max")
            waiting = m.gauge(REQUESTS_WAITING)
            running = m.gauge(REQUESTS_RUNNING)
            pre = m.counter(NUM_PREEMPTIONS)
        except Exception:  # noqa: BLE001 - a failed scrape is recorded as missing values
            pass
        self.result.server.append(ServerSample(t, kv, waiting, running, pre, h.status, h.error))

    async def _sampler(self, client: ServerClient) -> None:
        assert self.metrics_interval_s is not None
        while True:
            await self._sample_once(client)
            await asyncio.sleep(self.metrics_interval_s)

    def _judge(self, cpu_s: float, wall_s: float) -> None:
        r = self.result
        r.client_cpu = cpu_s / wall_s if wall_s > 0 else None
        lag_p99 = r.loop_lag.percentile(99)
        if lag_p99 is not None and lag_p99 * 1000.0 > self.max_lag_ms:
            r.valid = False
            r.invalid_reasons.append(
                f"client event-loop lag p99 {lag_p99 * 1000:.1f} ms > {self.max_lag_ms:g} ms: "
                "the load generator could not keep up; latencies include client delay"
            )
        if r.client_cpu is not None and r.client_cpu > self.max_cpu:
            r.valid = False
            r.invalid_reasons.append(
                f"client CPU {r.client_cpu * 100:.0f}% of a core > {self.max_cpu * 100:.0f}%: "
                "the load generator is saturated; use more client processes (cluster) or lower concurrency"
            )

    async def run(self) -> StepResult:
        client = self.client_factory()
        r = self.result
        self._t0 = time.perf_counter()
        cpu0 = time.thread_time()
        helpers = [asyncio.create_task(self._lag_ticker())]
        if self.metrics_interval_s:
            helpers.append(asyncio.create_task(self._sampler(client)))
        try:
            if self.rate is None:
                await self._closed_loop(client)
            else:
                await self._open_loop(client)
            if self.metrics_interval_s:  # one last look at the server after the load
                helpers[-1].cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await helpers[-1]
                await self._sample_once(client)
        except asyncio.CancelledError:
            r.interrupted = True
            r.stopped_reason = r.stopped_reason or "interrupted"
            raise
        finally:
            wall = time.perf_counter() - self._t0
            cpu = time.thread_time() - cpu0
            for h in helpers:
                h.cancel()
            for h in helpers:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await h
            r.duration_s = self._t_last_done if self._t_last_done > 0 else wall
            self._judge(cpu, wall)
            with contextlib.suppress(Exception):
                await asyncio.shield(client.aclose())
        return r


async def run_step(client_factory: Callable[[], ServerClient], **kwargs: Any) -> StepResult:
    """``LoadStep(client_factory, **kwargs).run()``; see LoadStep for the keyword arguments."""
    return await LoadStep(client_factory, **kwargs).run()


def merge_results(results: list[StepResult]) -> StepResult:
    """Combine the same step run by several client processes (histograms merge exactly)."""
    if not results:
        raise ValueError("nothing to merge")
    first = results[0]
    out = StepResult(
        sum(r.concurrency for r in results), first.rate, first.requests_planned, first.duration_planned_s
    )
    out.started_at = min(r.started_at for r in results)
    for r in results:
        out.sent += r.sent
        out.ok += r.ok
        out.failed += r.failed
        for k, v in r.errors_by_kind.items():
            out.errors_by_kind[k] = out.errors_by_kind.get(k, 0) + v
        out.first_errors.extend(r.first_errors[: max(0, 5 - len(out.first_errors))])
        out.prompt_tokens += r.prompt_tokens
        out.completion_tokens += r.completion_tokens
        out.cached_tokens += r.cached_tokens
        for name, h in r.hists.items():
            out.hists[name].merge(h)
        out.loop_lag.merge(r.loop_lag)
        out.records.extend(r.records)
        out.server.extend(r.server)
        out.valid = out.valid and r.valid
        out.invalid_reasons.extend(r.invalid_reasons)
        out.interrupted = out.interrupted or r.interrupted
        out.stopped_reason = out.stopped_reason or r.stopped_reason
    out.duration_s = max(r.duration_s for r in results)
    cpus = [r.client_cpu for r in results if r.client_cpu is not None]
    out.client_cpu = max(cpus) if cpus else None
    return out
