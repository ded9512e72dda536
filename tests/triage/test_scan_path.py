"""The scan path's speed-ups must not move a verdict: Hyperscan screens a superset of RE2's lines,
its cached database survives corruption, a file read with pread is judged as the same bytes on a
pipe, and block boundaries (tiny blocks) change nothing."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

import vllm_medic.triage.api as api
import vllm_medic.triage.scanner as scanner
from vllm_medic.triage import screen_cache
from vllm_medic.triage.catalogue import load_catalogue
from vllm_medic.triage.prefilter import Screen, loosen
from vllm_medic.triage.sources import LogSource

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy import load_corpus  # noqa: E402

from gen_triage_noise import Noise  # noqa: E402

hs = pytest.importorskip("hyperscan")
DATA = Path(__file__).resolve().parents[1] / "data" / "triage"


def _all_logs() -> list[str]:
    cases = load_corpus(DATA / "corpus.jsonl")
    for f in sorted((DATA / "blind").glob("*.jsonl")):
        cases += load_corpus(f)
    return [c["log"] for c in cases]


def _flagged_lines(screen: Screen, block: bytes) -> set[int]:
    return {block.count(b"\n", 0, p) for p in screen.positions(block)}


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("VLLM_MEDIC_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / "triage-screens"


def test_hyperscan_screen_flags_every_line_re2_flags(cache):
    cat = load_catalogue()
    fast, _ = scanner.build_screens(cat)
    ref, _ = scanner.build_screens(cat, use_hyperscan=False)
    assert fast.engine.startswith("hyperscan") and ref.engine == "re2"
    block = ("\n".join(_all_logs()) + "\n").encode("utf-8", "surrogatepass")
    missed = _flagged_lines(ref, block) - _flagged_lines(fast, block)
    lines = block.split(b"\n")
    assert not missed, [lines[i][:200] for i in sorted(missed)[:5]]


def test_hyperscan_and_re2_reach_the_same_verdicts(cache, monkeypatch):
    logs = _all_logs()
    fast = [api.scan_text(text, "x.log").to_dict() for text in logs]
    real = api.build_screens
    monkeypatch.setattr(api, "build_screens", lambda cat, **kw: real(cat, use_hyperscan=False, **kw))
    ref = [api.scan_text(text, "x.log").to_dict() for text in logs]
    assert fast == ref


def test_screen_forms_are_supersets_of_their_patterns():
    """A signature's `screen` patterns stand in for its patterns in the bulk screen: every example
    the patterns claim must pass them (the message is what the patterns see; the screen sees the line)."""
    cat = load_catalogue()
    with_screen = [s for s in cat.signatures if s.screen]
    assert with_screen, "access-4xx screens for its status alone"
    for sig in with_screen:
        screens = [re.compile(loosen(p)) for p in sig.screen]
        for line, _source in sig.examples:
            if any(p.search(line) for p in sig.patterns):
                assert any(s.search(line) for s in screens), (sig.id, line)


def test_cached_database_is_used_and_a_corrupt_one_recompiled(cache):
    patterns = [r"CUDA out of memory", r"\bNCCL WARN\b"]
    block = b"INFO ok\nRuntimeError: CUDA out of memory. Tried\nx NCCL WARN y\n"
    first = Screen(patterns, use_hyperscan=True)
    files = list(cache.glob("*.hsdb"))
    assert len(files) == 1 and first.engine == "hyperscan"
    assert _flagged_lines(first, block) == {1, 2}
    assert _flagged_lines(Screen(patterns, use_hyperscan=True), block) == {1, 2}  # from the cache
    raw = files[0].read_bytes()
    files[0].write_bytes(raw[: len(raw) // 2] + b"\x00" * 64 + raw[len(raw) // 2 + 64 :])
    again = Screen(patterns, use_hyperscan=True)
    assert _flagged_lines(again, block) == {1, 2}
    assert files[0].read_bytes() == raw  # rewritten whole


def test_unwritable_cache_still_screens(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("VLLM_MEDIC_CACHE_DIR", str(blocker))
    screen = Screen([r"Segmentation fault"], use_hyperscan=True)
    assert screen.engine == "hyperscan"
    assert screen.positions(b"a\nSegmentation fault (core dumped)\n") != []


def test_patterns_hyperscan_cannot_run_go_to_the_next_engine(cache):
    """A lookahead (a user's catalogue) and a non-ASCII class: both still screen their lines."""
    screen = Screen([r"foo(?=bar)", r"don['’]t match", r"Segmentation fault"], use_hyperscan=True)
    assert screen.engine == "hyperscan+re2+re"
    block = "x\nfoobar\ny\nit don’t match\nSegmentation fault\n".encode()
    assert _flagged_lines(screen, block) == {1, 3, 4}
    assert screen_cache.cache_dir() == cache


def test_leading_caret_is_screened_mid_block(cache):
    """`^nanobind: leaked` must be found on any line, not only at a block's first byte."""
    for use_hs in (True, False):
        screen = Screen([r"^nanobind: leaked"], use_hyperscan=use_hs)
        assert _flagged_lines(screen, b"INFO a\nnanobind: leaked 3 instances!\n") == {1}


def _noisy_ranks(tmp_path: Path) -> Path:
    d = tmp_path / "logs"
    d.mkdir()
    burst = [
        "Traceback (most recent call last):",
        '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 2210, in execute_model',
        "    hidden = self.model(input_ids, positions)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
    ]
    for r in range(2):
        noise = Noise(r, datetime(2026, 11, 30), 5, candidate_every=40)
        out = list(noise.startup())
        for n, line in enumerate(noise.serving_lines_count(3000)):
            if r == 1 and n in (1200, 2500):
                out.extend(burst)
            out.append(line)
        (d / f"rank{r}.log").write_text("\n".join(out) + "\n", encoding="utf-8")
    return d


def test_tiny_blocks_give_the_same_verdict(tmp_path, monkeypatch, cache):
    d = _noisy_ranks(tmp_path)
    whole = api.triage([str(d)]).to_dict()
    assert whole["root_cause"] and whole["root_cause"]["source"].endswith("rank1.log")
    monkeypatch.setattr(scanner, "BLOCK_BYTES", 16384)  # ~200 blocks per file; lines stay under it
    assert api.triage([str(d)]).to_dict() == whole


def test_a_file_and_the_same_bytes_on_a_pipe_agree(tmp_path, monkeypatch, cache):
    d = _noisy_ranks(tmp_path)
    path = d / "rank1.log"
    data = path.read_bytes() + b"ERROR 11-30 09:00:00 [x.py:1] the last line, without newline"
    path.write_bytes(data)
    monkeypatch.setattr(scanner, "BLOCK_BYTES", 8192)
    from_file = api._scan([api.expand_inputs([str(path)], warnings=[])[0]], load_catalogue(), [])
    pipe = LogSource(name=str(path), rank=1, opener=lambda: io.BufferedReader(io.BytesIO(data)))  # type: ignore[arg-type]
    from_pipe = api._scan([pipe], load_catalogue(), [])
    assert from_file.to_dict() == from_pipe.to_dict()
    assert from_file.to_dict()["sources"][0]["bytes"] == len(data)


def test_reused_read_buffers_give_the_pipe_verdict(tmp_path, monkeypatch, cache):
    """Files are read into two buffers that alternate and are kept from file to file: an over-long
    line skipped across blocks, a traceback left open at the end (looked at again after the last
    read) and a second file read into the same buffers all judge as the same bytes on a pipe."""
    monkeypatch.setattr(scanner, "BLOCK_BYTES", 4096)
    monkeypatch.setattr(scanner, "MAX_LINE_BYTES", 2048)
    filler = [f"INFO 11-30 00:00:{i % 60:02d} [x.py:1] serving request {i}" for i in range(300)]
    first = [*filler, "WARNING 11-30 00:01:00 [x.py:2] " + "y" * 9000, *filler]
    second = [
        *filler,
        "ERROR 11-30 00:02:00 [core.py:1] EngineCore encountered a fatal error.",
        "Traceback (most recent call last):",
        '  File "/x/vllm/v1/engine/core.py", line 10, in run',
        "    self.step()",
        '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 2210, in execute_model',
    ]
    paths = []
    for name, lines in (("rank0.log", first), ("rank1.log", second)):
        path = tmp_path / name
        path.write_bytes(("\n".join(lines) + "\n").encode())
        paths.append(path)
    sources = api.expand_inputs([str(p) for p in paths], warnings=[])
    from_files = api._scan(sources, load_catalogue(), [])

    def piped(path: Path, rank: int) -> LogSource:
        data = path.read_bytes()
        return LogSource(name=str(path), rank=rank, opener=lambda: io.BufferedReader(io.BytesIO(data)))  # type: ignore[arg-type]

    from_pipes = api._scan([piped(p, r) for r, p in enumerate(paths)], load_catalogue(), [])
    assert from_files.to_dict() == from_pipes.to_dict()
    assert any("longer than" in w for w in from_files.to_dict()["warnings"])
    monkeypatch.delattr(os, "preadv")  # where the platform has only pread
    assert api._scan(sources, load_catalogue(), []).to_dict() == from_pipes.to_dict()


_IN_A_FRESH_PROCESS = """
import json, sys, threading
from vllm_medic.triage import api
from vllm_medic.triage.parallel import jobs_for
sources = api.expand_inputs([sys.argv[1]], warnings=[])
jobs = jobs_for(sources)
stop = threading.Event()
t = threading.Thread(target=stop.wait)
t.start()
under_a_thread = jobs_for(sources)
stop.set()
t.join()
print(json.dumps({"jobs": jobs, "under_a_thread": under_a_thread, "verdict": api.triage([sys.argv[1]]).to_dict()}))
"""


def _fresh(d: Path, jobs: str, cache_dir: Path) -> dict:
    """jobs_for and the verdict in a new interpreter: whether a fork is allowed depends on the threads
    of the process, and a test session has threads of its own (servers, watchdogs) by then."""
    env = {**os.environ, "VLLM_MEDIC_TRIAGE_JOBS": jobs, "VLLM_MEDIC_CACHE_DIR": str(cache_dir)}
    r = subprocess.run(
        [sys.executable, "-c", _IN_A_FRESH_PROCESS, str(d)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_files_scanned_in_worker_processes_give_the_sequential_verdict(tmp_path, cache):
    d = _noisy_ranks(tmp_path)
    (d / "rank2.log").write_text(
        "(VllmWorker TP2 pid=9) ERROR 11-30 00:10:00 [multiproc_executor.py:1] NCCL error: unhandled "
        "system error\n",
        encoding="utf-8",
    )
    sequential = _fresh(d, "1", tmp_path / "cache")
    parallel = _fresh(d, "3", tmp_path / "cache")
    assert sequential["jobs"] == 1 and parallel["jobs"] == 3
    assert parallel["verdict"] == sequential["verdict"]
    assert len(sequential["verdict"]["sources"]) == 3 and sequential["verdict"]["cascade"]


def test_no_fork_while_other_threads_run(tmp_path, cache):
    got = _fresh(_noisy_ranks(tmp_path), "3", tmp_path / "cache")
    assert got["jobs"] == 2  # two files
    assert got["under_a_thread"] == 1
