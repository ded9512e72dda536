"""scripts/label_agreement.py: the label-noise ceilings published for blind rounds 10, 13, 20, 21 and 22 (blind/README.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts/label_agreement.py"
BLIND = ROOT / "tests/data/triage/blind"


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def test_round10_agreement_is_the_published_figure() -> None:
    out = _run(BLIND / "round10.jsonl", BLIND.parent / "relabel/round10.jsonl")
    assert out.returncode == 0, out.stderr
    assert "64 logs labelled twice" in out.stdout
    assert "category agreement 59/64 = 92.2 %, exact line 60/64 = 93.8 %, both 56/64 = 87.5 %" in out.stdout
    assert out.stdout.count("   differ: ") == 8


def test_round13_agreement_is_the_published_figure() -> None:
    out = _run(BLIND / "round13.jsonl", BLIND.parent / "relabel/round13.jsonl")
    assert out.returncode == 0, out.stderr
    assert "68 logs labelled twice" in out.stdout
    assert "category agreement 58/68 = 85.3 %, exact line 65/68 = 95.6 %, both 56/68 = 82.4 %" in out.stdout
    assert "high-confidence calls: category 21/21 = 100.0 %" in out.stdout


def test_round20_agreement_is_the_published_figure() -> None:
    out = _run(BLIND / "round20.jsonl", BLIND.parent / "relabel/round20.jsonl")
    assert out.returncode == 0, out.stderr
    assert "78 logs labelled twice" in out.stdout
    assert "category agreement 75/78 = 96.2 %, exact line 76/78 = 97.4 %, both 73/78 = 93.6 %" in out.stdout
    assert "high-confidence calls: category 37/37 = 100.0 %" in out.stdout


def test_round21_agreement_is_the_published_figure() -> None:
    out = _run(BLIND / "round21.jsonl", BLIND.parent / "relabel/round21.jsonl")
    assert out.returncode == 0, out.stderr
    assert "77 logs labelled twice" in out.stdout
    assert "category agreement 69/77 = 89.6 %, exact line 75/77 = 97.4 %, both 67/77 = 87.0 %" in out.stdout
    assert "high-confidence calls: category 28/28 = 100.0 %" in out.stdout


def test_round22_agreement_is_the_published_figure() -> None:
    out = _run(BLIND / "round22.jsonl", BLIND.parent / "relabel/round22.jsonl")
    assert out.returncode == 0, out.stderr
    assert "79 logs labelled twice" in out.stdout
    assert "category agreement 71/79 = 89.9 %, exact line 73/79 = 92.4 %, both 66/79 = 83.5 %" in out.stdout
    assert "high-confidence calls: category 38/38 = 100.0 %" in out.stdout


def test_disagreement_and_missing_rows_are_named(tmp_path: Path) -> None:
    a = tmp_path / "a.jsonl"
    b = tmp_path / "b.jsonl"
    a.write_text(
        '{"id": "x", "category": "other", "first_anomaly_line": 2}\n'
        '{"id": "y", "category": "oom_startup", "first_anomaly_line": 1}\n'
    )
    b.write_text('{"id": "x", "category": "driver_cuda", "first_anomaly_line": 2, "confidence": "high"}\n')
    out = _run(a, b)
    assert out.returncode == 0
    assert "not relabelled (1): y" in out.stdout
    assert "category agreement 0/1 = 0.0 %" in out.stdout
    assert "differ: x: other@2 vs driver_cuda@2 (high)" in out.stdout


def test_unreadable_input_is_exit_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    out = _run(bad, bad)
    assert out.returncode == 2
    assert "cannot read" in out.stderr and "Traceback" not in out.stderr
    assert _run(bad).returncode == 2
