"""The phase cues are data (data/phase.yaml), and the phase picked when a log shows none is what the
labels say: recomputed here over every labelled OOM of the corpus and the learned blind rounds (an unseen
round is never read)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from accuracy import CORPUS, LEARNED_ROUNDS

from vllm_medic.triage.api import scan_text
from vllm_medic.triage.phase import load_cues, parse_cues

LABELLED: list[Path] = [CORPUS, *LEARNED_ROUNDS]
_DEFAULT_NOTE = "no start-up or serving frame or line around it"


def _oom_cases() -> list[dict]:
    out = []
    for path in LABELLED:
        for raw in path.read_text(encoding="utf-8").splitlines():
            if raw.strip() and (case := json.loads(raw))["category"].startswith("oom_"):
                out.append(case)
    return out


def test_the_phase_picked_without_evidence_is_what_the_labels_say_most():
    """Among labelled OOMs whose log shows no phase at all (the default was taken), the default must be
    the majority label; the counts are in data/phase.yaml's comment (61 vs 15 after round 13 was
    learned; 68 vs 18 with round 14 learned)."""
    labels: Counter[str] = Counter()
    for case in _oom_cases():
        rc = scan_text(case["log"], case["id"]).to_dict()["root_cause"]
        phase = (rc or {}).get("phase") or {}
        if phase.get("evidenced") is False and phase["evidence"][0].startswith(_DEFAULT_NOTE):
            labels[case["category"].removeprefix("oom_")] += 1
    assert sum(labels.values()) >= 50, labels
    majority, _ = labels.most_common(1)[0]
    assert majority == load_cues().unevidenced_default, labels


def test_picked_cues_name_their_match():
    cues = load_cues()
    m = cues.first(cues.runtime_frames, "slime/utils/ppo_utils.py:compute_log_probs")  # THUDM/slime#1450
    assert m is not None and m.group(0) == "compute_log_probs"
    assert cues.first(cues.runtime_words, "Workers (tasks / actors) killed due to memory pressure (OOM)")
    assert cues.first(cues.runtime_frames, "model_runner.py:load_model") is None


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            {"unevidenced_default": "sometimes", "runtime_frames": [], "runtime_words": []},
            "unevidenced_default",
        ),
        ({"unevidenced_default": "startup", "runtime_frames": ["("], "runtime_words": []}, "runtime_frames"),
        ({"unevidenced_default": "startup", "runtime_frames": []}, "runtime_words"),
        ([], "mapping"),
    ],
)
def test_bad_phase_data_names_the_key(doc, message):
    with pytest.raises(ValueError, match=message):
        parse_cues(doc, "phase.yaml")
