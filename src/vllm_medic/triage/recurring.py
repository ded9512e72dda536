"""Recurring lines judged once: a key two lines share only when their messages are the same.

A serving log repeats the same harmless WARNING every few hundred lines with only its timestamp and pid
changed; each repeat is a candidate of the screens. The key keeps the line after its prefix (up to the
first `] ` within `PREFIX_MAX` bytes, where vLLM, glog and most loggers end theirs) byte for byte and
masks the digits before it, each to `0`, so the prefix keeps its shape and `normalize_line` peels two
such lines alike. That holds only when the message lies wholly in the kept part: `shares` checks it on
the first line of each key, and a key whose message reaches into the prefix is not shared. A line
without `] ` near its start is its own key.
"""

from __future__ import annotations

from vllm_medic.triage.normalize import decode, normalize_line, strip_ansi

PREFIX_MAX = 200
KEY_MAX = 4096  # longer lines are not keyed (each is judged on its own)
_MASK = bytes.maketrans(b"123456789", b"000000000")


def _split(raw: bytes) -> int:
    at = raw.find(b"] ", 0, PREFIX_MAX)
    return 0 if at < 0 else at + 2


def key_of(raw: bytes) -> bytes | None:
    """The line's key, or None for a line too long to key."""
    if len(raw) > KEY_MAX:
        return None
    split = _split(raw)
    return raw[:split].translate(_MASK) + raw[split:] if split else raw


def shares(raw: bytes) -> bool:
    """Whether every line with this line's key has its message: the message lies in the kept part."""
    return message_within(raw, normalize_line(raw).message)


def message_within(raw: bytes, message: str) -> bool:
    """`shares`, for a line already normalised to `message`."""
    split = _split(raw)
    return not split or strip_ansi(decode(raw[split:])).endswith(message)
