"""A copy of a stream that can be read only once, so the weak layer can read it a second time.

stdin, `docker logs` and `kubectl logs` are consumed by the first pass; the weak layer's second
look (weak.py) needs the bytes again, and a log piped in must get the same answer as the same log
given as a file. While the first pass reads such a stream, every block it reads is also written to
an anonymous temporary file (unlinked at once: nothing is left behind on Ctrl-C or a crash). Up to
SPOOL_MAX_BYTES per stream: beyond it, or when the disk refuses a write, the copy stops and the
second look covers what was kept, which the result says.
"""

from __future__ import annotations

import os
import tempfile
from typing import IO, BinaryIO

SPOOL_MAX_BYTES = 2 * 1024**3


def spool_limit() -> int:
    """SPOOL_MAX_BYTES, or VLLM_MEDIC_TRIAGE_SPOOL_MAX (bytes; 0 keeps no copy)."""
    raw = os.environ.get("VLLM_MEDIC_TRIAGE_SPOOL_MAX", "").strip()
    try:
        return max(0, int(raw)) if raw else SPOOL_MAX_BYTES
    except ValueError:
        return SPOOL_MAX_BYTES


class Spool:
    """The kept copy of one stream: `kept` bytes, and why it stopped short (`cut`), if it did."""

    def __init__(self, limit: int | None = None) -> None:
        self.limit = spool_limit() if limit is None else limit
        self.kept = 0
        self.cut: str | None = None
        self._file: IO[bytes] | None = None

    def keep(self, data: bytes) -> None:
        if self.cut is not None or not data:
            return
        room = self.limit - self.kept
        piece = data if len(data) <= room else data[:room]
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile()  # noqa: SIM115 - lives until close(), across calls
            self._file.write(piece)
        except OSError as exc:
            self.cut = f"the copy for the second look stopped at {self.kept} bytes ({exc.strerror or exc})"
            return
        self.kept += len(piece)
        if len(piece) < len(data):
            self.cut = f"the second look covers only its first {self.limit} bytes"

    def tee(self, stream: IO[bytes]) -> _Tee:
        return _Tee(stream, self)

    def opener(self) -> BinaryIO:
        """A new reader over the copy, from its start (the first pass has finished writing it)."""
        if self._file is None:
            raise OSError("nothing was kept")
        self._file.flush()
        fh = os.fdopen(os.dup(self._file.fileno()), "rb", buffering=0)
        fh.seek(0)
        return fh

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class _Tee:
    """Reads like the stream it wraps (`read`, `read1`) and keeps each block in the spool."""

    def __init__(self, stream: IO[bytes], spool: Spool) -> None:
        self._stream = stream
        self._spool = spool

    def seekable(self) -> bool:
        return False  # read once, as it arrives

    def read1(self, n: int = -1) -> bytes:
        inner = getattr(self._stream, "read1", None)
        return self._kept(inner(n) if inner is not None else self._stream.read(n))

    def _kept(self, data: bytes) -> bytes:
        self._spool.keep(data)
        return data

    def read(self, n: int = -1) -> bytes:
        return self._kept(self._stream.read(n))
