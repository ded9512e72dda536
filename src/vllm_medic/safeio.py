"""Opening user-given files safely: the one helper every reader of a path from argv or a bundle uses.

A path is read only when ``lstat`` says it is a regular file, and it is opened with ``O_NOFOLLOW |
O_NONBLOCK`` so a symlink swapped in after the check is refused and a FIFO can never block the open;
a read is capped. A symlink inside a bundle directory is never followed (it could point at a key file or
``/proc/self/environ``); a FIFO, device or socket where a file is expected is a usage error, not a hang.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from vllm_medic.errors import UsageError

_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe)",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFLNK: "a symbolic link",
    stat.S_IFDIR: "a directory",
}


def kind_of(path: Path) -> str | None:
    """None for a regular file (not followed through a symlink), else what the path is; 'missing'."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    return _KINDS.get(stat.S_IFMT(mode), "not a regular file")


def is_regular(path: Path) -> bool:
    """A regular file itself (a symlink to one is not)."""
    return kind_of(path) is None


def read_bytes(
    path: Path, cap: int, what: str = "file", shown: Path | str | None = None
) -> tuple[bytes, bool]:
    """Up to ``cap`` bytes of a regular file, and whether it was cut. Anything else is a UsageError
    naming the path (``shown`` where the caller resolved it) and what it is."""
    shown = path if shown is None else shown
    kind = kind_of(path)
    if kind == "missing":
        raise UsageError(f"cannot read {what} {shown}: no such file or directory")
    if kind is not None:
        raise UsageError(f"{what} {shown} is {kind}, not a regular file: refused (never followed or opened)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise UsageError(f"cannot read {what} {shown}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped between lstat and open
            raise UsageError(f"{what} {shown} is not a regular file: refused")
        chunks: list[bytes] = []
        left = cap + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise UsageError(f"cannot read {what} {shown}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data[:cap], len(data) > cap


def read_text(path: Path, cap: int, what: str = "file") -> str:
    data, _cut = read_bytes(path, cap, what)
    return data.decode("utf-8", "replace")


def read_arg_text(path: Path | str, what: str, cap: int | None = None) -> str:
    """A whole file named on the command line (``--snapshot``, ``--config``, a recipe, a catalogue, a
    request): a symlink there is the user's own choice and is resolved, but its target must be a regular
    file (a FIFO would block the read forever, a device never end); larger than ``cap`` (default
    :data:`MAX_FILE_BYTES`) is a UsageError, never a silently cut document."""
    cap = MAX_FILE_BYTES if cap is None else cap
    given = Path(path).expanduser()
    data, cut = read_bytes(given.resolve(), cap, what, shown=path)
    if cut:
        raise UsageError(f"{what} {path} is larger than {cap // 2**20} MiB: refused")
    return data.decode("utf-8", "replace")


MAX_JSON_DEPTH = 100  # nothing vllm-medic reads nests deeper than ~10


def _too_deep(data: Any, limit: int) -> bool:  # noqa: ANN401 - any JSON value
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


class JsonTooDeep(json.JSONDecodeError):
    """A :class:`json.JSONDecodeError` whose text is only why (no meaningless "line 1 column 1")."""

    def __init__(self) -> None:
        super().__init__(f"nested more than {MAX_JSON_DEPTH} levels deep", "", 0)

    def __str__(self) -> str:
        return self.msg


def loads_json(text: str | bytes) -> Any:  # noqa: ANN401 - any JSON value
    """:func:`json.loads` with nesting capped at :data:`MAX_JSON_DEPTH`: 100,000 ``[`` exhaust Python's
    recursion inside the parser, and 900 pass it only to break the first recursive walk after it. Too
    deep raises :class:`json.JSONDecodeError`, so every caller's "not valid JSON" message names its file."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise JsonTooDeep() from None
    if isinstance(data, dict | list) and _too_deep(data, MAX_JSON_DEPTH):
        raise JsonTooDeep()
    return data


def inside(root: Path, relative: str) -> Path | None:
    """``root / relative`` when it stays inside ``root`` (no absolute path, no ``..`` escape, no symlink
    on the way out), else None."""
    if not relative or os.path.isabs(relative):
        return None
    base = root.resolve()
    candidate = (root / relative).resolve()
    if candidate != base and base not in candidate.parents:
        return None
    return candidate


# One file read from a user or a bundle (a log, a captured output, a tar member, a decompressed .gz).
MAX_FILE_BYTES = 16 * 1024 * 1024


def gunzip_capped(data: bytes, cap: int = MAX_FILE_BYTES) -> tuple[bytes, bool]:
    """Decompress gzip ``data`` (concatenated members too) streaming, stopping at ``cap`` output bytes:
    a 512 MiB bomb costs ``cap``, never its full size. Returns (bytes, whether it was cut); a corrupt or
    truncated stream raises ``OSError``/``EOFError`` like :func:`gzip.decompress`."""
    import zlib

    out: list[bytes] = []
    total = 0
    rest = data
    while rest:
        d = zlib.decompressobj(wbits=31)
        chunk = d.decompress(rest, cap + 1 - total)
        out.append(chunk)
        total += len(chunk)
        while d.unconsumed_tail and total <= cap:
            chunk = d.decompress(d.unconsumed_tail, cap + 1 - total)
            if not chunk:
                break
            out.append(chunk)
            total += len(chunk)
        if total > cap:
            return b"".join(out)[:cap], True
        if not d.eof:
            raise EOFError("compressed file ended before the end-of-stream marker was reached")
        rest = d.unused_data.lstrip(b"\x00")
    return b"".join(out), False
