"""The shipped YAML (catalogue, families, cues, secret shapes) parsed once per content, kept in the user's
cache (user_cache.py).

libyaml's C parser still builds every node in Python: the ~170 kB shipped each run took ~20 ms to
parse, the same documents ~0.5 ms to load as marshal data. A file is keyed by a SHA-256 of the text,
the Python version (marshal's format is the interpreter's own) and the installed PyYAML (`pyyaml_tag`), and carries a
SHA-256 of its body: a truncated or foreign file is parsed again and rewritten, never loaded. A document
marshal cannot hold (a date) is parsed every time; a cache that cannot be written costs the parse.
Only shipped files come here (`shipped_yaml`): a user's file goes through the guarded loader (safeyaml.py).
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
from collections.abc import Callable
from importlib.machinery import PathFinder
from pathlib import Path
from typing import Any

from vllm_medic.user_cache import cache_dir as user_cache_dir
from vllm_medic.user_cache import store_file

_MAGIC = b"vllm-medic yaml 1\n"
_KEEP = 64  # parsed files kept (one per shipped file and version seen); the oldest go first


def cache_dir() -> Path:
    return user_cache_dir() / "triage-yaml"


def _path(text: str, tag: str) -> Path:
    h = hashlib.sha256(f"{sys.version} {tag}\0".encode())
    h.update(text.encode("utf-8", "surrogatepass"))
    return cache_dir() / f"{h.hexdigest()[:32]}.marshal"


def _load(path: Path) -> tuple[bool, Any]:
    try:
        raw = path.read_bytes()
    except OSError:
        return False, None
    head_end = raw.find(b"\n", len(_MAGIC))
    if not raw.startswith(_MAGIC) or head_end < 0:
        return False, None
    body = raw[head_end + 1 :]
    if hashlib.sha256(body).hexdigest().encode() != raw[len(_MAGIC) : head_end]:
        return False, None
    try:
        return True, marshal.loads(body)
    except (EOFError, ValueError, TypeError):
        return False, None


def _store(path: Path, doc: Any) -> None:
    try:
        body = marshal.dumps(doc)
    except ValueError:
        return  # a date or another object marshal does not hold: parsed each time
    store_file(path, _MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body, _KEEP)


def pyyaml_tag() -> str:
    """Which PyYAML would parse, told without importing it (~10 ms of every start): where its package
    lies, its `__init__.py`'s size and time (an upgrade or reinstall rewrites the file that holds the
    version) and whether libyaml's C extension is beside it."""
    spec = PathFinder.find_spec("yaml")
    if spec is None or spec.origin is None:
        return "no-pyyaml"
    try:
        st = os.stat(spec.origin)
        c_ext = any(name.startswith("_yaml.") for name in os.listdir(os.path.dirname(spec.origin)))
    except OSError:
        return f"{spec.origin} unreadable"
    return f"{spec.origin} {st.st_size} {st.st_mtime_ns} {'C' if c_ext else 'py'}"


def parsed(text: str, parse: Callable[[str], Any], tag: str) -> Any:
    """`parse(text)`, from the cache when this text was parsed before (`tag` names the parser)."""
    path = _path(text, tag)
    hit, doc = _load(path)
    if hit:
        return doc
    doc = parse(text)
    _store(path, doc)
    return doc


def shipped_yaml(text: str) -> Any:
    """`yaml.safe_load` of a file shipped in the package: through libyaml's C parser when PyYAML has it
    (about 10x faster), the pure-Python one otherwise, and from the cache when it was parsed before, where
    a hit does not import PyYAML at all."""
    return parsed(text, _c_safe_load, pyyaml_tag())


def _c_safe_load(text: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
