"""The lean (issue 10): a root only the novelty or generic layer found takes the category its own
words favour at the lower `lean_threshold` / `lean_margin` bars of data/families.yaml, and says so;
its layer stays the layer that found it."""

from __future__ import annotations

from pathlib import Path

import pytest
from triage_json import blind_case, triage_json

from vllm_medic.errors import UsageError
from vllm_medic.triage.families import load_families, parse_families


def test_a_novelty_root_leans_to_the_family_its_frames_name(tmp_path: Path) -> None:
    # vllm#48093: a cut `RuntimeError: Erro` under FlashInfer's TRT-LLM decode frames.
    case = blind_case("round6.jsonl", "vllm-48093")
    result = triage_json(tmp_path, case["log"])
    rc = result["root_cause"]
    assert (rc["category"], rc["line"], rc["layer"]) == ("image_dependency", 12, "novelty")
    assert "leans to family `kernel-arch`" in rc["why"] and "'flashinfer' (frames" in rc["why"]
    assert rc["confidence"] <= 0.4
    assert any("kernel" in step.lower() or "image" in step.lower() for step in result["fix"])


def test_a_root_no_family_word_reaches_stays_other(tmp_path: Path) -> None:
    # aibrix#1357: a client's 404 from the gateway — nothing a family knows.
    case = blind_case("round10.jsonl", "aibrix-1357")
    rc = triage_json(tmp_path, case["log"])["root_cause"]
    assert rc["category"] == "other"
    assert "leans to" not in rc["why"]


def test_lean_bars_are_data_and_validated() -> None:
    book = load_families()
    assert 0 < book.lean_threshold < book.threshold and book.lean_margin < book.margin
    doc = {"families": [{"id": "m", "category": "oom_startup", "title": "t", "words": {"oom": 1}}]}
    assert parse_families({**doc, "lean_threshold": 2}, "x").lean_threshold == 2
    with pytest.raises(UsageError, match="lean_margin"):
        parse_families({**doc, "lean_margin": -1}, "x")
