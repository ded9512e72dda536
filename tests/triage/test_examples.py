"""Every signature and every family is held to at least one REAL line (issue 10): a line from a
public report (`examples:` in the data, with its URL), a labelled corpus case, or a real log captured
here (tests/data/triage/noise/) must be claimed by it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_medic.errors import UsageError
from vllm_medic.triage.catalogue import load_catalogue
from vllm_medic.triage.families import load_families, parse_families
from vllm_medic.triage.normalize import normalize, normalize_line

CORPUS = Path(__file__).resolve().parents[1] / "data/triage/corpus.jsonl"
# Signatures still without a real example here (no corpus case, no `examples:` entry). This list may
# only shrink: a signature that gains an example fails the test below until it is removed from here.
KNOWN_GAPS: set[str] = set()  # closed in issue 10 (every signature now has a real line)


def _claimed_by_real_lines() -> dict[str, str]:
    """signature id -> where a real line claimed by it comes from."""
    cat = load_catalogue()
    found: dict[str, str] = {}
    for sig in cat.signatures:
        for line, source in sig.examples:
            for ev in normalize(line):
                got = cat.classify(ev.message, ev.frames)
                if got is not None and got.id == sig.id:
                    found.setdefault(sig.id, source)
    for real in sorted(CORPUS.parent.glob("noise/*.log")):  # real logs captured here (SOURCES.md)
        for ev in normalize(real.read_text(encoding="utf-8")):
            got = cat.classify(ev.message, ev.frames)
            if got is not None:
                found.setdefault(got.id, str(real.relative_to(CORPUS.parents[2])))
    for raw in CORPUS.read_text(encoding="utf-8").splitlines():
        case = json.loads(raw)
        for ev in normalize(case["log"]):
            got = cat.classify(ev.message, ev.frames)
            if got is not None:
                found.setdefault(got.id, case["source"])
    return found


def test_every_signature_has_a_real_example_or_is_a_listed_gap():
    cat = load_catalogue()
    found = _claimed_by_real_lines()
    missing = {s.id for s in cat.signatures} - set(found)
    assert missing <= KNOWN_GAPS, f"signatures with no real example: {sorted(missing - KNOWN_GAPS)}"
    closed = KNOWN_GAPS & set(found)
    assert not closed, f"these gained a real example; remove them from KNOWN_GAPS: {sorted(closed)}"


def test_signature_examples_are_claimed_by_their_own_signature():
    cat = load_catalogue()
    for sig in cat.signatures:
        for line, source in sig.examples:
            got = [cat.classify(ev.message, ev.frames) for ev in normalize(line)]
            assert any(g is not None and g.id == sig.id for g in got), (
                sig.id,
                source,
                [g and g.id for g in got],
            )


def test_every_family_has_real_examples_and_each_scores_into_it():
    book = load_families()
    assert {f.id for f in book.families} >= {
        "memory",
        "kernel-arch",
        "parallel-layout",
        "cache-machinery",
        "collective-fabric",
        "driver-runtime",
    }
    for fam in book.families:
        assert fam.examples, fam.id
        for ex in fam.examples:
            assert ex.source.startswith("https://github.com/"), ex.source
            ev = normalize_line(ex.line)  # as the scan sees it: message, emitter
            verdict = book.score(ev.message, ev.frames, [], ev.origin)
            assert verdict is not None and verdict.family.id == fam.id, (fam.id, ex.line, verdict)
            assert verdict.words, "the verdict must say which words decided it"


@pytest.mark.parametrize(
    ("doc", "needle"),
    [
        ({"families": [{"id": "x", "category": "nope", "title": "t", "words": {"a": 1}}]}, "category 'nope'"),
        (
            {"families": [{"id": "x", "category": "other", "title": "t", "words": {"(": 1}}]},
            "bad regular expression",
        ),
        ({"families": [{"id": "x", "category": "other", "title": "t", "words": {}}]}, "non-empty mapping"),
        (
            {
                "families": [
                    {
                        "id": "x",
                        "category": "other",
                        "title": "t",
                        "words": {"a": 1},
                        "examples": [{"line": "a"}],
                    }
                ]
            },
            "source",
        ),
        ({"families": [], "bogus": 1}, "unknown key"),
    ],
)
def test_bad_family_data_names_the_entry(doc, needle):
    with pytest.raises(UsageError, match=needle):
        parse_families(doc, "test.yaml")
