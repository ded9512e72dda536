"""`--follow`: watch live logs with tail -F semantics and report anomalies as they appear.

Files are polled (rotation: a new inode at the path is reopened from its start after the old file
is drained; truncation: a file shorter than what was read is reread from 0). `docker logs -f` and
`kubectl logs -f` are read on threads. Every root or cascade line is reported once, as an Anomaly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from vllm_medic.errors import ToolError
from vllm_medic.redact import redact_text
from vllm_medic.triage.catalogue import Catalogue
from vllm_medic.triage.normalize import MAX_LINE_CHARS, Event, normalize_line, timestamp_str
from vllm_medic.triage.scanner import classify
from vllm_medic.triage.sources import kubectl_args
from vllm_medic.triage.tracebacks import TracebackFolder


@dataclass
class Anomaly:
    """One root or cascade line seen live."""

    role: str  # root | cascade | generic
    signature: str
    category: str
    title: str
    source: str
    line: int
    text: str
    timestamp: str | None
    rank: int | None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class _LineTracker:
    """Per-source line state: numbering, partial line, traceback folding."""

    def __init__(self, name: str, catalogue: Catalogue, emit: Callable[[Anomaly], None]) -> None:
        self.name = name
        self.cat = catalogue
        self.emit = emit
        self.line = 0
        self.partial = b""
        self.folder = TracebackFolder()

    def reset(self) -> None:
        self.line = 0
        self.partial = b""
        self.folder = TracebackFolder()

    def feed(self, data: bytes) -> None:
        buf = self.partial + data
        parts = buf.split(b"\n")
        self.partial = parts.pop()
        if len(self.partial) > MAX_LINE_CHARS * 4:
            parts.append(self.partial)
            self.partial = b""
        for raw in parts:
            self.line += 1
            ev = normalize_line(raw, self.name, self.line)
            kept = self.folder.feed(ev)
            for cut in self.folder.take_cut():  # tracebacks that ended without an exception line
                self._consider(cut)
            if kept is not None:
                self._consider(kept)

    def _consider(self, ev: Event) -> None:
        sig, generic = classify(self.cat, ev)
        if sig is not None and sig.role == "noise":
            return
        if sig is None and not generic:
            return
        self.emit(
            Anomaly(
                role=sig.role if sig else "generic",
                signature=sig.id if sig else "generic-error",
                category=sig.category if sig else "other",
                title=sig.title if sig else "error line",
                source=ev.source,
                line=ev.line,
                text=redact_text(ev.text),
                timestamp=timestamp_str(ev.timestamp),
                rank=ev.rank,
            )
        )


class _FileFollower:
    def __init__(self, path: Path, tracker: _LineTracker) -> None:
        self.path = path
        self.tracker = tracker
        self.fh: BinaryIO | None = None
        self.ino: int | None = None
        self.pos = 0

    def _open(self) -> bool:
        try:
            self.fh = self.path.open("rb")
            self.ino = os.fstat(self.fh.fileno()).st_ino
            self.pos = 0
            return True
        except OSError:
            self.fh = None
            return False

    def poll(self) -> None:
        if self.fh is None and not self._open():
            return
        assert self.fh is not None
        self._drain()
        try:
            st = os.stat(self.path)
        except OSError:
            return  # rotated away, not yet recreated: keep the old handle
        if st.st_ino != self.ino:
            self._drain()
            self.fh.close()
            self.tracker.reset()
            if self._open():
                self._drain()
        elif st.st_size < self.pos:
            self.fh.seek(0)
            self.pos = 0
            self.tracker.reset()
            self._drain()

    def _drain(self) -> None:
        assert self.fh is not None
        while True:
            data = self.fh.read(1 << 20)
            if not data:
                return
            self.pos += len(data)
            self.tracker.feed(data)

    def close(self) -> None:
        if self.fh is not None:
            self.fh.close()


def _command_reader(
    cmd: list[str],
    tracker: _LineTracker,
    stop: threading.Event,
    lock: threading.Lock,
    procs: list[subprocess.Popen[bytes]],
) -> None:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    procs.append(proc)
    stdout = proc.stdout
    assert stdout is not None  # stdout=PIPE
    for chunk in iter(stdout.readline, b""):
        if stop.is_set():
            break
        with lock:
            tracker.feed(chunk)


def follow_sources(
    inputs: list[str],
    catalogue: Catalogue,
    on_anomaly: Callable[[Anomaly], None],
    stop: threading.Event,
    *,
    docker: list[str],
    kubectl: list[str],
    poll_s: float = 0.2,
) -> None:
    lock = threading.Lock()

    def emit(a: Anomaly) -> None:
        on_anomaly(a)

    followers = [_FileFollower(Path(p), _LineTracker(p, catalogue, emit)) for p in inputs]
    commands: list[tuple[str, list[str]]] = []
    for name in docker:
        commands.append(
            (f"docker:{name}", ["docker", "logs", "--follow", "--timestamps", "--tail", "0", name])
        )
    for target in kubectl:
        commands.append(
            (f"kubectl:{target}", ["kubectl", *kubectl_args(target, False), "--follow", "--tail=0"])
        )
    procs: list[subprocess.Popen[bytes]] = []
    threads = []
    for name, cmd in commands:
        exe = shutil.which(cmd[0])
        if exe is None:
            raise ToolError(f"{cmd[0]} is not on PATH; cannot follow {name}")
        t = threading.Thread(
            target=_command_reader,
            args=([exe, *cmd[1:]], _LineTracker(name, catalogue, emit), stop, lock, procs),
            daemon=True,
        )
        t.start()
        threads.append(t)
    try:
        while not stop.is_set():
            with lock:
                for f in followers:
                    f.poll()
            stop.wait(poll_s)
        with lock:
            for f in followers:
                f.poll()
    finally:
        for f in followers:
            f.close()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for t in threads:
            t.join(timeout=2)
