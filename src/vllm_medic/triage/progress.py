"""Bytes scanned / total while `triage` reads large inputs, for the terminal's live progress line.

It watches from the edge, never from the scan loop: ``_scan`` hands it each stream and its scanner as the
stream starts, and the drawing thread reads the stream's file offset (``lseek``: on-disk bytes, so a .gz
counts compressed bytes against its compressed size) or, for pipes, the scanner's own byte counter.
"""

from __future__ import annotations

import os
import time
from typing import Any

from vllm_medic.progress import time_left

LARGE_BYTES = 64 << 20  # inputs this large show the line at once; smaller ones only if still running
SHOW_SMALL_AFTER_S = 1.0


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f}"


class ScanProgress:
    def __init__(self) -> None:
        self.total: int | None = None  # None: a source without a size (stdin, docker, kubectl)
        self.sources = 0
        self.started = 0
        self._finished = 0
        # stream, scanner, fd (None: count read bytes), size
        self._current: tuple[Any, Any, int | None, int | None] | None = None
        self._t0 = time.monotonic()

    def begin(self, sources: list[Any]) -> None:
        total: int | None = 0
        for src in sources:
            try:
                size = os.stat(src.path).st_size if src.path is not None else None
            except OSError:
                size = None
            total = None if total is None or size is None else total + size
        self.total, self.sources, self._t0 = total, len(sources), time.monotonic()

    def stream(self, src: Any, stream: Any, scanner: Any) -> None:
        self._finished = self.scanned()
        self.started += 1
        fd: int | None = None
        size: int | None = None
        if src.path is not None:
            try:
                fd = stream.fileno()
                os.lseek(fd, 0, os.SEEK_CUR)
                size = os.fstat(fd).st_size
            except (OSError, AttributeError, ValueError):
                fd = None
        self._current = (stream, scanner, fd, size)

    def scanned(self) -> int:
        if self._current is None:
            return self._finished
        stream, scanner, fd, size = self._current
        if fd is not None:
            if getattr(stream, "closed", False) and size is not None:  # read to the end; its fd may be reused
                return self._finished + size
            try:
                return self._finished + os.lseek(fd, 0, os.SEEK_CUR)
            except OSError:
                return self._finished + (size or 0)
        return self._finished + int(scanner.total_bytes)

    def line(self) -> str:
        """The progress line (empty: nothing to show yet, for small inputs in their first second)."""
        elapsed = time.monotonic() - self._t0
        big = self.total is not None and self.total >= LARGE_BYTES
        if not big and elapsed < SHOW_SMALL_AFTER_S:
            return ""
        if not self.sources:
            return "triage: finding the inputs"
        done = self.scanned()
        files = f"{max(self.started, 1)} of {self.sources} inputs"
        if self.total:
            done = min(done, self.total)
            pct = 100.0 * done / self.total
            return (
                f"triage: scanned {_mib(done)}/{_mib(self.total)} MiB ({pct:.0f}%), {files}, "
                f"{time_left(done, self.total, elapsed)}"
            )
        return f"triage: scanned {_mib(done)} MiB, {files}"
