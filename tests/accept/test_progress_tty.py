"""Live progress: on a real pseudo-terminal the load steps draw a progress line (requests done/planned,
TTFT/E2E p99, errors, time left); piped, or with --json, nothing of it is written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from pty_run import run_on_tty, tty_env

PROGRESS = re.compile(r"requests \d+(?:/\d+)? done, TTFT p99 [^,]+, E2E p99 [^,]+, errors \d+, [^\n\r]*left")
ARGS = ("--steps", "ramp,soak", "--quick", "--concurrency", "1,2", "--requests-per-step", "16", "--soak", "3s",
        "--max-client-lag-ms", "1000")  # fmt: skip


def _cmd(url: str, tmp_path: Path, *extra: str) -> list[str]:
    exe = str(Path(sys.executable).with_name("vllm-medic"))
    return [exe, "accept", url, *ARGS, *extra, "--db", f"sqlite:///{tmp_path}/h.db"]


def test_progress_is_drawn_on_a_terminal(sim, tmp_path):
    s = sim()
    code, plain = run_on_tty(_cmd(s.url, tmp_path))
    assert code == 0, plain[-3000:]
    assert PROGRESS.search(plain), plain[-3000:]
    assert "ramp level c=1: requests" in plain and "/16 done" in plain
    assert re.search(r"soak c=\d+ window 1/1 \(3 s of soak left\): requests \d+ done", plain), plain[-3000:]


def test_no_progress_in_a_pipe_or_with_json(sim, tmp_path):
    s = sim()
    for extra in ((), ("--json",)):
        proc = subprocess.run(
            _cmd(s.url, tmp_path, *extra), capture_output=True, text=True, env=tty_env(), timeout=120
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert not PROGRESS.search(proc.stdout + proc.stderr), proc.stderr
        assert "done, TTFT p99" not in proc.stdout + proc.stderr
    # and on a terminal with --json: the JSON stays clean, no progress either
    code, text = run_on_tty(_cmd(s.url, tmp_path, "--json"))
    assert code == 0 and not PROGRESS.search(text), text[-2000:]
