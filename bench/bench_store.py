#!/usr/bin/env python3
"""Benchmark the run history (the store `accept` writes through) and rendering a sheet.

Measurements, each against a named baseline measured in the same run:

1. Writing measurements: `record_events` in batches of B per transaction vs the baseline of one
   `record_event` (one committed transaction) per measurement; events/s median of R repetitions,
   ratio batched/single. Every write is committed before the call returns in both cases.
2. Reading and rendering: `get_run` + `render_sheet` of a run holding N soak samples and per-request
   events, median wall of R; baseline: `get_run` alone (the database part), ratio render/read.

Usage: .venv/bin/python bench/bench_store.py [--db URL] [--events 2000] [--batch 100] [--runs 5]
(default --db: a fresh SQLite file in a temp dir; pass a postgresql+psycopg:// URL to measure a team DB).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from vllm_medic.report.html import render_sheet
from vllm_medic.store.api import open_store
from vllm_medic.store.step_row import StepRow


def _per_second(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def bench_writes(url: str, events: int, batch: int, runs: int) -> tuple[list[float], list[float]]:
    store = open_store(url)
    single, batched = [], []
    payload = {"ttft_ms": 12.5, "e2e_ms": 840.0, "completion_tokens": 64, "ok": True, "error_kind": None}
    for _ in range(runs):
        rid = store.start_run("bench", "http://127.0.0.1:0", {})
        t0 = time.perf_counter()
        for i in range(events):
            store.record_event(rid, "request", {**payload, "i": i})
        single.append(_per_second(events, time.perf_counter() - t0))
        rid = store.start_run("bench", "http://127.0.0.1:0", {})
        t0 = time.perf_counter()
        for start in range(0, events, batch):
            store.record_events(
                rid, "request", [{**payload, "i": i} for i in range(start, min(events, start + batch))]
            )
        batched.append(_per_second(events, time.perf_counter() - t0))
    store.close()
    return single, batched


def bench_render(url: str, events: int, runs: int) -> tuple[list[float], list[float], int]:
    store = open_store(url)
    rid = store.start_run("accept", "http://127.0.0.1:0", {})
    for c in (1, 2, 4, 8, 16, 32):
        store.record_event(
            rid,
            "ramp_level",
            {
                "concurrency": c,
                "ttft_ms": {"p50": 10.0 * c, "p99": 30.0 * c},
                "throughput": {"output_tokens_per_s": 100.0 * c},
            },
        )
    store.record_events(
        rid,
        "soak_sample",
        [{"t_s": float(t), "kv_cache_usage": 0.3, "e2e_p99_ms": 900.0} for t in range(600)],
    )
    for start in range(0, events, 500):
        store.record_events(
            rid, "request", [{"i": i, "ttft_ms": 11.0} for i in range(start, min(events, start + 500))]
        )
    for name in ("start", "basic", "prefix_reuse", "ramp", "soak", "archive"):
        store.record_step(rid, StepRow(name, "pass"))
    store.finish_run(rid, "pass")
    read, render = [], []
    size = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        run = store.get_run(rid)
        t1 = time.perf_counter()
        html = render_sheet(run)
        t2 = time.perf_counter()
        read.append(t1 - t0)
        render.append(t2 - t0)
        size = len(html)
    store.close()
    return read, render, size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", default=None)
    ap.add_argument("--events", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or f"sqlite:///{Path(tmp) / 'bench.db'}"
        print(f"store: {url.split('@')[-1]}  events={args.events} batch={args.batch} runs={args.runs}")
        single, batched = bench_writes(url, args.events, args.batch, args.runs)
        ms, mb = statistics.median(single), statistics.median(batched)
        print(f"write  baseline one event per transaction : median {ms:10.0f} events/s")
        print(
            f"write  {args.batch} events per transaction         : median {mb:10.0f} events/s  ratio {mb / ms:.1f}x"
        )
        read, render, size = bench_render(url, args.events * 5, args.runs)
        mr, mt = statistics.median(read), statistics.median(render)
        print(f"read   baseline get_run ({args.events * 5 + 606} events)   : median {mr * 1000:8.1f} ms")
        print(
            f"render get_run + render_sheet ({size // 1024} KiB) : median {mt * 1000:8.1f} ms  ratio {mt / mr:.2f}x"
        )


if __name__ == "__main__":
    main()
