"""How fast the health parsers read big logs, against the cheapest possible scan of the same text.

  kernel log   parse_xid_events on a 200,000-line dmesg (the cap kernel_log.py reads): real gpud Xid 119
               lines (tests/data/health) spread among ordinary boot lines
               baseline: a substring scan that only finds the lines containing "NVRM: Xid"
  nccl path    parse_nccl_logs on 16 ranks x 10,000 NCCL INFO lines built from the real nccl#707 lines
               baseline: splitting the same text into lines and testing for " NCCL INFO "

Prints the median of N runs for each and the ratio parser / baseline (the price of real parsing).
Usage: python bench/health_parse.py [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from vllm_medic.collect.health.xid import parse_xid_events  # noqa: E402
from vllm_medic.health.nccl_path import parse_nccl_logs  # noqa: E402

DATA = ROOT / "tests" / "data" / "health"


def kernel_log(lines: int = 200_000) -> str:
    text = (DATA / "kernel" / "dmesg-T-xid-119-gsp-timeout-xe9680-gpud.log").read_text()
    real = [ln for ln in text.splitlines() if "NVRM: Xid" in ln]
    filler = "[Sun Feb 23 16:24:18 2025] mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE"
    out = []
    for i in range(lines):
        out.append(real[(i // 1000) % len(real)] if i % 1000 == 0 else filler)
    return "\n".join(out)


def nccl_log(ranks: int = 16, per_rank: int = 10_000) -> str:
    real = (DATA / "nccl" / "ib-gdrdma-a100-nccl-707-excerpt.txt").read_text().splitlines()
    out = []
    for r in range(ranks):
        host = f"node{r // 8}"
        for i in range(per_rank):
            line = real[i % len(real)].replace("10-90-43-152:120890", f"{host}:{1000 + r}")
            out.append(line)
    return "\n".join(out)


def median_time(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    klog = kernel_log()
    nlog = nccl_log()
    events = parse_xid_events(klog)
    assert len(events) == 200, len(events)
    ranks = parse_nccl_logs([("bench", nlog)])["ranks"]
    assert len(ranks) == 16 * 4, len(ranks)

    k_parse = median_time(lambda: parse_xid_events(klog), args.runs)
    k_base = median_time(lambda: [ln for ln in klog.splitlines() if "NVRM: Xid" in ln], args.runs)
    n_parse = median_time(lambda: parse_nccl_logs([("bench", nlog)]), args.runs)
    n_base = median_time(lambda: [ln for ln in nlog.splitlines() if " NCCL INFO " in ln], args.runs)
    print(
        f"kernel log 200k lines: parse_xid_events median {k_parse * 1000:.1f} ms; "
        f"substring-scan baseline {k_base * 1000:.1f} ms; ratio {k_parse / k_base:.1f}x"
    )
    print(
        f"nccl path 160k lines:  parse_nccl_logs median {n_parse * 1000:.1f} ms; "
        f"split+contains baseline {n_base * 1000:.1f} ms; ratio {n_parse / n_base:.1f}x"
    )


if __name__ == "__main__":
    main()
