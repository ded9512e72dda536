"""Newline arithmetic for the block scan: where lines start and how many a block holds.

The native `_lines` module (built at install where a C compiler is found; see setup.py) does it 16 bytes
at a time; without it, or with VLLM_MEDIC_TRIAGE_NO_NATIVE=1, the same results come from `bytes.count`
and `rfind`. `ENGINE` says which one runs ("native" or "python")."""

from __future__ import annotations

import os
from collections.abc import Sequence

Block = bytes | bytearray

try:
    from vllm_medic.triage import _lines
except ImportError:  # pragma: no cover - an install without a C compiler
    _lines = None  # type: ignore[assignment]  # every use checks NATIVE first

NATIVE = _lines is not None and os.environ.get("VLLM_MEDIC_TRIAGE_NO_NATIVE", "") in ("", "0")
ENGINE = "native" if NATIVE else "python"


def count(block: Block, start: int = 0, end: int | None = None) -> int:
    """Newlines in `block[start:end]`."""
    end = len(block) if end is None else end
    if NATIVE:
        return _lines.count(block, start, end)
    return block.count(b"\n", start, end)


def candidates(block: Block, end: int, positions: Sequence[int]) -> tuple[list[int], list[int], int]:
    """(sorted distinct line indices of the ascending match offsets below `end`, where each of those lines
    starts, how many lines `block[:end]` holds)."""
    if NATIVE:
        return _lines.candidates(block, end, positions)
    indices: list[int] = []
    starts: list[int] = []
    total = 0
    last = 0
    for pos in positions:
        if pos >= end:
            break
        total += block.count(b"\n", last, pos)
        last = pos
        if not indices or indices[-1] != total:
            indices.append(total)
            starts.append(block.rfind(b"\n", 0, pos) + 1)
    return indices, starts, total + block.count(b"\n", last, end)
