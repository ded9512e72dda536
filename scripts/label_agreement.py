"""How far two labellers agree on one blind round: the ceiling a triage figure can be read against.

    python scripts/label_agreement.py tests/data/triage/blind/round10.jsonl tests/data/triage/blind/round10.relabel.jsonl

The second file holds an independent labeller's `id`, `category`, `first_anomaly_line`, `confidence`
(high / medium / low), given the logs and their source URLs only (blind/README.md, "Label agreement").
Prints category / exact-line / both agreement, the same for the second labeller's high-confidence calls,
and every disagreement.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def _rows(path: Path) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if raw.strip():
            row = json.loads(raw)
            if "id" not in row:
                raise ValueError(f"{path}:{n}: no `id`")
            out[row["id"]] = row
    return out


def _pct(k: int, n: int) -> str:
    return f"{k}/{n} = {100 * k / n:.1f} %" if n else "0/0"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        first, second = (_rows(Path(a)) for a in argv)
    except (OSError, ValueError) as exc:
        print(f"cannot read: {exc}", file=sys.stderr)
        return 2
    ids = sorted(set(first) & set(second))
    if missing := sorted(set(first) - set(second)):
        print(f"not relabelled ({len(missing)}): {', '.join(missing)}")
    cat = [i for i in ids if first[i]["category"] == second[i].get("category")]
    line = [i for i in ids if first[i]["first_anomaly_line"] == second[i].get("first_anomaly_line")]
    both = set(cat) & set(line)
    high = [i for i in ids if second[i].get("confidence") == "high"]
    print(f"{len(ids)} logs labelled twice")
    print(
        f"category agreement {_pct(len(cat), len(ids))}, exact line {_pct(len(line), len(ids))}, both {_pct(len(both), len(ids))}"
    )
    print(f"second labeller's high-confidence calls: category {_pct(len(set(cat) & set(high)), len(high))}")
    for i in ids:
        if i not in both:
            a, b = first[i], second[i]
            print(
                f"   differ: {i}: {a['category']}@{a['first_anomaly_line']} vs "
                f"{b.get('category')}@{b.get('first_anomaly_line')} ({b.get('confidence')})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
