"""The load generator against the sim over loopback: schedules, token counts, errors, self-check."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from vllm_medic.accept.loadgen import LoadStep, merge_results, run_step
from vllm_medic.serve.client import ServerClient


def body(i: int) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": f"question number {i}"}], "max_tokens": 10}


def test_closed_loop_counts_tokens_from_usage_and_measures_latency(make_sim) -> None:
    sim = make_sim(ttft_ms=20.0, itl_ms=2.0, output_tokens=10, tool_call_parser=None)

    async def go():
        return await run_step(
            lambda: ServerClient(sim.url),
            concurrency=4,
            requests=20,
            body_factory=body,
            metrics_interval_s=0.05,
        )

    r = asyncio.run(go())
    assert r.sent == r.ok == 20 and r.failed == 0
    assert r.completion_tokens == 200  # usage.completion_tokens, not chunk counts
    assert r.prompt_tokens > 0
    pct = r.percentiles()
    assert pct["ttft"]["count"] == 20 and pct["ttft"]["p50"] >= 0.020
    assert pct["e2e"]["p50"] >= pct["ttft"]["p50"]
    assert pct["itl"]["count"] == 20 * 9
    assert pct["tpot"]["p50"] >= 0.002
    assert r.request_throughput > 0 and r.output_throughput > 0
    assert r.valid, r.invalid_reasons
    peaks = r.server_peaks()
    assert peaks["samples"] >= 1 and peaks["running_max"] is not None and peaks["health_failures"] == 0
    d = r.to_dict(with_records=True)
    assert len(d["records"]) == 20 and d["histograms"]["ttft"]["n"] == 20


def test_open_loop_keeps_intended_times_so_queueing_is_counted(make_sim) -> None:
    # Each request takes >= 0.2 s; one slot; 10 requests intended 50 ms apart. A closed-loop client
    # would report ~0.2 s TTFT; from the intended times the later requests waited over a second.
    sim = make_sim(ttft_ms=200.0, itl_ms=1.0, output_tokens=2)

    async def go():
        return await run_step(
            lambda: ServerClient(sim.url), concurrency=1, rate=20.0, requests=10, body_factory=body
        )

    r = asyncio.run(go())
    assert r.ok == 10
    recs = sorted(r.records, key=lambda x: x.index)
    assert [round(x.t_intended, 3) for x in recs] == [round(i * 0.05, 3) for i in range(10)]
    assert recs[-1].queue_delay_s > 1.0
    assert recs[-1].ttft_s >= recs[-1].queue_delay_s + 0.19
    assert r.percentiles()["ttft"]["p99"] > 1.0


def test_errors_by_kind_and_stop_on_error_budget(make_sim) -> None:
    sim = make_sim(error_rate=1.0, error_status=503)
    failures = []

    def budget(rec) -> str | None:
        failures.append(rec)
        return "error budget exceeded (3 failures)" if len(failures) >= 3 else None

    async def go():
        return await run_step(
            lambda: ServerClient(sim.url), concurrency=1, requests=50, body_factory=body, stop_when=budget
        )

    r = asyncio.run(go())
    assert r.stopped_reason == "error budget exceeded (3 failures)"
    assert r.sent == 3 and r.errors_by_kind == {"http_5xx": 3}
    assert r.error_rate == 1.0 and "http_5xx" in r.first_errors[0]


def test_duration_mode_stops_sending_after_the_duration(make_sim) -> None:
    sim = make_sim(ttft_ms=5.0, itl_ms=1.0, output_tokens=3)

    async def go():
        t = time.perf_counter()
        r = await run_step(lambda: ServerClient(sim.url), concurrency=2, duration_s=0.5, body_factory=body)
        return r, time.perf_counter() - t

    r, wall = asyncio.run(go())
    assert r.sent > 2 and r.ok == r.sent
    assert max(x.t_sent for x in r.records) < 0.5
    assert wall < 10


def test_blocked_event_loop_marks_the_step_invalid(make_sim) -> None:
    sim = make_sim(ttft_ms=5.0, itl_ms=1.0, output_tokens=3)

    def slow_body(i: int) -> dict[str, Any]:
        time.sleep(0.05)  # a client that blocks its own event loop
        return body(i)

    async def go():
        return await run_step(
            lambda: ServerClient(sim.url), concurrency=2, requests=10, body_factory=slow_body
        )

    r = asyncio.run(go())
    assert not r.valid
    assert any("event-loop lag" in x for x in r.invalid_reasons)


def test_busy_client_cpu_marks_the_step_invalid(make_sim) -> None:
    sim = make_sim(ttft_ms=1.0, itl_ms=0.5, output_tokens=3)

    def busy_body(i: int) -> dict[str, Any]:
        end = time.thread_time() + 0.1
        while time.thread_time() < end:
            pass
        return body(i)

    async def go():
        return await run_step(
            lambda: ServerClient(sim.url),
            concurrency=1,
            requests=10,
            body_factory=busy_body,
            max_cpu=0.03,  # low on purpose: on a crowded CI box a spinning thread may get ~10% of a core
            max_lag_ms=1000.0,
        )

    r = asyncio.run(go())
    assert not r.valid and r.client_cpu is not None and r.client_cpu > 0.03
    assert any("client CPU" in x for x in r.invalid_reasons)


def test_cancel_keeps_partial_results(make_sim) -> None:
    sim = make_sim(ttft_ms=5.0, itl_ms=5.0, output_tokens=10)
    seen: list[int] = []

    async def go() -> LoadStep:
        step = LoadStep(
            lambda: ServerClient(sim.url),
            concurrency=2,
            requests=10_000,
            body_factory=body,
            on_record=lambda rec: seen.append(rec.index),
        )
        task = asyncio.create_task(step.run())
        for _ in range(400):  # bounded wait until some requests completed
            if len(seen) >= 4:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return step

    step = asyncio.run(go())
    r = step.result
    assert r.interrupted and r.stopped_reason == "interrupted"
    assert r.ok >= 4 and len(r.records) == len(seen) and r.duration_s > 0


def test_server_crash_mid_step_shows_in_errors_and_health(make_sim) -> None:
    sim = make_sim(crash_at_concurrency=4, itl_ms=10.0, output_tokens=30, crash_exit_after_s=0.3)

    async def go():
        return await run_step(
            lambda: ServerClient(sim.url, timeout_s=5),
            concurrency=4,
            requests=12,
            body_factory=lambda i: {**body(i), "max_tokens": 30},
            metrics_interval_s=0.05,
        )

    r = asyncio.run(go())
    assert r.failed > 0 and r.ok < 12
    assert set(r.errors_by_kind) <= {"http_5xx", "disconnect", "refused", "reset"}, r.errors_by_kind
    assert r.server_peaks()["health_failures"] >= 1


def test_merge_results_of_two_client_processes(make_sim) -> None:
    sim = make_sim(ttft_ms=5.0, itl_ms=1.0, output_tokens=5)

    async def go():
        a = await run_step(lambda: ServerClient(sim.url), concurrency=2, requests=6, body_factory=body)
        b = await run_step(lambda: ServerClient(sim.url), concurrency=3, requests=9, body_factory=body)
        return a, b

    a, b = asyncio.run(go())
    m = merge_results([a, b])
    assert m.concurrency == 5 and m.ok == 15
    assert m.hists["ttft"].n == 15
    assert m.hists["ttft"].counts == {
        k: a.hists["ttft"].counts.get(k, 0) + b.hists["ttft"].counts.get(k, 0)
        for k in set(a.hists["ttft"].counts) | set(b.hists["ttft"].counts)
    }
