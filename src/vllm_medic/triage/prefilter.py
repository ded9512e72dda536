"""One combined screen over whole blocks of bytes, so the per-signature work runs only on rare lines.

Engines, fastest first: Hyperscan (the `hyperscan` package, installed with vllm-medic on x86-64
Linux: SIMD multi-literal search, about 1.5 GB/s over real serving noise against RE2's 0.45), then
google-re2 (a core dependency, a DFA), then Python's `re` for what neither can compile (lookarounds,
backreferences in a user catalogue). Every engine only has to let through a superset of the lines
some pattern matches: the exact patterns run on those lines afterwards.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from vllm_medic.triage import screen_cache

if TYPE_CHECKING:
    import hyperscan

try:  # pragma: no cover - exercised implicitly; the fallback is tested by forcing it
    import re2 as _re2
except ImportError:  # pragma: no cover
    _re2 = None
try:  # pragma: no cover - optional accelerator (no wheel outside x86-64 Linux)
    import hyperscan as _hs
except ImportError:  # pragma: no cover
    _hs = None  # type: ignore[assignment]  # absent accelerator; every use checks `_hs is not None` first

# Lines that are anomalies even when no signature knows them (the `other` fallback), plus the
# traceback header so tracebacks are always folded.
GENERIC_PATTERNS = (
    r"\b(?:ERROR|CRITICAL|FATAL|Fatal)\b",
    r"Traceback \(most recent call last\)",
    r"[A-Za-z](?:Error|Exception)\b",
    r"\bException: ",  # a bare `raise Exception(...)` line
    r"\[E |\[[EF]\d{3,4} \d",  # torch C++ error/fatal lines: "[E ProcessGroupNCCL.cpp:1]", "[E429 13:55:49.38 …]"
    r"\d: [EF] [\w.\-/]+:\d+\]",  # round 16: TensorFlow/XLA's (tsl) "…49.642380: E xla_util.cc:88]"
)
# Evidence the server had started or served traffic (startup vs runtime OOM).
SERVED_PATTERNS = (
    r"Application startup complete",
    r"Uvicorn running on",
    r"\"(?:POST|GET) /v1/\S+ HTTP/1\.[01]\" 200",
    r"Avg generation throughput: [1-9]",
    r"Added request \S+",
    r"Received request \S+",
    # Other servers announcing they serve (mistral.rs, SGLang, llama.cpp-style servers).
    r"\bServing on https?://",
    r"The server is fired up and ready to roll",
    r"server is listening on https?://",
)


def _scoped(pattern: str) -> str:
    """A leading global flag like `(?i)` must become a scoped group once patterns are joined."""
    m = _LEADING_FLAGS.match(pattern)
    return f"(?{m.group(1)}:{pattern[m.end() :]})" if m else f"(?:{pattern})"


_LEADING_FLAGS = re.compile(r"^\(\?([aiLmsux]+)\)")


def loosen(pattern: str) -> str:
    """The screen form of a pattern: a superset of the lines it matches, cheaper to screen for.

    Bounded gaps `.{0,120}` make RE2's DFA explode when ~100 patterns are joined, and Hyperscan pays
    for every bounded repeat; `.*` (within a line) matches a superset. A leading `^` is dropped: the
    exact pattern runs on the message, which starts after the line's prefix (timestamp, level)."""
    m = _LEADING_FLAGS.match(pattern)
    flags, body = (pattern[: m.end()], pattern[m.end() :]) if m else ("", pattern)
    if body.startswith("^"):
        body = body[1:]
    return flags + _BOUNDED_GAP.sub(".*", body)


_BOUNDED_GAP = re.compile(r"\.\{\d*,\d+\}\??")


def _to_bytes_pattern(patterns: Iterable[str]) -> bytes:
    return "|".join(_scoped(p) for p in patterns).encode("utf-8")


class Screen:
    """`search(block)` -> offset inside the first matching line or -1; `positions(block)` -> an
    offset inside each matching line (sorted; a line may appear more than once).

    Both take an optional `end`: only `block[:end]` is screened (a block read from a file ends with a
    partial line that belongs to the next one). Offsets are where a match starts (RE2, `re`) or the
    last byte of a match (Hyperscan, which reports match ends); either lies inside the matching line,
    which is all the scanner uses them for."""

    def __init__(
        self,
        patterns: Iterable[str],
        *,
        use_re2: bool = True,
        use_hyperscan: bool = False,
        flagged: Iterable[str] = (),
    ) -> None:
        pats = [p for p in dict.fromkeys(patterns) if p]
        flags = [p for p in dict.fromkeys(flagged) if p]
        self.engine = "re"
        self._hs = None
        # `flagged` patterns ride along in the same Hyperscan scan: `positions_flagged` gives their lines
        # apart from the positions (weak.py's cues); `search` and `positions` ignore them.
        self._flag_id: int | None = None
        if use_hyperscan and _hs is not None and (pats or flags):
            self._hs, rejected_at = screen_cache.hyperscan_database_indices(
                _hs, [loosen(p) for p in pats + flags]
            )
            rejected = set(rejected_at)
            self._flag_id = sum(1 for i in range(len(pats)) if i not in rejected) if flags else None
            flags = [p for j, p in enumerate(flags) if len(pats) + j in rejected]
            pats = [p for i, p in enumerate(pats) if i in rejected]
        self._flag_rest = Screen(flags, use_re2=use_re2) if flags else None
        self.has_flagged = self._flag_id is not None or self._flag_rest is not None
        fast: list[str] = []
        slow: list[str] = []
        for p in pats:
            if use_re2 and _re2 is not None and _re2_ok(p):
                fast.append(p)
            else:
                slow.append(p)
        self._fast = None
        if fast:
            options = _re2.Options()
            options.max_mem = 256 << 20  # the DFA for ~100 joined patterns needs more than the 8 MiB default
            self._fast = _re2.compile(_to_bytes_pattern(loosen(p) for p in fast), options)
        self._slow = re.compile(_to_bytes_pattern(slow), re.MULTILINE) if slow else None
        names = [n for n, e in (("hyperscan", self._hs), ("re2", self._fast), ("re", self._slow)) if e]
        self.engine = "+".join(names) or "re"

    def search(self, block: bytes | bytearray, start: int = 0, end: int | None = None) -> int:
        end = len(block) if end is None else end
        best = -1
        if self._hs is not None:
            best = _hs_first(self._hs, memoryview(block)[start:end], self._flag_id)
            best = best + start if best >= 0 else -1
        for rx in (self._fast, self._slow):
            if rx is None:
                continue
            m = rx.search(block, start, end)
            if m is not None and (best < 0 or m.start() < best):
                best = m.start()
        return best

    def positions(self, block: bytes | bytearray, end: int | None = None) -> list[int]:
        return self.positions_flagged(block, end, want_flag=False)[0]

    def positions_flagged(
        self, block: bytes | bytearray, end: int | None = None, *, want_flag: bool = True
    ) -> tuple[list[int], list[int]]:
        """(`positions`, an offset inside each line a `flagged` pattern matches; both sorted). The second
        is empty unless `want_flag`, except where the shared Hyperscan scan saw them anyway."""
        end = len(block) if end is None else end
        out: list[int] = []
        flagged: list[int] = []
        if self._hs is not None:
            view = memoryview(block)[:end] if end < len(block) else block
            if self._flag_id is None:
                self._hs.scan(
                    view, match_event_handler=lambda _id, _from, to, _flags, _ctx: out.append(to - 1)
                )
            else:
                first_flag = self._flag_id

                def on_match(i: int, _from: int, to: int, _flags: int, _ctx: object) -> None:
                    (out if i < first_flag else flagged).append(to - 1)

                self._hs.scan(view, match_event_handler=on_match)
        for rx in (self._fast, self._slow):
            if rx is None:
                continue
            pos = 0
            while True:
                m = rx.search(block, pos, end)
                if m is None:
                    break
                out.append(m.start())
                # Skip to the end of the line: one hit per line is enough.
                nl = block.find(b"\n", m.start(), end)
                if nl < 0:
                    break
                pos = nl + 1
        out.sort()  # Hyperscan reports in order of match end, per pattern: one sort for all
        if want_flag and self._flag_rest is not None:
            flagged.extend(self._flag_rest.positions(block, end))
        flagged.sort()
        return out, flagged


def _hs_first(db: hyperscan.Database, view: memoryview, below: int | None = None) -> int:
    """Offset of the last byte of the first match (Hyperscan reports matches in order of their end) of a
    pattern with an id under `below` (the flagged patterns' ids start there)."""
    found: list[int] = []

    def first(i: int, _from: int, to: int, _flags: int, _ctx: object) -> bool:
        if below is not None and i >= below:
            return False  # a flagged pattern: not what search() looks for
        found.append(to - 1)
        return True  # stop the scan

    with contextlib.suppress(_hs.ScanTerminated):
        # the stub says str/bytes; the C extension takes any buffer, so the block is not copied
        db.scan(view, match_event_handler=first)  # type: ignore[type-var]
    return found[0] if found else -1


def _re2_ok(pattern: str) -> bool:
    try:
        _re2.compile(pattern.encode("utf-8"))
        return True
    except Exception:  # noqa: BLE001 - re2 raises its own error type for unsupported syntax
        return False
