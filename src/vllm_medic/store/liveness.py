"""Is the process that is writing a run still alive? (So a run left `running` by a dead writer reads as
`interrupted` without anyone having to clean up after a `kill -9`.)"""

from __future__ import annotations

import os
import socket
from pathlib import Path

# A writer on another host cannot be probed; it is presumed dead when it has not written for this long.
STALE_AFTER_S = 15 * 60


def this_host() -> str:
    return socket.gethostname()


def process_start_token(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (field 22 of /proc/PID/stat), so a recycled pid is not mistaken
    for the original writer. None where /proc is unavailable."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm (field 2) may contain spaces and parentheses: split after the last ')'.
    rest = raw.rsplit(")", 1)[-1].split()
    # rest[0] is field 3 (state); field 22 is rest[19]
    return rest[19] if len(rest) > 19 else None


def pid_alive(pid: int, start_token: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    except OSError:
        return False
    if start_token is not None:
        current = process_start_token(pid)
        if current is not None and current != start_token:
            return False
    if Path(f"/proc/{pid}/stat").exists():
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except (OSError, IndexError):
            return True
        if state == "Z":  # zombie: exited, not yet reaped
            return False
    return True


def writer_gone(
    host: str, pid: int | None, pid_start: str | None, heartbeat: float, now: float
) -> str | None:
    """Why a `running` run's writer is known to be gone, or None if it may still be running."""
    if host == this_host() and pid is not None:
        if not pid_alive(pid, pid_start):
            return f"writer process {pid} on {host} is gone (killed or crashed)"
        return None
    if now - heartbeat > STALE_AFTER_S:
        return f"no write from {host or 'unknown host'} pid {pid} for {int(now - heartbeat)} s"
    return None
