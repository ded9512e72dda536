"""One combined regex over whole blocks of bytes, so the per-signature work runs only on rare lines.

With google-re2 installed (a core dependency) the screen is a DFA and runs at disk speed; patterns
RE2 cannot compile (lookarounds, backreferences in a user catalogue) fall back to Python's `re`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

try:  # pragma: no cover - exercised implicitly; the fallback is tested by forcing it
    import re2 as _re2
except ImportError:  # pragma: no cover
    _re2 = None

# Lines that are anomalies even when no signature knows them (the `other` fallback), plus the
# traceback header so tracebacks are always folded.
GENERIC_PATTERNS = (
    r"\b(?:ERROR|CRITICAL|FATAL|Fatal)\b",
    r"Traceback \(most recent call last\)",
    r"[A-Za-z](?:Error|Exception)\b",
    r"\bException: ",  # a bare `raise Exception(...)` line
    r"\[E |\[[EF]\d{3,4} \d",  # torch C++ error/fatal lines: "[E ProcessGroupNCCL.cpp:1]", "[E429 13:55:49.38 …]"
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
    m = re.match(r"^\(\?([aiLmsux]+)\)", pattern)
    return f"(?{m.group(1)}:{pattern[m.end() :]})" if m else f"(?:{pattern})"


def loosen(pattern: str) -> str:
    """Bounded gaps `.{0,120}` make RE2's DFA explode when ~100 patterns are joined; `.*` (within a line)
    matches a superset, which is all a prefilter needs: the exact pattern runs on the line afterwards."""
    return _BOUNDED_GAP.sub(".*", pattern)


_BOUNDED_GAP = re.compile(r"\.\{\d*,\d+\}\??")


def _to_bytes_pattern(patterns: Iterable[str]) -> bytes:
    return "|".join(_scoped(p) for p in patterns).encode("utf-8")


class Screen:
    """`search(block)` -> first match offset or -1; `positions(block)` -> every match start."""

    def __init__(self, patterns: Iterable[str], *, use_re2: bool = True) -> None:
        pats = [p for p in dict.fromkeys(patterns) if p]
        self.engine = "re"
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
        if self._fast is not None:
            self.engine = "re2" if not slow else "re2+re"

    def search(self, block: bytes, start: int = 0) -> int:
        best = -1
        for rx in (self._fast, self._slow):
            if rx is None:
                continue
            m = rx.search(block, start)
            if m is not None and (best < 0 or m.start() < best):
                best = m.start()
        return best

    def positions(self, block: bytes) -> list[int]:
        out: list[int] = []
        for rx in (self._fast, self._slow):
            if rx is None:
                continue
            pos = 0
            while True:
                m = rx.search(block, pos)
                if m is None:
                    break
                out.append(m.start())
                # Skip to the end of the line: one hit per line is enough.
                nl = block.find(b"\n", m.start())
                if nl < 0:
                    break
                pos = nl + 1
        out.sort()
        return out


def _re2_ok(pattern: str) -> bool:
    try:
        _re2.compile(pattern.encode("utf-8"))
        return True
    except Exception:  # noqa: BLE001 - re2 raises its own error type for unsupported syntax
        return False
