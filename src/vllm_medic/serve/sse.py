"""Server-sent events as vLLM sends them, and the conformance checks for an OpenAI chat stream.

Pure functions; the client feeds bytes with the time they were read from the socket.

- ``SSEParser.feed(data, t) -> list[SSEEvent]``: incremental; an event is complete at a blank line.
  Each event keeps the read time of the bytes that completed it. Lines that are not ``data:``,
  ``event:``, ``id:``, ``retry:`` or comments are framing problems, kept in ``problems``.
- ``check_chat_stream(chunks, saw_done, want_usage) -> list[str]``: what a conforming
  ``/v1/chat/completions`` stream must contain: a role chunk first, content (or tool-call) deltas,
  a ``finish_reason``, the usage chunk (empty ``choices``) when ``stream_options.include_usage`` was
  asked for, and the ``[DONE]`` sentinel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class SSEEvent:
    data: bytes  # the joined ``data:`` lines, as bytes (JSON parsers take bytes directly)
    t: float
    event: str | None = None


MAX_PROBLEMS = 50  # framing problems kept per stream; a garbage stream of short lines would keep millions


@dataclass
class SSEParser:
    problems: list[str] = field(default_factory=list)
    _buf: bytes = b""
    _data: list[bytes] = field(default_factory=list)
    _event: str | None = None
    _data_bytes: int = 0
    problems_dropped: int = 0

    @property
    def pending(self) -> int:
        """Bytes held for the event not yet complete (the caller caps it: no boundary, no end)."""
        return len(self._buf) + self._data_bytes

    def _problem(self, text: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)
        else:
            self.problems_dropped += 1

    def feed(self, chunk: bytes, t: float) -> list[SSEEvent]:
        buf = self._buf + chunk if self._buf else chunk
        if b"\r" in buf or self._data:
            return self._feed_lines(buf, t)
        # Fast path for the common "data: {...}\n\n" framing (vLLM's): split on blank lines.
        out: list[SSEEvent] = []
        start = 0
        while True:
            end = buf.find(b"\n\n", start)
            if end < 0:
                break
            block = buf[start:end]
            start = end + 2
            if block.startswith(b"data: ") and b"\n" not in block:
                out.append(SSEEvent(block[6:], t))
            else:
                out.extend(self._feed_lines(block + b"\n\n", t))
        self._buf = buf[start:]
        return out

    def _feed_lines(self, buf: bytes, t: float) -> list[SSEEvent]:
        out: list[SSEEvent] = []
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = buf[start:nl]
            start = nl + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if self._data:
                    out.append(SSEEvent(b"\n".join(self._data), t, self._event))
                self._data = []
                self._data_bytes = 0
                self._event = None
                continue
            self._line(line)
        self._buf = buf[start:]
        return out

    def _line(self, line: bytes) -> None:
        if line.startswith(b":"):
            return
        key, sep, value = line.partition(b":")
        if not sep:
            self._problem(f"framing: line without a field name: {line[:120].decode(errors='replace')!r}")
            return
        if value.startswith(b" "):
            value = value[1:]
        if key == b"data":
            self._data.append(value)
            self._data_bytes += len(value)
        elif key == b"event":
            self._event = value.decode("utf-8", errors="replace")
        elif key in (b"id", b"retry"):
            return
        else:
            text = line[:120].decode("utf-8", errors="replace")
            self._problem(f"framing: unknown field {key[:40].decode(errors='replace')!r} in line {text!r}")

    def close(self) -> list[SSEEvent]:
        """End of stream: a trailing event without its blank line is a framing problem."""
        leftover = self._buf.strip()
        out: list[SSEEvent] = []
        if leftover:
            for line in leftover.split(b"\n"):
                self._line(line.rstrip(b"\r"))
            self._buf = b""
        if self._data:
            self._problem("framing: last event not terminated by a blank line")
            out.append(SSEEvent(b"\n".join(self._data), -1.0, self._event))
            self._data = []
            self._data_bytes = 0
        return out


def delta_has_token(chunk: dict[str, Any]) -> bool:
    """Whether a chat/completions chunk carries generated output (content, reasoning or tool call)."""
    for choice in chunk.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        if choice.get("text"):
            return True
        delta = choice.get("delta") or {}
        if isinstance(delta, dict) and (
            delta.get("content")
            or delta.get("reasoning_content")
            or delta.get("reasoning")
            or delta.get("tool_calls")
        ):
            return True
    return False


def check_chat_stream(chunks: list[dict[str, Any]], saw_done: bool, want_usage: bool) -> list[str]:
    problems: list[str] = []
    choice_chunks = [c for c in chunks if c.get("choices")]
    if not choice_chunks:
        problems.append("no chunk with choices")
    else:
        first_delta = (choice_chunks[0]["choices"][0] or {}).get("delta") or {}
        if first_delta.get("role") != "assistant":
            problems.append(f"first chunk has no role 'assistant' (delta={first_delta!r:.120})")
    if not any(delta_has_token(c) for c in chunks):
        problems.append("no content or tool-call deltas")
    if not any((ch or {}).get("finish_reason") for c in choice_chunks for ch in c["choices"]):
        problems.append("no chunk with a finish_reason")
    if want_usage:
        usage_chunks = [c for c in chunks if c.get("usage")]
        if not usage_chunks:
            problems.append("stream_options.include_usage was set but no usage chunk came")
        else:
            last = usage_chunks[-1]
            if last.get("choices"):
                problems.append("usage chunk has non-empty choices (expected [])")
            if chunks and chunks[-1] is not last:
                problems.append("usage chunk is not the last chunk before [DONE]")
    if not saw_done:
        problems.append("stream ended without 'data: [DONE]'")
    return problems
