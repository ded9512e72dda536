"""Redacting a large raw output (a kernel log): collect's line filter vs the shared whole-text redactor.

Input: a SYNTHETIC 4.6 MB kernel log (40,000 Xid lines) with a handful of secret-bearing lines.
Baseline: vllm_medic.redact.redact_text on the whole text. Prints medians of 5 and the ratio;
also checks both give the same output. Usage: python bench/collect_redaction.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from vllm_medic.collect.redaction import redact_output  # noqa: E402
from vllm_medic.redact import redact_text  # noqa: E402

NOISE = "[12345.678901] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
SECRETS = "export HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz\ncurl https://user:pw123456@example.com/\n"


def _median(fn, text: str, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn(text)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    text = NOISE * 20000 + SECRETS + NOISE * 20000
    assert redact_output(text) == redact_text(text)
    ours = _median(redact_output, text)
    base = _median(redact_text, text)
    print(f"input {len(text) / 1e6:.1f} MB, {text.count(chr(10))} lines")
    print(f"collect.redaction.redact_output  median {ours:7.3f} s")
    print(f"baseline redact.redact_text      median {base:7.3f} s")
    print(f"ratio baseline / ours: {base / ours:6.1f}x")


if __name__ == "__main__":
    main()
