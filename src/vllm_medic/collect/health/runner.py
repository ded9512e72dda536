"""Run one command with a timeout, never through a shell, and say exactly how it went.

The health probes use this until they are wired into the collect runner; it returns the same kind
of facts (exit code, timed out, missing binary) so a probe can turn each outcome into a finding that
says what could not be checked. On timeout the whole process group is killed, so a hung
``docker run`` or ``journalctl`` never outlives the probe.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

#: Output beyond this many bytes per stream is dropped (kernel logs can be huge); ``truncated`` says so.
MAX_OUTPUT_BYTES = 4 * 1024 * 1024


@dataclass
class CommandResult:
    argv: list[str]
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    missing: bool = False  # the binary is not on PATH
    error: str = ""  # OSError text when the command could not start for another reason
    duration_s: float = 0.0
    truncated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.missing and not self.error

    @property
    def output(self) -> str:
        """stdout and stderr together, as a person would have seen them in a terminal."""
        if self.stdout and self.stderr:
            return self.stdout.rstrip("\n") + "\n" + self.stderr
        return self.stdout or self.stderr

    def describe(self) -> str:
        cmd = " ".join(self.argv)
        if self.missing:
            return f"`{cmd}`: {self.argv[0]} not found on PATH"
        if self.timed_out:
            return f"`{cmd}`: no answer within {self.duration_s:.0f}s (killed)"
        if self.error:
            return f"`{cmd}`: could not start ({self.error})"
        return f"`{cmd}`: exit {self.exit_code}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Runner = Callable[[Sequence[str], float], CommandResult]


def run_command(argv: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> CommandResult:
    """Run ``argv`` (no shell) for at most ``timeout`` seconds; never raises for command failures."""
    args = [str(a) for a in argv]
    started = time.monotonic()
    try:
        proc = subprocess.Popen(  # noqa: S603 - argv list, never a shell
            args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            env=dict(env) if env is not None else None,
        )
    except FileNotFoundError:
        return CommandResult(argv=args, missing=True, duration_s=time.monotonic() - started)
    except OSError as exc:
        return CommandResult(argv=args, error=str(exc), duration_s=time.monotonic() - started)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        timed_out = True
    except KeyboardInterrupt:
        _kill_group(proc)
        proc.communicate()
        raise
    truncated = len(out) > MAX_OUTPUT_BYTES or len(err) > MAX_OUTPUT_BYTES
    return CommandResult(
        argv=args,
        exit_code=None if timed_out else proc.returncode,
        stdout=out[-MAX_OUTPUT_BYTES:].decode("utf-8", "replace"),
        stderr=err[-MAX_OUTPUT_BYTES:].decode("utf-8", "replace"),
        timed_out=timed_out,
        duration_s=time.monotonic() - started,
        truncated=truncated,
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
