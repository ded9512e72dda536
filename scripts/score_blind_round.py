"""Score a blind round: each sample alone under its canonical name, read by the real `collect --from` CLI.

Usage: .venv/bin/python scripts/score_blind_round.py [tests/collect/blind_round5.json] [--verbose]

The round file holds, per sample (relative to tests/data/collect), the facts a person reads off the
paste, written down before the first run (paths as in tests/collect/test_blind_samples.py, plus
"?flagged": sources that must be in snapshot.partial or snapshot.errors). Prints files read, key
facts right / total, files fully right / total and silent wrong parses: a wrong value while the
sample's own source is neither partial nor in errors (the snapshot looks fine and is wrong).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "collect"
# sample folder -> (canonical file name, source name in the snapshot)
CANONICAL = {
    "nvidia-smi": ("nvidia-smi.txt", "nvidia-smi"),
    "nvidia-smi-q": ("nvidia-smi-q.txt", "nvidia-smi-q"),
    "nvidia-smi-q-x": ("nvidia-smi-q.xml", "nvidia-smi-q"),
    "nvidia-smi-query-gpu": ("nvidia-smi-query-gpu.csv", "nvidia-smi-query-gpu"),
    "nvidia-smi-query-compute-apps": ("nvidia-smi-query-compute-apps.csv", "nvidia-smi-query-compute-apps"),
    "nvidia-smi-topo-m": ("nvidia-smi-topo-m.txt", "nvidia-smi-topo-m"),
    "ibdev2netdev": ("ibdev2netdev.txt", "ibdev2netdev"),
    "ibstat": ("ibstat.txt", "ibstat"),
    "ibstatus": ("ibstatus.txt", "ibstatus"),
    "ibv_devinfo": ("ibv-devinfo.txt", "ibv-devinfo"),
    "rdma-link": ("rdma-link.txt", "rdma-link"),
    "lsmod": ("lsmod.txt", "lsmod"),
    "vllm-collect-env": ("vllm-collect-env.txt", "vllm-collect-env"),
    "rocm-smi": ("rocm-smi.txt", "rocm-smi"),
    "amd-smi": ("amd-smi.txt", "amd-smi"),
}


def dig(obj: Any, path: str) -> Any:
    if path.startswith("#"):
        value = dig(obj, path[1:])
        return len(value) if value is not None else None
    if path == "!errors":
        return sorted({e["source"] for e in obj.get("errors", [])})
    if path == "?flagged":
        return sorted({e["source"] for e in obj.get("errors", [])} | set(obj.get("partial") or {}))
    head, _, rest = path.partition(".")
    if head.endswith("[*]"):
        items = obj.get(head[:-3]) or []
        return [dig(item, rest) for item in items]
    value = obj.get(head) if isinstance(obj, dict) else None
    return dig(value, rest) if rest and value is not None else value


def snapshot_of(sample: str, cli: Path) -> dict[str, Any] | None:
    kind = sample.split("/", 1)[0]
    with tempfile.TemporaryDirectory() as tmp:
        captured = Path(tmp) / "captured"
        captured.mkdir()
        shutil.copy(DATA / sample, captured / CANONICAL[kind][0])
        run = subprocess.run(
            [str(cli), "collect", "--from", str(captured), "--json", "-o", str(Path(tmp) / "b")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    if run.returncode != 0:
        return None
    return json.loads(run.stdout)


def score(round_file: Path, verbose: bool) -> dict[str, Any]:
    facts: dict[str, dict[str, Any]] = json.loads(round_file.read_text(encoding="utf-8"))["facts"]
    cli = Path(sys.executable).parent / "vllm-medic"
    read = right = total = full = 0
    silent: list[str] = []
    wrong_by_file: dict[str, dict[str, Any]] = {}
    for sample, expected in facts.items():
        source = CANONICAL[sample.split("/", 1)[0]][1]
        snap = snapshot_of(sample, cli)
        total += len(expected)
        if snap is None:
            wrong_by_file[sample] = {"(collect failed)": None}
            continue
        read += 1
        flagged = source in dig(snap, "?flagged")
        wrong = {}
        for path, want in expected.items():
            got = dig(snap, path)
            ok = all(s in got for s in want) if path == "?flagged" else got == want
            if ok:
                right += 1
            else:
                wrong[path] = (got, want)
                if path != "?flagged" and not flagged:
                    silent.append(f"{sample}: {path}")
        if not wrong:
            full += 1
        else:
            wrong_by_file[sample] = wrong
    result = {
        "files": len(facts),
        "files_read": read,
        "facts_right": right,
        "facts_total": total,
        "files_fully_right": full,
        "silent_wrong_facts": len(silent),
        "silent_wrong_files": len({s.split(": ")[0] for s in silent}),
    }
    print(
        f"{round_file.name}: files read {read}/{len(facts)}; key facts {right}/{total} "
        f"({100 * right / total:.1f} %); files fully right {full}/{len(facts)} "
        f"({100 * full / len(facts):.1f} %); silent wrong parses {len(silent)} facts in "
        f"{result['silent_wrong_files']} files"
    )
    if verbose:
        for sample, wrong in wrong_by_file.items():
            print(f"- {sample}")
            for path, pair in wrong.items():
                print(f"    {path}: (got, expected) = {pair}")
        for s in silent:
            print(f"  SILENT {s}")
    return result


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    target = Path(args[0]) if args else ROOT / "tests" / "collect" / "blind_round5.json"
    score(target, "--verbose" in sys.argv)
