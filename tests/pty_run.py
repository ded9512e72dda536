"""Run a command on a real pseudo-terminal (stdin, stdout and stderr all on it), as a user at a terminal
would: what the live progress display draws is read back from the terminal, escapes stripped."""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import time

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def tty_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env.update(TERM="xterm", COLUMNS="200", LINES="40", **extra)
    return env


def run_on_tty(cmd: list[str], timeout_s: float = 120, env: dict[str, str] | None = None) -> tuple[int, str]:
    """(exit code, everything written to the terminal with the escapes stripped)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        cmd, stdin=slave, stdout=slave, stderr=slave, env=env or tty_env(), close_fds=True
    )
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
    return code, ANSI.sub("", b"".join(chunks).decode("utf-8", "replace"))
