"""Collapse a Python traceback into one event that carries its final exception line.

Works per process (lines of several processes interleave in one file) and without the
"Traceback (most recent call last):" header (excerpts often start mid-traceback).
"""

from __future__ import annotations

import re

from vllm_medic.triage.normalize import Event

TRACEBACK_HEADER = re.compile(r"Traceback \(most recent call last\)")
FRAME = re.compile(r'\bFile "(?P<file>[^"]*)", line \d+(?:, in (?P<func>[\w<>.]+))?')
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
EXCEPTION_LINE = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Timeout|Failure|Fault)\b"
    r"|^(?:[a-z_]\w*\.)+[A-Z]\w*: "
    r"|^Exception: "  # a bare `raise Exception(...)` (the Rust-backed tokenizers raise these)
)
_ERROR_BEFORE = re.compile(r"(?i)error|exception|fail")
_MAX_FRAMES = 64
_MAX_TRACEBACK_LINES = 4000


class _State:
    __slots__ = ("start", "frames", "last_code", "lines", "after_frame")

    def __init__(self, start: int) -> None:
        self.start = start
        self.frames: list[str] = []
        self.last_code: Event | None = None
        self.lines = 0
        self.after_frame = False


def _key(ev: Event) -> tuple[object, ...]:
    return (ev.source, ev.process, ev.pid, ev.rank, ev.node)


def is_bare_exception(message: str) -> bool:
    """`AssertionError` with no message: the failing statement above it is the real evidence."""
    return re.fullmatch(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*:?\s*", message) is not None


class TracebackFolder:
    """Feed events in file order; frame/code lines are swallowed, the exception line is returned
    carrying `traceback_start` and `frames`."""

    def __init__(self) -> None:
        self._open: dict[tuple[object, ...], _State] = {}

    @property
    def inside(self) -> bool:
        return bool(self._open)

    def feed(self, ev: Event) -> Event | None:
        msg = ev.message
        key = _key(ev)
        if self._open and len(self._open) > 0:
            stale = [k for k, st in self._open.items() if ev.line - st.start > _MAX_TRACEBACK_LINES]
            for k in stale:
                del self._open[k]
        state = self._open.get(key)
        header = TRACEBACK_HEADER.search(msg)
        if header:
            self._open[key] = _State(ev.line)
            # vLLM's worker wrapper writes "Exception in worker ... : <error>, Traceback (most recent
            # call last):" on one line: the error text before the header is itself the evidence.
            return ev if _ERROR_BEFORE.search(msg, 0, header.start()) else None
        frame = FRAME.search(msg)
        if frame:
            if state is None:
                state = self._open[key] = _State(ev.line)
            if len(state.frames) < _MAX_FRAMES:
                state.frames.append(f"{frame.group('file')}:{frame.group('func') or ''}")
            state.after_frame = True
            state.lines += 1
            return None
        if state is None:
            return ev
        state.lines += 1
        stripped = msg.strip()
        if not stripped or _CARETS.match(msg):
            return None
        if msg[:1] in (" ", "\t") or (state.after_frame and msg.startswith(">")):
            if state.after_frame:
                state.last_code = ev
            state.after_frame = False
            return None
        state.after_frame = False
        if EXCEPTION_LINE.match(stripped):
            del self._open[key]
            chosen = ev
            if is_bare_exception(stripped) and state.last_code is not None:
                chosen = state.last_code
            chosen.traceback_start = state.start
            chosen.frames = state.frames
            return chosen
        state.last_code = None  # a line was emitted since: the code line no longer sits above the exception
        return ev

    def flush(self) -> list[Event]:
        """Tracebacks cut off before their exception line: nothing to report, just forget them."""
        self._open.clear()
        return []
