"""Build src/vllm_medic/triage/data/word_model.json (the triage word model) from labelled real logs.

    python scripts/build_word_model.py                  # the shipped model, from LEARNED below
    python scripts/build_word_model.py --exclude tests/data/triage/blind/round9.jsonl -o /tmp/wm.json
    VLLM_MEDIC_TRIAGE_WORD_MODEL=/tmp/wm.json python scripts/triage_accuracy.py \
        tests/data/triage/blind/round9.jsonl --embedded   # that round, held out

Only rounds already scored blind belong in LEARNED: a new round is frozen and scored first, then added.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from vllm_medic.triage.wordmodel import build, case_features, to_json  # noqa: E402

LEARNED = (
    "tests/data/triage/corpus.jsonl",
    "tests/data/triage/blind/round6.jsonl",
    "tests/data/triage/blind/round7.jsonl",
    "tests/data/triage/blind/round8.jsonl",
)
OUT = "src/vllm_medic/triage/data/word_model.json"


def labelled_cases(path: Path) -> list[tuple[str, frozenset[str]]]:
    out = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip():
            continue
        case = json.loads(raw)
        line = case.get("first_anomaly_line")
        if not line or not case.get("category"):
            continue  # a healthy log has no root line to learn from
        out.append((case["category"], case_features(case["log"], int(line))))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="*", help=f"labelled jsonl files (default: {', '.join(LEARNED)})")
    ap.add_argument("--exclude", action="append", default=[], help="leave this file out (hold it out)")
    ap.add_argument("-o", "--output", default=str(ROOT / OUT))
    args = ap.parse_args(argv)
    excluded = {Path(p).resolve() for p in args.exclude}
    paths = [Path(p) if Path(p).is_absolute() else ROOT / p for p in (args.inputs or LEARNED)]
    paths = [p for p in paths if p.resolve() not in excluded]
    cases: list[tuple[str, frozenset[str]]] = []
    provenance: list[dict[str, object]] = []
    for p in paths:
        got = labelled_cases(p)
        cases.extend(got)
        rel = p.resolve().relative_to(ROOT) if p.resolve().is_relative_to(ROOT) else p
        provenance.append(
            {"path": str(rel), "sha256": hashlib.sha256(p.read_bytes()).hexdigest(), "cases": len(got)}
        )
    model = build(cases, [str(s["path"]) for s in provenance])
    Path(args.output).write_text(to_json(model, provenance), encoding="utf-8")
    print(f"{args.output}: {model.size} labelled logs, {len(model.counts)} words, categories {model.cases}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
