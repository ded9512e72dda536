"""How many ✓ does `check --from` give on one real capture at a time, and how many of them rest on a source
that was never captured? Runs every capture of a directory of real command outputs (one kind per
sub-directory, e.g. eval/dev/tool_outputs) alone under its canonical name, with this tree's vllm-medic and,
with --baseline SRC, another tree's (e.g. `git archive <commit> src | tar -x -C /tmp/base`).

A pass is "unbacked" when none of its evidence lines names the one file that was captured: with a single
source in the directory, anything else it quotes was not read.

    python bench/bench_no_pass_without_evidence.py /work/shared/eval/dev/tool_outputs --baseline /tmp/base/src
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

CANONICAL = {
    "nvidia-smi": "nvidia-smi.txt",
    "nvidia-smi-errors": "nvidia-smi.txt",
    "nvidia-smi-q": "nvidia-smi-q.txt",
    "nvidia-smi-q-x": "nvidia-smi-q.xml",
    "nvidia-smi-query-gpu": "nvidia-smi-query-gpu.csv",
    "nvidia-smi-topo-m": "nvidia-smi-topo-m.txt",
    "ibdev2netdev": "ibdev2netdev.txt",
    "ip-link": "ip-link.txt",
    "lsmod": "lsmod.txt",
    "docker-image-inspect": "docker-image-inspect.json",
    "vllm-version": "vllm-version.txt",
    "vllm-collect-env": "vllm-collect-env.txt",
}


def run(src: Path | None, captures: Path) -> Counter:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    tally: Counter = Counter()
    for kind, name in CANONICAL.items():
        for f in sorted((captures / kind).glob("*")) if (captures / kind).is_dir() else []:
            with tempfile.TemporaryDirectory() as d:
                Path(d, name).write_bytes(f.read_bytes())
                proc = subprocess.run(
                    [sys.executable, "-m", "vllm_medic.cli", "check", "--from", d, "--json"],
                    capture_output=True, text=True, env=env, timeout=120,
                )  # fmt: skip
            if proc.returncode not in (0, 1):
                tally["files unreadable (exit 2/3)"] += 1
                continue
            tally["files"] += 1
            for finding in json.loads(proc.stdout)["findings"]:
                tally[finding["severity"]] += 1
                if finding["severity"] == "pass" and not any(name in e for e in finding["evidence"]):
                    tally["unbacked pass"] += 1
    return tally


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("captures", type=Path)
    ap.add_argument("--baseline", type=Path, help="the src/ directory of the tree to compare with")
    a = ap.parse_args()
    rows = {"this tree": run(None, a.captures)}
    if a.baseline:
        rows["baseline"] = run(a.baseline, a.captures)
    keys = [
        "files",
        "pass",
        "unbacked pass",
        "not_checked",
        "info",
        "warn",
        "fail",
        "files unreadable (exit 2/3)",
    ]
    print(f"{'':28}" + "".join(f"{k:>14}" for k in rows))
    for k in keys:
        print(f"{k:28}" + "".join(f"{rows[r][k]:>14}" for r in rows))
    if a.baseline and rows["baseline"]["pass"]:
        this, base = rows["this tree"], rows["baseline"]
        print(f"unbacked passes per file: {this['unbacked pass'] / max(this['files'], 1):.2f} vs "
              f"{base['unbacked pass'] / max(base['files'], 1):.2f} (baseline)")  # fmt: skip


if __name__ == "__main__":
    main()
