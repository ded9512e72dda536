"""Score `vllm-medic triage` on ANY labelled jsonl (the corpus, or a frozen blind set).

    python scripts/triage_accuracy.py tests/data/triage/corpus.jsonl
    python scripts/triage_accuracy.py BLIND.jsonl --embedded     # also buried in 4 rank files of real noise

Each line: `id`, `category`, `first_anomaly_line` (1-based, in `log`), `log`, optional `phase`
("startup" | "runtime"). Prints category / exact line / no-root-on-anomalous / phase accuracy for the
short excerpts and (with --embedded) for the same excerpts at a random depth in four rank files of
the real vLLM 0.32 noise (bench/gen_triage_noise.py), then every miss.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests/triage"), str(ROOT / "bench")]

from accuracy import load_corpus, score_embedded, score_short  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", type=Path, help="labelled jsonl")
    ap.add_argument("--embedded", action="store_true", help="also score embedded in real rank-file noise")
    ap.add_argument("--seed", type=int, default=7, help="placement seed for --embedded (default 7)")
    args = ap.parse_args()
    try:
        cases = load_corpus(args.file)
    except (OSError, ValueError) as exc:
        print(f"cannot read {args.file}: {exc}", file=sys.stderr)
        return 2
    missing = [
        c.get("id", f"#{i}")
        for i, c in enumerate(cases, 1)
        if not {"id", "category", "first_anomaly_line", "log"} <= set(c)
    ]
    if missing:
        print(
            f"{args.file}: cases without id/category/first_anomaly_line/log: {missing[:10]}", file=sys.stderr
        )
        return 2
    score, misses = score_short(cases)
    print(f"[short] {score}")
    for m in misses:
        print("   miss:", m)
    if args.embedded:
        with tempfile.TemporaryDirectory(prefix="triage-acc-") as tmp:
            score, misses = score_embedded(cases, Path(tmp), seed=args.seed)
        print(f"[embedded in 4 rank files of real vLLM 0.32 noise] {score}")
        for m in misses:
            print("   miss:", m)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
