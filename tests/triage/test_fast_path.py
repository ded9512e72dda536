"""The scan touches only candidate lines (and every line while a traceback is open); a line-by-line
reference, whose screen flags every line, must reach the same verdict on real-vLLM noise with
recurring WARNING lines (bench/gen_triage_noise.py --candidate-every) and an anomaly buried in it."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import pytest

import vllm_medic.triage.api as api
from vllm_medic.triage.prefilter import Screen

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from gen_triage_noise import Noise  # noqa: E402

# A worker's raw stderr traceback: its frame lines carry no candidate word, so they are seen only
# because the traceback is open (their frames decide the phase).
BURIED = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.12/site-packages/vllm/v1/worker/gpu_model_runner.py", line 2210, in execute_model',
    "    hidden = self.model(input_ids, positions)",
    '  File "/usr/lib/python3.12/site-packages/vllm/v1/sample/sampler.py", line 88, in forward',
    "    logits = logits.to(torch.float32)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity "
    "of 79.15 GiB of which 1.06 GiB is free.",
]


def _write(path: Path, rank: int, lines: int, bury_at: int | None) -> None:
    noise = Noise(rank, datetime(2026, 11, 30), 3, candidate_every=50)
    out = list(noise.startup())
    for n, line in enumerate(noise.serving_lines_count(lines)):
        if n == bury_at:
            ts = noise.now.strftime("%m-%d %H:%M:%S")
            out.extend(b.replace("{ts}", ts) for b in BURIED)
        out.append(line)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def _every_line_screens(catalogue, **_kw):
    _, served = REAL_BUILD(catalogue)
    return Screen([r"^"], use_re2=False), served


REAL_BUILD = api.build_screens


@pytest.fixture
def ranks(tmp_path: Path) -> Path:
    for r in range(2):
        _write(tmp_path / f"rank{r}.log", r, 8_000, 5_345 if r == 1 else None)
    return tmp_path


def test_candidate_only_scan_gives_the_line_by_line_verdict(ranks, monkeypatch):
    fast_result = api.triage([str(ranks)])
    monkeypatch.setattr(api, "build_screens", _every_line_screens)
    ref_result = api.triage([str(ranks)])
    fast, reference = fast_result.to_dict(), ref_result.to_dict()
    root = fast["root_cause"]
    assert root is not None and root["source"].endswith("rank1.log")
    assert "OutOfMemoryError" in root["text"]
    assert root["traceback_start"] is not None
    # the frame lines are no candidates: they are folded only because the traceback is open
    frames = fast_result.verdict.root.event.frames
    assert any(f.endswith(":execute_model") for f in frames), frames
    assert frames == ref_result.verdict.root.event.frames
    assert root == reference["root_cause"]
    assert fast["cascade"] == reference["cascade"]
    assert fast["signals"] == reference["signals"]
    assert fast["sources"] == reference["sources"]
