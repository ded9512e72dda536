"""The scan's fast paths give the answers of the plain ones: native newline arithmetic against Python's,
lazily compiled shipped patterns against compiled ones, substring guards against the regexes they guard."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import sysconfig
from datetime import datetime
from pathlib import Path

import pytest

from gen_triage_noise import Noise
from vllm_medic.triage import lines as newlines
from vllm_medic.triage import tracebacks
from vllm_medic.triage.catalogue import load_catalogue
from vllm_medic.triage.families import load_families
from vllm_medic.triage.lazy_regex import LazyRegex

DATA = Path(__file__).resolve().parents[1] / "data/triage"


def _python_candidates(block, end, positions, monkeypatch):
    monkeypatch.setattr(newlines, "NATIVE", False)
    try:
        return newlines.candidates(block, end, positions)
    finally:
        monkeypatch.undo()


def _real_lines() -> list[str]:
    out = []
    for path in [DATA / "corpus.jsonl", *sorted((DATA / "blind").glob("round*.jsonl"))]:
        for raw in path.read_text(encoding="utf-8").splitlines():
            if raw.strip():
                out.extend(json.loads(raw)["log"].split("\n"))
    return out


def test_native_module_is_built_where_a_compiler_is():
    """setup.py builds `_lines` optionally: a silently failed build would leave every scan on the slow
    path. Where the interpreter's C compiler exists, the install must have built it."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc}) on this machine: the Python arithmetic runs")
    assert newlines.ENGINE == "native"


@pytest.mark.skipif(newlines.ENGINE != "native", reason="native module not built")
def test_native_arithmetic_equals_python(monkeypatch):
    rng = random.Random(10)
    text = "\n".join(_real_lines()[:4000]).encode("utf-8", "replace")
    blocks = [text, bytearray(text), b"", b"\n", b"\n\n\n", b"no newline at all"]
    blocks += [bytes(rng.choice(b"ab\n") for _ in range(rng.randint(0, 300))) for _ in range(300)]
    for block in blocks:
        n = len(block)
        for _ in range(8):
            start, end = rng.randint(-5, n + 5), rng.randint(-5, n + 5)
            assert newlines.count(block, start, end) == block.count(b"\n", start, end)
            end = rng.randint(0, n)
            positions = sorted(rng.randint(0, n + 2) for _ in range(rng.randint(0, 40)))
            assert newlines.candidates(block, end, positions) == _python_candidates(
                block, end, positions, monkeypatch
            )
    with pytest.raises(ValueError):
        newlines.candidates(b"a\nb\nc\n", 6, [4, 2])


def test_triage_reads_the_same_with_and_without_the_native_module(tmp_path):
    """Through the CLI, on a file of several 4 MiB blocks (lines split across block edges, a traceback, a
    root cause near the end): the JSON is the same either way."""
    noise = Noise(0, datetime(2026, 11, 30), 4, candidate_every=50)
    body = [*noise.startup(), *noise.serving_lines_count(180_000)]
    body[150_000:150_000] = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/vllm/worker.py", line 12, in load_model',
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ]
    log = tmp_path / "rank0.log"
    log.write_text("\n".join(body) + "\n", encoding="utf-8")
    assert log.stat().st_size > 3 * (4 << 20)
    outs = []
    for native in ("", "1"):
        env = {**os.environ, "VLLM_MEDIC_TRIAGE_NO_NATIVE": native, "VLLM_MEDIC_TRIAGE_JOBS": "1"}
        proc = subprocess.run(
            [sys.executable, "-m", "vllm_medic.cli", "triage", str(log), "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert proc.returncode in (0, 1), proc.stderr
        outs.append(json.loads(proc.stdout))
    assert outs[0] == outs[1]
    assert outs[0]["root_cause"]["line"] == 150_003


def test_every_shipped_pattern_compiles():
    """The shipped catalogue and families compile their patterns on first use (LazyRegex): compile all
    of them here, so a bad one fails this test instead of a user's scan."""
    lazy = [p for s in load_catalogue().signatures for p in (*s.patterns, *s.traceback_patterns)]
    book = load_families()
    lazy += [p for fam in book.families for p, _w in fam.words] + list(book.failure_words)
    assert lazy and all(isinstance(p, LazyRegex) for p in lazy)
    for p in lazy:
        assert isinstance(p.compiled(), re.Pattern), p.pattern


def test_a_lazy_pattern_answers_like_the_compiled_one():
    rx = LazyRegex(r"(?i)\bout of memory\b")
    assert rx.match("Out of memory here") and rx.search("CUDA out of memory.").group(0) == "out of memory"
    assert rx.search("no oom") is None and rx.pattern == r"(?i)\bout of memory\b"


def test_substring_guards_are_implied_by_their_regexes():
    """FRAME and ANNOUNCE are tried only on lines holding the text every match of theirs contains."""
    for line in _real_lines():
        if tracebacks.FRAME.search(line):
            assert tracebacks._FRAME_LITERAL in line, line
        if tracebacks.ANNOUNCE.search(line):
            assert tracebacks._ANNOUNCE_LITERAL in line, line


def test_spelt_out_error_codes_are_the_same_words():
    """families.yaml writes Ascend-style codes digit by digit for the screen's sake: same matches."""
    word = next(p for p in load_families().failure_words if "E[A-Z]0" in p.pattern)
    plain = re.compile(r"\bE[A-Z]\d{4}\b|(?i:\btimes out\b)")
    rng = random.Random(2)
    samples = ["EI0006: Getting socket times out", "EZ9999", "xEI0006", "EI00061", "E10006", "Times Out"]
    samples += [
        "".join(rng.choice("EIZ0123456789 :x") for _ in range(rng.randint(1, 12))) for _ in range(5000)
    ]
    for s in samples:
        assert bool(word.search(s)) == bool(plain.search(s)), s
