"""The weak layer's cues are screened in the first pass, so the second look reads only what can qualify.

The bulk screen carries the cue patterns as `flagged` (prefilter.Screen): one Hyperscan scan says, per
block, whether a cue line may be there, without making such lines first-pass candidates. The second
look then starts at the first block that held one and skips files that held none. These tests hold the
answer to what a full second read gives (the first pass told nothing), whatever the engine, and check
that a healthy file is not read again.
"""

from __future__ import annotations

import functools
import gzip
import sys
import tempfile
from pathlib import Path

import pytest

from vllm_medic.triage import api, recurring, scanner, weak
from vllm_medic.triage.prefilter import Screen

ROOT = Path(__file__).resolve().parents[2]
NCCL_LINE = "NET/IBP:Got completion from peer 7.6.13.83<36315> with status=12 opcode=32698 len=32696 vendor err 129 (Send)"
# round 13's nccl-1664: NET/IB completion with a non-zero status (weak cue `nonzero-status`, no guard)
CUE_LINE = NCCL_LINE + "\n"


@functools.cache
def _noise_lines() -> tuple[str, ...]:
    """~9 MiB of the bench's real vLLM 0.32 serving noise (one start-up, a real harmless WARNING every
    50 lines; healthy: no root, no cue line): past two 4 MiB blocks."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from gen_triage_noise import write_bench_set
    finally:
        sys.path.pop(0)
    with tempfile.TemporaryDirectory() as tmp:
        write_bench_set(Path(tmp), total_bytes=9 << 20, ranks=1, root_cause="", seed=5, candidate_every=50)
        return tuple((Path(tmp) / "rank0.log").read_text(encoding="utf-8").splitlines(keepends=True))


def _write(path: Path, lines_before: int, tail: str) -> None:
    data = ("".join(_noise_lines()[:lines_before]) + tail).encode()
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


def _unflagged(monkeypatch: pytest.MonkeyPatch) -> None:
    real = api.build_screens
    monkeypatch.setattr(api, "build_screens", lambda cat, **kw: real(cat, **{**kw, "flagged": ()}))


@pytest.mark.parametrize(
    ("name", "lines_before"),
    [("short.log", 3), ("past-two-blocks.log", -1), ("past-two-blocks.log.gz", -1)],
)
@pytest.mark.parametrize("engine", ["hyperscan", "re2", "re"])
def test_the_weak_root_is_the_one_a_full_second_read_finds(tmp_path, monkeypatch, name, lines_before, engine):
    if engine != "hyperscan":
        monkeypatch.setenv("VLLM_MEDIC_TRIAGE_NO_HYPERSCAN", "1")
    if engine == "re":
        monkeypatch.setenv("VLLM_MEDIC_TRIAGE_NO_RE2", "1")
    log = tmp_path / name
    lines_before = len(_noise_lines()) if lines_before < 0 else lines_before
    _write(log, lines_before, CUE_LINE + "INFO 05-11 12:04:20 [loggers.py:1] Engine 000: Running: 0 reqs\n")
    flagged = api.triage([str(log)]).to_dict()
    with monkeypatch.context() as m:
        _unflagged(m)
        full = api.triage([str(log)]).to_dict()
    assert flagged == full
    rc = flagged["root_cause"]
    assert rc is not None and (rc["layer"], rc["line"]) == ("weak", lines_before + 1), rc
    if lines_before > 10:
        assert rc["context"]["before"], "context lines before the cue line are kept"


def test_only_the_recorded_cue_lines_are_read_again_and_a_file_without_any_is_not(tmp_path, monkeypatch):
    healthy = "INFO 11-30 00:00:{:02d} [loggers.py:1] Engine 000: Running: 1 reqs\n"
    (tmp_path / "rank0.log").write_text(
        "".join(healthy.format(i % 60) for i in range(5_000)), encoding="utf-8"
    )
    _write(tmp_path / "rank1.log", 20_000, CUE_LINE)  # its recurring WARNINGs match cue patterns too
    looked: list[str] = []
    screened: list[str] = []
    real_look, real_scan = weak._second_look, weak.scan_stream
    monkeypatch.setattr(
        weak, "_second_look", lambda s, name, *a: looked.append(name) or real_look(s, name, *a)
    )
    monkeypatch.setattr(
        weak, "scan_stream", lambda s, name, *a: screened.append(name) or real_scan(s, name, *a)
    )
    monkeypatch.setenv("VLLM_MEDIC_TRIAGE_JOBS", "1")
    rc = api.triage([str(tmp_path)]).to_dict()["root_cause"]
    assert rc is not None and rc["source"].endswith("rank1.log") and rc["line"] == 20_001
    assert [Path(n).name for n in looked] == ["rank1.log"] and screened == []


def test_past_the_recording_cap_the_second_look_reads_on_and_finds_the_same_line(tmp_path, monkeypatch):
    log = tmp_path / "rank0.log"
    _write(log, 20_000, CUE_LINE)
    monkeypatch.setattr(scanner, "WEAK_LINES_MAX", 5)
    capped = api.triage([str(log)]).to_dict()
    with monkeypatch.context() as m:
        _unflagged(m)
        full = api.triage([str(log)]).to_dict()
    assert capped == full and capped["root_cause"]["line"] == 20_001


def test_flagged_patterns_say_a_block_holds_them_without_becoming_positions():
    block = b"INFO ok\nRuntimeError: CUDA out of memory\nslot unavailable\n\xc3\xa9t\xc3\xa9 indisponible\n"
    for kw in ({"use_hyperscan": True}, {"use_re2": True}, {"use_re2": False}):
        screen = Screen([r"CUDA out of memory"], flagged=[r"slot unavailable"], **kw)
        positions, flagged = screen.positions_flagged(block)
        assert {block.count(b"\n", 0, p) for p in positions} == {1}, kw
        assert {block.count(b"\n", 0, p) for p in flagged} == {2}, kw
        assert screen.positions(block) == positions
        assert screen.search(block) == positions[0] or kw != {"use_hyperscan": True}
        assert screen.positions_flagged(b"INFO ok\n")[1] == []
        # A pattern Hyperscan does not take (non-ASCII) is flagged by the next engine.
        accented = Screen([r"CUDA out of memory"], flagged=["été indisponible"], **kw)
        assert {block.count(b"\n", 0, p) for p in accented.positions_flagged(block)[1]} == {3}, kw
        assert accented.has_flagged, kw
    assert Screen([r"x"]).has_flagged is False


def test_a_recurring_cue_line_is_recorded_once_and_the_answer_is_the_full_reads(tmp_path, monkeypatch):
    """The noise's harmless WARNINGs match cue patterns every 50 lines; each message is recorded for the
    second look once (recurring.py), and the root stays the line a full second read finds."""
    log = tmp_path / "rank0.log"
    _write(log, 20_000, CUE_LINE)
    cue_lines = sum(1 for raw in _noise_lines()[:20_000] if weak._screen().positions(raw.encode()))
    recorded: list[int] = []
    real_look = weak._second_look

    def look(stream, name, index, judge, screen, acc):
        recorded.append(len(acc.weak_lines.get(index, ())) // 2)
        return real_look(stream, name, index, judge, screen, acc)

    monkeypatch.setattr(weak, "_second_look", look)
    monkeypatch.setenv("VLLM_MEDIC_TRIAGE_JOBS", "1")
    got = api.triage([str(log)]).to_dict()
    with monkeypatch.context() as m:
        _unflagged(m)
        full = api.triage([str(log)]).to_dict()
    assert got == full and got["root_cause"]["line"] == 20_001
    assert cue_lines > 30 and recorded and recorded[0] <= cue_lines // 8, (cue_lines, recorded)


def test_the_recurring_key_masks_only_the_prefix_and_is_not_shared_when_the_message_reaches_into_it():
    a = b"(Worker pid=4121) WARNING 11-30 00:00:07 [cpu_worker.py:83] exit code 1 seen"
    b = b"(Worker pid=9770) WARNING 12-01 13:45:59 [cpu_worker.py:83] exit code 1 seen"
    c = b"(Worker pid=9770) WARNING 12-01 13:45:59 [cpu_worker.py:83] exit code 2 seen"
    assert recurring.key_of(a) == recurring.key_of(b) != recurring.key_of(c)
    # The prefix keeps its shape (a digit becomes `0`, not a run): a shorter pid is another key.
    assert recurring.key_of(a) != recurring.key_of(b.replace(b"9770", b"977"))
    assert recurring.shares(a) and recurring.shares(c)
    # No logger prefix: the text before `] ` is the message itself, so lines differing there do not share.
    d = b"worker 3 exited with code 1 [see worker log] restarting"
    assert recurring.key_of(d) == recurring.key_of(d.replace(b"code 1", b"code 7"))
    assert not recurring.shares(d)
    assert recurring.key_of(b"x" * (recurring.KEY_MAX + 1)) is None
    assert recurring.key_of(b"no prefix at all 42") == b"no prefix at all 42"
