"""A log pasted as one uniformly indented block (a markdown list item, a quoted excerpt) is read
without that indent: every non-blank line sharing the same leading whitespace says the indent belongs
to the paste, not to the log. Only leading whitespace is removed, so line numbers stay the same.

Only small inputs that can be read twice (files, text, .gz) up to one scan block are looked at; the
look stops at the first non-blank line without leading whitespace, which real logs show at once.
"""

from __future__ import annotations

import io
import os
from typing import IO

LIMIT_BYTES = 4 * 1024 * 1024
_FIRST_LOOK = 8 * 1024
_WHITESPACE = b" \t"


def common_indent(data: bytes) -> bytes:
    """The leading whitespace every non-blank line of `data` starts with (b"" when one has none)."""
    prefix: bytes | None = None
    for line in data.split(b"\n"):
        body = line.rstrip(b"\r")
        if not body.strip():
            continue
        lead = body[: len(body) - len(body.lstrip(_WHITESPACE))]
        if not lead:
            return b""
        if prefix is None:
            prefix = lead
        else:
            n = 0
            for a, b in zip(prefix, lead, strict=False):
                if a != b:
                    break
                n += 1
            prefix = prefix[:n]
            if not prefix:
                return b""
    return prefix or b""


def dedent(data: bytes) -> bytes | None:
    """`data` with its common indent removed from every line, or None when it has none."""
    prefix = common_indent(data)
    if not prefix:
        return None
    n = len(prefix)
    out = [line[n:] if line.startswith(prefix) else line.lstrip(_WHITESPACE) for line in data.split(b"\n")]
    return b"\n".join(out)


def _small(stream: IO[bytes]) -> bool:
    if isinstance(stream, io.BytesIO):
        return len(stream.getbuffer()) <= LIMIT_BYTES
    try:
        return os.fstat(stream.fileno()).st_size <= LIMIT_BYTES or not isinstance(stream, io.FileIO)
    except (OSError, ValueError, io.UnsupportedOperation):
        return True


def maybe_dedent(stream: IO[bytes]) -> IO[bytes]:
    """The stream itself, rewound, unless it is a small, re-readable, uniformly indented log: then
    its dedented bytes. A pipe (stdin, `docker logs`) is passed on untouched."""
    try:
        if not stream.seekable() or stream.tell() != 0 or not _small(stream):
            return stream
    except (OSError, ValueError):
        return stream
    head = stream.read(_FIRST_LOOK) or b""
    cut = head.rfind(b"\n")
    if not head or not common_indent(head[: cut if cut >= 0 else len(head)]):
        stream.seek(0)
        return stream
    data = head + (stream.read(LIMIT_BYTES + 1 - len(head)) or b"")
    if len(data) > LIMIT_BYTES or (dedented := dedent(data)) is None:
        stream.seek(0)
        return stream
    return io.BytesIO(dedented)


__all__ = ["LIMIT_BYTES", "common_indent", "dedent", "maybe_dedent"]
