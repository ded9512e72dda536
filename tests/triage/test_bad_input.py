"""Bad input never loses data and never gets a traceback. All files here are synthetic (written by the test)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

MEDIC = Path(sys.executable).with_name("vllm-medic")
ROOT_LINE = (
    "(EngineCore_DP0 pid=7) ERROR 11-30 03:10:00 [core.py:900] ValueError: No available memory for the "
    "cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
)


def _triage(*args: str, timeout: int = 300) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(MEDIC), "triage", *args, "--json"], capture_output=True, timeout=timeout)


def _good(tmp: Path) -> Path:
    p = tmp / "good.log"
    p.write_text("INFO 11-30 03:09:59 [a.py:1] loading\n" + ROOT_LINE + "\n", encoding="utf-8")
    return p


def test_binary_nul_invalid_utf8_empty_and_unreadable_are_skipped_or_survived(tmp_path):
    good = _good(tmp_path)
    (tmp_path / "core.bin").write_bytes(bytes(range(256)) * 64)
    (tmp_path / "nul.log").write_bytes(b"INFO 11-30 03:00:00 [a.py:1] ok\n" + b"\x00" * 50 + b"x\x00y\n")
    (tmp_path / "latin1.log").write_bytes("INFO 11-30 03:00:01 [a.py:1] caf\xe9 \xff\xfe\n".encode("latin-1"))
    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "dangling.log").symlink_to(tmp_path / "gone.log")
    p = _triage(str(tmp_path))
    assert b"Traceback" not in p.stderr
    assert p.returncode == 1, p.stderr
    d = json.loads(p.stdout)
    assert d["root_cause"]["source"] == str(good) and d["root_cause"]["line"] == 2
    warnings = " | ".join(d["warnings"])
    assert "core.bin: looks binary" in warnings
    assert "dangling.log" in warnings
    names = {s["name"] for s in d["sources"]}
    assert str(tmp_path / "latin1.log") in names and str(tmp_path / "empty.log") in names


def test_truncated_gzip_keeps_what_was_readable(tmp_path):
    body = "".join(f"INFO 11-30 03:00:{i % 60:02d} [a.py:1] line {i}\n" for i in range(20000))
    data = gzip.compress((ROOT_LINE + "\n" + body).encode())
    (tmp_path / "cut.log.gz").write_bytes(data[: len(data) // 2])
    p = _triage(str(tmp_path / "cut.log.gz"))
    assert b"Traceback" not in p.stderr
    d = json.loads(p.stdout)
    assert p.returncode == 1
    assert d["root_cause"]["line"] == 1
    assert any("cut.log.gz: read stopped after line" in w for w in d["warnings"])


def test_100_mb_single_line_is_capped(tmp_path):
    big = tmp_path / "one-line.log"
    with big.open("wb") as fh:
        fh.write(b"INFO 11-30 03:00:00 [a.py:1] ")
        chunk = b"x" * (1 << 20)
        for _ in range(100):
            fh.write(chunk)
        fh.write(b"\n" + ROOT_LINE.encode() + b"\n")
    p = _triage(str(big))
    assert p.returncode == 1, p.stderr
    d = json.loads(p.stdout)
    assert d["root_cause"]["line"] == 2
    assert any("line 1 is longer than" in w for w in d["warnings"])


def test_directory_of_10000_files(tmp_path):
    d = tmp_path / "many"
    d.mkdir()
    for i in range(10000):
        (d / f"r{i:05d}.log").write_text(f"INFO 11-30 03:00:00 [a.py:1] file {i}\n", encoding="utf-8")
    (d / "r09999.log").write_text(ROOT_LINE + "\n", encoding="utf-8")
    p = _triage(str(d), timeout=600)
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    assert out["root_cause"]["source"].endswith("r09999.log")
    assert len(out["sources"]) == 10000


def _wait_until_scanning(pid: int, deadline_s: float = 60.0) -> None:
    """Observable readiness: the process is blocked reading its stdin pipe (the first line is consumed)."""
    end = time.monotonic() + deadline_s
    wchan = Path(f"/proc/{pid}/wchan")
    while time.monotonic() < end:
        try:
            if "pipe_read" in wchan.read_text() or "pipe_wait" in wchan.read_text():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError("triage never started scanning")


def test_interrupt_gives_a_message_not_a_traceback(tmp_path):
    proc = subprocess.Popen(
        [str(MEDIC), "triage", "-", "--json"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(b"INFO 11-30 03:00:00 [a.py:1] waiting\n")
    proc.stdin.flush()
    _wait_until_scanning(proc.pid)
    proc.send_signal(2)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert b"Traceback" not in err
    d = json.loads(out)  # what was read before Ctrl-C is still reported
    assert d["interrupted"] is True and d["sources"][0]["lines"] == 1
    assert any("interrupted while reading <stdin>" in w for w in d["warnings"])
