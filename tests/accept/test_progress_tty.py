"""Live progress: on a real pseudo-terminal the load steps draw a progress line (requests done/planned,
TTFT/E2E p99, errors, time left); piped, or with --json, nothing of it is written."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

PROGRESS = re.compile(r"requests \d+(?:/\d+)? done, TTFT p99 [^,]+, E2E p99 [^,]+, errors \d+, [^\n\r]*left")
ARGS = ("--steps", "ramp,soak", "--quick", "--concurrency", "1,2", "--requests-per-step", "16", "--soak", "3s",
        "--max-client-lag-ms", "1000")  # fmt: skip


def _cmd(url: str, tmp_path: Path, *extra: str) -> list[str]:
    exe = str(Path(sys.executable).with_name("vllm-medic"))
    return [exe, "accept", url, *ARGS, *extra, "--db", f"sqlite:///{tmp_path}/h.db"]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(TERM="xterm", COLUMNS="200", LINES="40")
    return env


def _run_on_tty(cmd: list[str], timeout_s: float = 120) -> tuple[int, str]:
    master, slave = pty.openpty()
    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=_env(), close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return code, b"".join(chunks).decode("utf-8", "replace")


def test_progress_is_drawn_on_a_terminal(sim, tmp_path):
    s = sim()
    code, text = _run_on_tty(_cmd(s.url, tmp_path))
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    assert code == 0, plain[-3000:]
    assert PROGRESS.search(plain), plain[-3000:]
    assert "ramp level c=1: requests" in plain and "/16 done" in plain
    assert re.search(r"soak c=\d+ window 1/1 \(3 s of soak left\): requests \d+ done", plain), plain[-3000:]


def test_no_progress_in_a_pipe_or_with_json(sim, tmp_path):
    s = sim()
    for extra in ((), ("--json",)):
        proc = subprocess.run(
            _cmd(s.url, tmp_path, *extra), capture_output=True, text=True, env=_env(), timeout=120
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert not PROGRESS.search(proc.stdout + proc.stderr), proc.stderr
        assert "done, TTFT p99" not in proc.stdout + proc.stderr
    # and on a terminal with --json: the JSON stays clean, no progress either
    code, text = _run_on_tty(_cmd(s.url, tmp_path, "--json"))
    assert code == 0 and not PROGRESS.search(text), text[-2000:]
