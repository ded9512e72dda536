"""The Hyperscan screen database, compiled once per pattern set and kept in the user's cache.

Compiling ~300 patterns takes Hyperscan 0.3-0.4 s, about what grep needs for 256 MB; loading the
serialized database takes microseconds. The file is keyed by a hash of the patterns, the flags and
the Hyperscan version, carries a SHA-256 of its body (a truncated or foreign file is recompiled,
never loaded), and a database built for another CPU is rejected by Hyperscan itself and recompiled.
The cache lives under user_cache.py's folder; when it cannot be written the database is simply compiled
on every run.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from vllm_medic.user_cache import cache_dir as user_cache_dir
from vllm_medic.user_cache import store_file

_MAGIC = b"vllm-medic hyperscan screen 1\n"
_KEEP = 8  # databases kept (one per catalogue set seen); the oldest go first


def cache_dir() -> Path:
    return user_cache_dir() / "triage-screens"


def _flags(hs: Any) -> int:
    # `$` must match before each newline of the block, as it does at the end of the exact line.
    return int(hs.HS_FLAG_MULTILINE)


def _usable(pattern: str) -> bool:
    """Hyperscan without its UTF-8 mode reads a non-ASCII class or repeat byte by byte (a superset is
    no longer guaranteed), and its UTF-8 mode is undefined on invalid UTF-8, which logs hold: such
    patterns go to RE2."""
    return pattern.isascii()


def _compile(hs: Any, patterns: list[str], ids: list[int]) -> Any:
    db = hs.Database(mode=hs.HS_MODE_BLOCK)
    db.compile(
        expressions=[patterns[i].encode("ascii") for i in ids],
        ids=list(range(len(ids))),
        flags=[_flags(hs)] * len(ids),
    )
    return db


def _build(hs: Any, patterns: list[str]) -> tuple[Any, list[int]]:
    """(database over the accepted patterns or None, indices Hyperscan rejected)."""
    ok = [i for i, p in enumerate(patterns) if _usable(p)]
    try:
        db = _compile(hs, patterns, ok) if ok else None
    except hs.error:
        # The error does not say which pattern: find them one by one (only a user catalogue with a
        # lookaround or a backreference gets here, and only when its database is not cached yet).
        ok = [i for i in ok if _compiles(hs, patterns, i)]
        db = _compile(hs, patterns, ok) if ok else None
    kept = set(ok)
    return db, [i for i in range(len(patterns)) if i not in kept]


def _compiles(hs: Any, patterns: list[str], i: int) -> bool:
    try:
        _compile(hs, patterns, [i])
        return True
    except hs.error:
        return False


def _key(hs: Any, patterns: list[str]) -> str:
    h = hashlib.sha256()
    h.update(f"{getattr(hs, '__version__', '?')} {_flags(hs)}".encode())
    for p in patterns:
        h.update(b"\0" + p.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:32]


def _load(hs: Any, path: Path) -> tuple[Any, list[int]] | None:
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if not raw.startswith(_MAGIC):
        return None
    head_end = raw.find(b"\n", len(_MAGIC))
    if head_end < 0:
        return None
    try:
        head = json.loads(raw[len(_MAGIC) : head_end])
        body = raw[head_end + 1 :]
        if hashlib.sha256(body).hexdigest() != head["sha256"]:
            return None
        rejected = [int(i) for i in head["rejected"]]
        db = hs.loadb(body, hs.HS_MODE_BLOCK) if body else None
        if db is not None:
            db.scratch = hs.Scratch(db)
    except (ValueError, KeyError, TypeError, hs.error):
        return None  # corrupt, another CPU's database, another Hyperscan version: recompile
    return db, rejected


def _store(hs: Any, path: Path, db: Any, rejected: list[int]) -> None:
    body = hs.dumpb(db) if db is not None else b""
    head = json.dumps({"sha256": hashlib.sha256(body).hexdigest(), "rejected": rejected}).encode()
    store_file(path, _MAGIC + head + b"\n" + body, _KEEP)


def hyperscan_database(hs: Any, screen_patterns: list[str], originals: list[str]) -> tuple[Any, list[str]]:
    """(database of the screen patterns Hyperscan accepts or None, the originals it did not accept).

    `screen_patterns[i]` is the screen form of `originals[i]`; what Hyperscan rejects goes back as the
    original for the next engine to screen."""
    db, rejected = hyperscan_database_indices(hs, screen_patterns)
    return db, [originals[i] for i in rejected]


def hyperscan_database_indices(hs: Any, screen_patterns: list[str]) -> tuple[Any, list[int]]:
    """(database or None, indices of the patterns Hyperscan did not accept). The database reports the
    k-th accepted pattern (in list order) as match id k."""
    path = cache_dir() / f"{_key(hs, screen_patterns)}.hsdb"
    cached = _load(hs, path)
    if cached is None:
        cached = _build(hs, screen_patterns)
        _store(hs, path, *cached)
    db, rejected = cached
    if db is not None and getattr(db, "scratch", None) is None:
        db.scratch = hs.Scratch(db)
    return db, rejected
