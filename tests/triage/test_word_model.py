"""The word model (triage/wordmodel.py): a category lead for roots no signature or family claims, learned
from the labelled real logs, driven through `vllm-medic triage --json` in a subprocess (the model file is
chosen by VLLM_MEDIC_TRIAGE_WORD_MODEL there, which is how a round is held out)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from vllm_medic.triage.wordmodel import build, case_features, features

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "src/vllm_medic/triage/data/word_model.json"
BUILD = ROOT / "scripts/build_word_model.py"

# Real lines: the root of sglang#22592's radix-tree insert failure (round 8) reworded by no one; the
# neighbours are its frames. The test model below learns "radix"-ish words from three labelled cases.
NOVEL_ROOT = (
    '  File "/sgl-workspace/sglang/python/sglang/srt/mem_cache/radix_cache.py", line 512, in _insert_helper\n'
    "    assert node.parent is not None, 'parent does not have'\n"
    "AssertionError: parent does not have child key\n"
)


def _triage(tmp_path: Path, text: str, model: Path | None) -> dict:
    log = tmp_path / "x.log"
    log.write_text(text, encoding="utf-8")
    env = dict(os.environ)
    env.pop("VLLM_MEDIC_TRIAGE_WORD_MODEL", None)
    if model is not None:
        env["VLLM_MEDIC_TRIAGE_WORD_MODEL"] = str(model)
    r = subprocess.run(
        [str(Path(sys.executable).parent / "vllm-medic"), "triage", str(log), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode in (0, 1), r.stderr
    return json.loads(r.stdout)


def _labelled(tmp_path: Path, rows: list[tuple[str, str]]) -> Path:
    path = tmp_path / "labelled.jsonl"
    path.write_text(
        "".join(json.dumps({"category": c, "log": line, "first_anomaly_line": 1}) + "\n" for c, line in rows),
        encoding="utf-8",
    )
    return path


def _build(tmp_path: Path, labelled: Path) -> Path:
    out = tmp_path / "model.json"
    r = subprocess.run(
        [sys.executable, str(BUILD), str(labelled), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return out


def test_shipped_model_is_what_the_script_builds_from_its_recorded_sources(tmp_path):
    out = tmp_path / "rebuilt.json"
    r = subprocess.run(
        [sys.executable, str(BUILD), "-o", str(out)], capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == SHIPPED.read_bytes(), "run scripts/build_word_model.py and commit the model"
    sources = json.loads(SHIPPED.read_text())["sources"]
    assert {s["path"] for s in sources} >= {"tests/data/triage/corpus.jsonl"}
    assert all(s["cases"] > 0 for s in sources)


def test_a_root_no_family_claims_gets_the_category_its_words_resemble_and_says_so(tmp_path):
    labelled = _labelled(
        tmp_path,
        [
            ("prefix_cache", "ERROR radix_cache insert failed: parent node missing child key"),
            ("prefix_cache", "AssertionError: radix tree parent does not have the child key"),
            ("prefix_cache", "radix_cache.py _insert_helper assert parent child key"),
            ("other", "ERROR request timed out waiting for the tokenizer"),
            ("other", "ERROR gateway returned 502 for the request"),
        ],
    )
    model = _build(tmp_path, labelled)
    rc = _triage(tmp_path, NOVEL_ROOT, model)["root_cause"]
    assert rc["category"] == "prefix_cache"
    assert rc["layer"] in ("novelty", "generic")
    assert "word model" in rc["why"] and "`radix_cache`" in rc["why"]
    assert rc["confidence"] <= 0.3
    without = _triage(tmp_path, NOVEL_ROOT, tmp_path / "missing.json")["root_cause"]
    assert without["category"] == "other" and "word model" not in without["why"]


def test_a_lead_needs_two_words_and_positive_evidence(tmp_path):
    """One word leaning a class, or words only slightly ahead of `other`, is not a lead."""
    labelled = _labelled(
        tmp_path,
        [("prefix_cache", "radix_cache lost a child key")] * 3
        + [("other", "ERROR the gateway lost a request"), ("other", "ERROR a child process lost its key")],
    )
    model = _build(tmp_path, labelled)
    one_word = "AssertionError: radix_cache wedged\n"
    rc = _triage(tmp_path, one_word, model)["root_cause"]
    assert rc["category"] == "other" and "word model" not in rc["why"], rc["why"]
    two_words = "AssertionError: radix_cache lost a child key\n"
    rc = _triage(tmp_path, two_words, model)["root_cause"]
    assert rc["category"] == "prefix_cache" and "word model" in rc["why"], rc["why"]


def test_a_signature_verdict_is_never_overridden(tmp_path):
    labelled = _labelled(
        tmp_path,
        [("prefix_cache", "torch.OutOfMemoryError: CUDA out of memory radix")] * 3
        + [("other", "ERROR something else entirely")] * 2,
    )
    model = _build(tmp_path, labelled)
    log = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB radix\n"
    rc = _triage(tmp_path, log, model)["root_cause"]
    assert rc["layer"] == "signature" and rc["category"].startswith("oom"), rc


def test_features_are_the_same_for_a_case_and_for_the_line_the_scanner_keeps():
    log = "a 1\nb two\nERROR Three 0x1f words\nc four\nd five\n"
    assert case_features(log, 3) == features("ERROR Three 0x1f words", ["a 1", "b two"], ["c four", "d five"])
    assert "three" in case_features(log, 3) and "x1f" not in case_features(log, 3)


def test_words_seen_once_are_left_out():
    model = build([("other", frozenset({"once", "twice"})), ("oom_runtime", frozenset({"twice"}))], ["x"])
    assert "once" not in model.counts and model.counts["twice"] == {"oom_runtime": 1, "other": 1}
