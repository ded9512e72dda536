"""The user's cache folder and its one way of writing: what is kept there (compiled screens, parsed YAML)
is only ever a shortcut, so a cache that cannot be written costs time, never a result.

The folder is `$VLLM_MEDIC_CACHE_DIR`, else `$XDG_CACHE_HOME/vllm-medic`, else `~/.cache/vllm-medic`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    explicit = os.environ.get("VLLM_MEDIC_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "vllm-medic"


def store_file(path: Path, data: bytes, keep: int) -> None:
    """Write a cache file atomically and keep only the `keep` newest with its suffix; a read-only or full
    cache is skipped (the caller computes again next time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
        olds = sorted(path.parent.glob(f"*{path.suffix}"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in olds[keep:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # read-only or full: nothing is kept, nothing is lost
