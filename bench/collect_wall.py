"""How long `collect` takes, and that a hung nvidia-smi costs one timeout, not one per probe.

Runs the real collection (real subprocesses) with the fake tools of tests/fakebin first on PATH,
replaying the example H200 node. Three measurements in the same run:

  healthy      every tool answers                          (median of 5)
  hung         nvidia-smi hangs (4 nvidia-smi probes)       (median of 5), timeout T each
  baseline     the same probes run one after another with the same timeout (the naive loop)

Prints medians and the ratio baseline / hung. Usage: python bench/collect_wall.py [--timeout 1.0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from vllm_medic.collect.api import CollectOptions, _source_table, collect_here  # noqa: E402
from vllm_medic.collect.runner import run_probe  # noqa: E402


def _env(hang: bool) -> dict[str, str]:
    env = {
        "PATH": os.pathsep.join([str(ROOT / "tests" / "fakebin"), str(Path(sys.executable).parent)]),
        "FAKEBIN_DIR": str(ROOT / "examples" / "captured-h200-node"),
        "HOME": os.environ.get("HOME", "/tmp"),
    }
    if hang:
        env["FAKEBIN_NVIDIA_SMI_HANG"] = "1"
    return env


def _collect(hang: bool, timeout: float) -> float:
    t0 = time.perf_counter()
    result = collect_here(CollectOptions(timeout_s=timeout, env=_env(hang), image="vllm/vllm-openai:latest"))
    elapsed = time.perf_counter() - t0
    statuses = {s["name"]: s["status"] for s in result.manifest["sources"]}
    expected = "timeout" if hang else "ok"
    assert statuses["nvidia-smi"] == expected, statuses
    return elapsed


def _sequential(timeout: float) -> float:
    env = _env(hang=True)  # the child's PATH (fake tools first) also resolves argv[0]
    t0 = time.perf_counter()
    for probe in _source_table()["probes"]:
        if probe.get("needs") == "container":
            continue
        argv = [
            a.replace("{image}", "vllm/vllm-openai:latest").replace("{python}", sys.executable)
            for a in probe["argv"]
        ]
        run_probe(probe["name"], argv, timeout, env=env)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    healthy = [_collect(False, args.timeout) for _ in range(args.runs)]
    hung = [_collect(True, args.timeout) for _ in range(args.runs)]
    baseline = [_sequential(args.timeout) for _ in range(max(1, args.runs // 2))]
    m_healthy, m_hung, m_base = (statistics.median(x) for x in (healthy, hung, baseline))
    print(f"collect, every tool answers     median {m_healthy:6.3f} s  (n={len(healthy)})")
    print(
        f"collect, nvidia-smi hangs       median {m_hung:6.3f} s  (n={len(hung)}, timeout {args.timeout:g} s x 4 probes)"
    )
    print(f"baseline: sequential probes     median {m_base:6.3f} s  (n={len(baseline)})")
    print(f"ratio baseline / concurrent (hung): {m_base / m_hung:5.2f}x")
    print(f"hung collect minus one timeout: {m_hung - args.timeout:6.3f} s")


if __name__ == "__main__":
    main()
