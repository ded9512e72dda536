"""Where log bytes come from: files, directories, globs, .gz, stdin, `docker logs`, `kubectl logs`.

Each source opens as a binary stream. Problems with one input become a warning naming it; only
"nothing at all could be read" is an error.
"""

from __future__ import annotations

import glob
import gzip
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, BinaryIO

from vllm_medic.errors import ToolError, UsageError


def command_timeout_s() -> float:
    """How long `docker logs` / `kubectl logs` may run (VLLM_MEDIC_TRIAGE_CMD_TIMEOUT, default 300 s)."""
    try:
        return max(0.1, float(os.environ.get("VLLM_MEDIC_TRIAGE_CMD_TIMEOUT", "300")))
    except ValueError:
        return 300.0


_RANK_IN_FILENAME = re.compile(r"(?:rank|tp|worker|gpu)[_\-.]?(\d+)", re.IGNORECASE)
_SNIFF = 8192


@dataclass
class LogSource:
    name: str
    opener: Callable[[], BinaryIO] | None = None
    command: list[str] | None = None
    rank: int | None = None
    node: str | None = None
    path: Path | None = None
    # Can be opened and read again (files, text): the weak layer's second look (weak.py) needs it.
    replayable: bool = False
    # A copy the first pass kept of a stream it could read only once (spool.py): read as it came, never
    # dedented (the first pass could not dedent a pipe, and the offsets it recorded are the raw ones).
    spooled: bool = False


def _rank_from_name(name: str) -> int | None:
    m = _RANK_IN_FILENAME.search(Path(name).name)
    return int(m.group(1)) if m else None


_TEXT_CONTROLS = frozenset(b"\t\n\r\x0b\x0c\x08\x1b")


def _looks_binary(head: bytes) -> bool:
    """Control bytes other than whitespace/ANSI mean binary. NULs alone do not: logs get NUL-filled
    holes after a crash, and those are stripped while reading rather than losing the file."""
    if not head or head[:2] == b"\x1f\x8b":
        return False
    body = head.replace(b"\x00", b"")
    if not body:
        return False
    ctrl = sum(1 for b in body if b < 32 and b not in _TEXT_CONTROLS or b == 127)
    return ctrl > len(body) // 20


def _file_source(path: Path, warnings: list[str]) -> LogSource | None:
    name = str(path)
    try:
        if not path.is_file():
            warnings.append(f"{name}: not a regular file, skipped")
            return None
        with path.open("rb") as fh:
            head = fh.read(_SNIFF)
    except OSError as exc:
        warnings.append(f"{name}: cannot read ({exc.strerror or exc}), skipped")
        return None
    if _looks_binary(head):
        warnings.append(f"{name}: looks binary (NUL/control bytes), skipped")
        return None
    is_gz = head[:2] == b"\x1f\x8b"

    def opener() -> BinaryIO:
        if is_gz:
            # a GzipFile reads bytes like any binary file; typeshed does not derive it from BinaryIO
            return gzip.open(path, "rb")  # type: ignore[return-value]
        return path.open("rb", buffering=0)

    return LogSource(name=name, opener=opener, rank=_rank_from_name(name), path=path, replayable=True)


def _expand_path(arg: str, warnings: list[str]) -> list[Path]:
    p = Path(arg)
    if p.is_dir():
        out: list[Path] = []
        for root, dirs, files in os.walk(
            p, onerror=lambda e: warnings.append(f"{e.filename}: {e.strerror}, skipped")
        ):
            dirs.sort()
            out.extend(Path(root) / f for f in sorted(files))
        if not out:
            warnings.append(f"{arg}: directory has no files")
        return out
    if p.exists() or p.is_symlink():
        return [p]
    if any(c in arg for c in "*?["):
        matches = sorted(glob.glob(arg, recursive=True))
        if not matches:
            warnings.append(f"{arg}: pattern matched no files")
        return [Path(m) for m in matches if Path(m).is_file()]
    warnings.append(f"{arg}: no such file or directory, skipped")
    return []


def _stdin_source() -> LogSource:
    """stdin redirected from a file (`< LOG`) reads like that file: pread-able and readable again from
    where it started; a pipe is read once (the scan keeps a copy for a second look: spool.py)."""
    try:
        if stat.S_ISREG(os.fstat(0).st_mode):
            start = os.lseek(0, 0, os.SEEK_CUR)

            def opener() -> BinaryIO:
                fh = os.fdopen(os.dup(0), "rb", buffering=0)
                fh.seek(start)
                return fh

            return LogSource(name="<stdin>", opener=opener, replayable=True)
    except OSError:
        pass
    return LogSource(name="<stdin>", opener=lambda: sys.stdin.buffer)


def kubectl_args(target: str, previous: bool) -> list[str]:
    """`--kubectl POD`, `--kubectl pod/NAME`, `--kubectl '-l app=vllm'` or `--kubectl app=vllm` (a selector)."""
    t = target.strip()
    base = ["logs", "--all-containers=true", "--timestamps=true", "--prefix=true"]
    if t.startswith("-l"):
        t = t[2:].lstrip(" =")
        base += ["-l", t, "--max-log-requests=64"]
    elif "=" in t:
        base += ["-l", t, "--max-log-requests=64"]
    else:
        base.append(t)
    if previous:
        base.append("--previous")
    return base


def expand_inputs(
    inputs: list[str],
    *,
    docker: list[str] | tuple[str, ...] = (),
    kubectl: list[str] | tuple[str, ...] = (),
    previous: bool = False,
    warnings: list[str],
) -> list[LogSource]:
    sources: list[LogSource] = []
    for arg in inputs:
        if arg == "-":
            sources.append(_stdin_source())
            continue
        for path in _expand_path(arg, warnings):
            src = _file_source(path, warnings)
            if src is not None:
                sources.append(src)
    for name in docker:
        sources.append(
            LogSource(name=f"docker:{name}", command=["docker", "logs", "--timestamps", name], node=name)
        )
    for target in kubectl:
        label = target.strip()
        sources.append(
            LogSource(name=f"kubectl:{label}", command=["kubectl", *kubectl_args(label, False)], node=label)
        )
        if previous:
            sources.append(
                LogSource(
                    name=f"kubectl:{label} (previous)",
                    command=["kubectl", *kubectl_args(label, True)],
                    node=label,
                )
            )
    return sources


def iter_streams(src: LogSource, warnings: list[str]) -> Iterator[tuple[str, IO[bytes]]]:
    """Yield the streams of one source: one for a file; stdout then stderr for a command.

    Each stream must be read to the end before asking for the next one."""
    if src.opener is not None:
        stream = src.opener()
        try:
            yield src.name, stream
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()
        return
    assert src.command is not None
    exe = shutil.which(src.command[0])
    if exe is None:
        raise ToolError(f"{src.command[0]} is not on PATH; cannot read {src.name}")
    shown = " ".join(src.command)
    with tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                [exe, *src.command[1:]], stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL
            )
        except OSError as exc:
            raise ToolError(f"cannot run {src.command[0]}: {exc}") from None
        timeout = command_timeout_s()
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            assert proc.stdout is not None
            yield src.name, proc.stdout
            proc.stdout.close()
            rc = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if rc < 0:
            warnings.append(
                f"{src.name}: `{shown}` did not finish within {timeout:g}s; scanned what it printed"
            )
        elif rc != 0:
            err.seek(0)
            msg = err.read(65536).decode("utf-8", "replace").strip().splitlines()
            warnings.append(f"{src.name}: `{shown}` exited {rc}: {msg[-1] if msg else 'no message'}")
            return
        if err.tell() > 0:
            # `docker logs` replays the container's stderr (where tracebacks go) on its own stderr.
            err.seek(0)
            yield f"{src.name} (stderr)", err


def check_inputs(
    inputs: list[str], docker: list[str] | tuple[str, ...], kubectl: list[str] | tuple[str, ...]
) -> None:
    if not inputs and not docker and not kubectl:
        raise UsageError("give at least one log file, directory, glob, '-' for stdin, --docker or --kubectl")
