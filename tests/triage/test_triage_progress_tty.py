"""`triage` over large inputs draws bytes scanned / total on a terminal; small inputs, pipes and --json
stay quiet. The counting watches from the edge (file offsets, the scanner's byte counter)."""

from __future__ import annotations

import gzip
import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pty_run import run_on_tty, tty_env
from vllm_medic.triage.api import _scan, triage
from vllm_medic.triage.catalogue import load_catalogue
from vllm_medic.triage.progress import LARGE_BYTES, SHOW_SMALL_AFTER_S, ScanProgress
from vllm_medic.triage.sources import LogSource

SERVING = (
    b"(APIServer pid=1) INFO 05-01 14:30:01 [loggers.py:123] Engine 000: Avg prompt throughput: 512.3 tokens/s, "
    b"Avg generation throughput: 88.1 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 12.5%\n"
)
OOM = (
    b"(EngineCore pid=112) ERROR 05-01 14:39:06 [core.py:1131] torch.OutOfMemoryError: CUDA out of memory. "
    b"Tried to allocate 50.00 MiB.\n"
)
PROGRESS = re.compile(
    r"triage: scanned ([\d.]+)/([\d.]+) MiB \((\d+)%\), (\d+) of (\d+) inputs, [^\r\n]*left"
)
EXE = [str(Path(sys.executable).with_name("vllm-medic")), "triage"]


@pytest.fixture(scope="module")
def big_log(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("big") / "rank0.log"
    size = LARGE_BYTES + (16 << 20)
    path.write_bytes(SERVING * (size // len(SERVING) + 1) + OOM)
    return path


def test_large_input_shows_bytes_scanned_of_total(big_log: Path) -> None:
    code, text = run_on_tty([*EXE, str(big_log)])
    assert code == 1, text[-2000:]  # the OOM at the end is still found
    drawn = PROGRESS.findall(text)
    assert drawn, text[:2000]
    total = f"{big_log.stat().st_size / (1 << 20):.1f}"
    assert {t for _d, t, *_ in drawn} == {total}
    assert all(float(d) <= float(total) and (i, n) == ("1", "1") for d, _t, _p, i, n in drawn)
    assert "Root cause: GPU out of memory" in text


def test_small_input_pipe_and_json_draw_nothing(big_log: Path, tmp_path: Path) -> None:
    small = tmp_path / "small.log"
    small.write_bytes(SERVING * 100 + OOM)
    code, text = run_on_tty([*EXE, str(small)])
    assert code == 1 and "triage: scanned" not in text, text[:2000]
    code, text = run_on_tty([*EXE, str(big_log), "--json"])
    assert code == 1 and "triage: scanned" not in text and text.lstrip().startswith("{")
    proc = subprocess.run([*EXE, str(big_log)], capture_output=True, text=True, env=tty_env(), timeout=120)
    assert proc.returncode == 1 and "triage: scanned" not in proc.stdout + proc.stderr


def test_counts_files_gz_and_pipes_to_their_end(tmp_path: Path) -> None:
    plain = tmp_path / "rank0.log"
    plain.write_bytes(SERVING * 2000)
    packed = tmp_path / "rank1.log.gz"
    packed.write_bytes(gzip.compress(SERVING * 2000 + OOM))
    watch = ScanProgress()
    result = triage([str(plain), str(packed)], watch=watch)
    assert result.found
    # on-disk bytes: a .gz counts its compressed size, against the compressed total
    assert watch.total == plain.stat().st_size + packed.stat().st_size
    assert watch.scanned() == watch.total and watch.started == 2
    data = SERVING * 500 + OOM
    piped = ScanProgress()
    _scan([LogSource(name="<pipe>", opener=lambda: io.BytesIO(data))], load_catalogue([]), [], piped)
    assert piped.total is None and piped.scanned() == len(data)
    assert piped.line() == ""  # small work in its first second: nothing to draw
    piped._t0 -= SHOW_SMALL_AFTER_S  # still running a second later: the line, without a total
    assert piped.line() == f"triage: scanned {len(data) / (1 << 20):.1f} MiB, 1 of 1 inputs"
