#!/usr/bin/env python3
"""Benchmark `vllm-medic doctor` (subprocess wall time, as a user runs it).

Two measurements, each against a named baseline measured in the same run:

1. No GPU (this machine, like CI): `doctor` median of N runs; target under 2 s. Baseline:
   `vllm-medic --version` (interpreter + CLI import cost), so the ratio shows what doctor adds.
2. Hung probes: fake `nvidia-smi`, `ibdev2netdev`, `lsmod` and `vllm` that sleep forever, with
   `--timeout T`. Seven probe commands each hang to T; the baseline is the sum of the hung probes'
   timeouts (what a sequential collector would cost). Ratio = median wall / sum; ~1/7 means wall is
   bounded by the slowest probe's timeout, not the sum.

Usage: .venv/bin/python bench/bench_doctor.py [--runs 5] [--timeout 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXE = Path(sys.executable).with_name("vllm-medic")
HANGING = ("nvidia-smi", "ibdev2netdev", "lsmod", "vllm")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    return time.perf_counter() - t0, proc


def env_with_path(dirs: list[str]) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([*dirs, "/usr/bin", "/bin"])
    return env


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=2.0, help="per-probe timeout for the hung-probe case")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        empty = Path(tmp) / "empty"
        hang = Path(tmp) / "hang"
        empty.mkdir()
        hang.mkdir()
        for name in HANGING:
            p = hang / name
            p.write_text("#!/bin/sh\nexec sleep 3600\n")
            p.chmod(0o755)

        env = env_with_path([str(empty)])
        base = [timed([str(EXE), "--version"], env)[0] for _ in range(args.runs)]
        nogpu = []
        for _ in range(args.runs):
            wall, proc = timed([str(EXE), "doctor", "--json"], env)
            assert proc.returncode in (0, 1), proc.stderr
            nogpu.append(wall)
        m_base, m_nogpu = statistics.median(base), statistics.median(nogpu)
        print(
            f"doctor, no GPU        : median {m_nogpu:.3f} s over {args.runs} runs (target < 2 s)"
            f" {'OK' if m_nogpu < 2 else 'OVER'}"
        )
        print(f"baseline --version    : median {m_base:.3f} s; doctor / baseline = {m_nogpu / m_base:.2f}x")

        henv = env_with_path([str(hang)])
        walls, sums, counts = [], [], []
        for _ in range(args.runs):
            wall, proc = timed([str(EXE), "doctor", "--json", "--timeout", str(args.timeout)], henv)
            data = json.loads(proc.stdout)
            hung = [p for p in data["probes"] if p["status"] == "timeout"]
            walls.append(wall)
            sums.append(len(hung) * args.timeout)
            counts.append(len(hung))
        m_wall, m_sum = statistics.median(walls), statistics.median(sums)
        print(
            f"doctor, {statistics.median(counts):.0f} hung probes : median {m_wall:.3f} s with --timeout {args.timeout}"
            f" (one timeout = {args.timeout:.1f} s)"
        )
        print(
            f"baseline sum of hung timeouts: {m_sum:.1f} s; wall / sum = {m_wall / m_sum:.2f}"
            f"; wall / one timeout = {m_wall / args.timeout:.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
