"""Version strings as found in the field (drivers, vLLM, CUDA) compared without surprises."""

from __future__ import annotations

import re

_NUM_PREFIX = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """Leading dotted numbers: "580.65.06" -> (580, 65, 6); "0.27.1+cu130" -> (0, 27, 1); junk -> None."""
    if not text:
        return None
    m = _NUM_PREFIX.match(str(text))
    if not m:
        return None
    return tuple(int(p) for p in m.group(1).split("."))


def is_dev_build(text: str | None) -> bool:
    """vLLM nightlies report "0.1.devNNNN+g<sha>" or "0.27.1.dev12+g...": not comparable to a release floor."""
    return bool(text) and ".dev" in str(text)


def version_lt(a: str | None, b: str | None) -> bool | None:
    """a < b, padding with zeros; None when either side cannot be read."""
    pa, pb = parse_version(a), parse_version(b)
    if pa is None or pb is None:
        return None
    n = max(len(pa), len(pb))
    return pa + (0,) * (n - len(pa)) < pb + (0,) * (n - len(pb))


def major_minor(text: str | None) -> str | None:
    v = parse_version(text)
    if v is None:
        return None
    return f"{v[0]}.{v[1] if len(v) > 1 else 0}"
