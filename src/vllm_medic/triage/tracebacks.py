"""Collapse a Python traceback into one event that carries its final exception line.

Works per process (lines of several processes interleave in one file) and without the
"Traceback (most recent call last):" header (excerpts often start mid-traceback), with frame lines
cut before their `File "` (a paste that starts mid-line) and with a whole traceback indented by a
constant offset (the exception line is then the one indented less than the frames).

A traceback that ends without an exception line (an excerpt cut short, a process killed mid-print)
still says something: the `raise` statement it stopped at (its message rebuilt from the statement's
string literals, continuation lines included), else the line that announced it ("Exception in thread
...:"), else its header. That event is queued in `cut` (or returned by `flush()` at the end of the
input) with the frames collected so far.
"""

from __future__ import annotations

import re

from vllm_medic.triage.normalize import Event

TRACEBACK_HEADER = re.compile(r"Traceback \(most recent call last\)")
# `File "path", line N, in func`, also when the paste cut the line before `File "` (`pkg/mod.py", line N`).
FRAME = re.compile(
    r'(?:\bFile "|^\s*(?=[\w.\-/\\]+\.py", line \d))(?P<file>[^"]*)", line \d+(?:, in (?P<func>[\w<>.]+))?'
)
# Text every match of FRAME / ANNOUNCE contains (each alternative spells it): a substring test turns the
# regex away from the many candidate lines without it, at a fraction of a regex search's cost.
_FRAME_LITERAL = '", line '
_ANNOUNCE_LITERAL = "xception"
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
EXCEPTION_LINE = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Timeout|Failure|Fault)\b"
    r"|^(?:[a-z_]\w*\.)+[A-Z]\w*: "
    r"|^Exception: "  # a bare `raise Exception(...)` (the Rust-backed tokenizers raise these)
    # A dotted class name alone after the frames: a message-less exception, or one the excerpt cut
    # mid-name (`ray.exceptions.OutOfMe`, blind round 9).
    r"|^(?:[a-z_]\w*\.)+[A-Z]\w*\s*$"
    # A binding's exception class named in lowerCamelCase after its module (pybind11's
    # `nixl._bindings.nixlBackendError: NIXL_ERR_BACKEND`, blind round 11).
    r"|^(?:[A-Za-z_]\w*\.)+[a-z]\w*(?:Error|Exception): "
)
_ERROR_BEFORE = re.compile(r"(?i)error|exception|fail")
# A quoted `raise X(...)` statement (the code line of the frame that raised).
RAISE_STATEMENT = re.compile(r"^\s*raise\s+(?P<exc>[A-Za-z_][\w.]*)\s*(?:\((?P<args>.*)|from\b.*)?$")
# A quoted `assert` statement: what is left of a traceback cut before its AssertionError (blind round 9).
ASSERT_STATEMENT = re.compile(r"^\s*assert\s+\S")
# Log records that lost their line breaks, glued onto a frame line: the exception record at its end.
_GLUED_EXCEPTION = re.compile(r"\s(?P<exc>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S.*)$")
_STRING_LITERAL = re.compile(r"""[rRbBuUfF]{0,2}"((?:[^"\\]|\\.)*)"|[rRbBuUfF]{0,2}'((?:[^'\\]|\\.)*)'""")
# The line just above a header that announces it: Python's threading/asyncio/ASGI hooks.
ANNOUNCE = re.compile(
    r"\bException in (?:thread|callback|ASGI application|worker)\b|\bTask exception was never retrieved"
    r"|\bUnhandled exception\b|\bException in [A-Z]\w*:"  # SGLang's `Exception in ControllerSingle:`
)
_EXC_SUFFIX = re.compile(r"(?:Error|Exception|Interrupt|Exit|Timeout|Failure|Fault|Warning):?\s*$")
_MAX_CONTINUATION = 6
# The rest of a frame line a terminal hard-wrapped (`…", line 11` / `9, in _call_store`).
_FRAME_TAIL = re.compile(r"^\d*, in [\w<>.]+\s*$")
_MAX_FRAMES = 64
_MAX_TRACEBACK_LINES = 4000


class _State:
    __slots__ = (
        "start",
        "frames",
        "last_code",
        "lines",
        "after_frame",
        "frame_indent",
        "header",
        "raise_ev",
        "raise_cont",
        "underlined",
    )

    def __init__(self, start: int, header: Event | None = None) -> None:
        self.start = start
        self.frames: list[str] = []
        self.last_code: Event | None = None
        self.lines = 0
        self.after_frame = False
        self.frame_indent: int | None = None
        # What to report if no exception line comes: the announcing line / header, the raise line.
        self.header = header
        self.raise_ev: Event | None = None
        self.raise_cont: list[str] = []
        # Python 3.11+ underlined the last code line with carets: the statement is part of its frame,
        # and a bare exception below it is reported on its own line (blind round 11).
        self.underlined = False


def _key(ev: Event) -> tuple[object, ...]:
    return (ev.source, ev.process, ev.pid, ev.rank, ev.node)


def _indent(msg: str) -> int:
    return len(msg) - len(msg.lstrip(" \t"))


def rebuilt_raise(statement: str, continuation: list[str] | tuple[str, ...] = ()) -> str | None:
    """`raise ValueError("No available memory " "for the cache blocks.")` (over several lines) ->
    `ValueError: No available memory for the cache blocks.`; None when it is not a raise statement."""
    m = RAISE_STATEMENT.match(statement)
    if m is None:
        return None
    args = " ".join([m.group("args") or "", *continuation])
    text = "".join(a or b for a, b in _STRING_LITERAL.findall(args)).strip()
    return f"{m.group('exc')}: {text}" if text else m.group("exc")


def is_bare_exception(message: str) -> bool:
    """`AssertionError` with no message: the failing statement above it is the real evidence."""
    return re.fullmatch(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*:?\s*", message) is not None


class TracebackFolder:
    """Feed events in file order; frame/code lines are swallowed, the exception line is returned
    carrying `traceback_start` and `frames`."""

    def __init__(self) -> None:
        self._open: dict[tuple[object, ...], _State] = {}
        self._announced: dict[tuple[object, ...], Event] = {}
        self._last_line: dict[tuple[object, ...], int] = {}
        self.cut: list[Event] = []

    @property
    def inside(self) -> bool:
        return bool(self._open)

    @property
    def idle(self) -> bool:
        """No traceback open and no announcement waiting for one: a plain line fed now only passes."""
        return not self._open and not self._announced

    def feed(self, ev: Event) -> Event | None:
        msg = ev.message
        key = _key(ev)
        if msg.strip():
            if len(self._last_line) >= _MAX_FRAMES and key not in self._last_line:
                self._last_line.clear()
            self._last_line[key] = ev.line
        if self._open:
            stale = [k for k, st in self._open.items() if ev.line - st.start > _MAX_TRACEBACK_LINES]
            for k in stale:
                self._cut_off(self._open.pop(k))
        state = self._open.get(key)
        header = TRACEBACK_HEADER.search(msg)
        if header:
            if state is not None:
                self._cut_off(state)
            announced = self._announced.pop(key, None)
            if announced is None or announced.line != ev.line - 1:
                announced = ev
            self._open[key] = _State(ev.line, announced)
            # vLLM's worker wrapper writes "Exception in worker ... : <error>, Traceback (most recent
            # call last):" on one line: the error text before the header is itself the evidence.
            if _ERROR_BEFORE.search(msg, 0, header.start()):
                self._open[key].header = None
                return ev
            return None
        frame = FRAME.search(msg) if _FRAME_LITERAL in msg else None
        if frame and (glued := _GLUED_EXCEPTION.search(msg, frame.end())):
            # A paste that lost its line breaks: frames and the exception record on one line.
            if state is None:
                state = self._open[key] = _State(ev.line)
            state.frames.append(f"{frame.group('file')}:{frame.group('func') or ''}")
            del self._open[key]
            ev.message = glued.group("exc")
            ev.traceback_start = state.start
            ev.frames = state.frames[:_MAX_FRAMES]
            return ev
        if frame:
            if state is None:
                state = self._open[key] = _State(ev.line)
            if len(state.frames) < _MAX_FRAMES:
                state.frames.append(f"{frame.group('file')}:{frame.group('func') or ''}")
            if state.frame_indent is None:
                state.frame_indent = _indent(msg)
            state.after_frame = True
            state.raise_ev, state.raise_cont = None, []  # a deeper frame: that raise was not the last word
            state.lines += 1
            return None
        if state is None:
            if RAISE_STATEMENT.match(msg) or ASSERT_STATEMENT.match(msg):
                # A quoted raise with no frame above it: its exception line may follow; if none
                # does, the statement is what is left of the traceback (reported when it is cut).
                state = self._open[key] = _State(ev.line)
                state.raise_ev = ev
                return None
            if _ANNOUNCE_LITERAL in msg and ANNOUNCE.search(msg):
                if len(self._announced) >= _MAX_FRAMES:
                    self._announced.clear()
                self._announced[key] = ev
            return ev
        state.lines += 1
        stripped = msg.strip()
        if not stripped or _CARETS.match(msg):
            if stripped and state.last_code is not None:
                state.underlined = True
            return None
        if state.after_frame and _FRAME_TAIL.match(msg):
            if state.frames:
                state.frames[-1] += stripped.rsplit(" ", 1)[-1]
            return None
        indent = _indent(msg)
        # A traceback pasted with every line indented: the exception line sits left of the frames.
        shifted = bool(indent) and state.frame_indent is not None and indent < state.frame_indent
        if (
            indent
            and not (shifted and EXCEPTION_LINE.match(stripped))
            or (state.after_frame and msg.startswith(">"))
        ):
            if state.after_frame:
                state.last_code, state.underlined = ev, False
                if RAISE_STATEMENT.match(msg) or ASSERT_STATEMENT.match(msg):
                    state.raise_ev, state.raise_cont = ev, []
            elif state.raise_ev is not None and len(state.raise_cont) < _MAX_CONTINUATION:
                state.raise_cont.append(stripped)
            state.after_frame = False
            return None
        state.after_frame = False
        if EXCEPTION_LINE.match(stripped):
            del self._open[key]
            chosen = ev
            frames = state.frames
            if is_bare_exception(stripped) and state.last_code is not None and _EXC_SUFFIX.search(stripped):
                if state.underlined:
                    frames = [*frames, state.last_code.message.strip()[:200]]
                else:
                    chosen = state.last_code
            chosen.traceback_start = state.start
            chosen.frames = frames
            return chosen
        state.last_code = None  # a line was emitted since: the code line no longer sits above the exception
        if not state.frames:  # a quoted raise alone, and the next line is not its exception
            del self._open[key]
            self._cut_off(state)
        return ev

    def _cut_off(self, state: _State) -> None:
        """The traceback ended without an exception line: queue what it still says."""
        if state.raise_ev is not None:
            ev = state.raise_ev
            rebuilt = rebuilt_raise(ev.message, state.raise_cont)
            if rebuilt is not None:
                ev.message = rebuilt
                ev.cut = "raise"
            elif ASSERT_STATEMENT.match(ev.message):
                ev.message = ev.message.strip()
                ev.cut = "raise"
        elif state.header is not None:
            ev = state.header
            ev.cut = "header" if TRACEBACK_HEADER.search(ev.message) else "announce"
        else:
            return
        ev.traceback_start = state.start
        ev.frames = state.frames
        if state.last_code is not None and state.frames and ev is not state.last_code:
            # The call the last frame was making when the paste stopped: the frame it would have shown.
            ev.frames = [*state.frames, f"(calling):{state.last_code.message.strip()[:200]}"]
        self.cut.append(ev)

    def take_cut(self) -> list[Event]:
        """The queued events of tracebacks that ended without an exception line (see module doc)."""
        out, self.cut = self.cut, []
        return out

    def flush(self) -> list[Event]:
        """End of input: every traceback still open was cut before its exception line."""
        for state in self._open.values():
            self._cut_off(state)
        for key, ev in self._announced.items():
            # "Exception in thread …:" as the last line its process wrote: the traceback was cut off
            # (blind round 9's HiCache backup thread); the announcement is what is left of it.
            if self._last_line.get(key) == ev.line and ev.cut is None:
                ev.cut = "announce-only"
                self.cut.append(ev)
        self._open.clear()
        self._announced.clear()
        self._last_line.clear()
        return sorted(self.take_cut(), key=lambda e: e.line)
