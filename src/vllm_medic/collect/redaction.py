"""Redacting large raw outputs fast: only the lines that could hold a secret go through the
(slow, thorough) shared redactor. A 5 MB kernel log takes ~3 s through `redact_text` whole."""

from __future__ import annotations

from bisect import bisect_right

from vllm_medic.redact import redact_text, shape_triggers

WHOLE_TEXT_LIMIT = 256 * 1024

# A line holding none of these cannot match a pattern of vllm_medic.redact (names that say secret,
# URL credentials, auth headers, `login -p`, `-u user:pass`; the token shapes add their own literals).
# Plain substring search: a case-insensitive regex alternation is ~10x slower.
_TRIGGERS_ANY_CASE = (
    "://",
    "bearer",
    "basic",
    "token",
    "secret",
    "passw",
    "api",
    "key",
    "credential",
    "auth",
    "sig",
    "access",
    "private",
    "cookie",
    "session",
    "login",
    "-u ",
    "--user",
)


def _triggers_exact() -> tuple[str, ...]:
    """The token shapes' own literals (data/secret_shapes.yaml), so a new shape needs no edit here."""
    return shape_triggers()


def _hits(haystack: str, needles: tuple[str, ...]) -> list[int]:
    found: list[int] = []
    for needle in needles:
        at = haystack.find(needle)
        while at != -1:
            found.append(at)
            at = haystack.find(needle, at + 1)
    return found


def redact_output(text: str) -> str:
    if len(text) <= WHOLE_TEXT_LIMIT:
        return redact_text(text)
    lines = text.split("\n")
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    suspect = {
        bisect_right(starts, pos) - 1
        for pos in _hits(text.lower(), _TRIGGERS_ANY_CASE) + _hits(text, _triggers_exact())
    }
    # A suspect line is redacted together with the next one: a YAML `args:` list puts the value of
    # `- --api-key` on the following item, a shell continuation on the following line.
    for i in sorted(suspect):
        if i + 1 < len(lines):
            pair = redact_text(lines[i] + "\n" + lines[i + 1]).split("\n")
            if len(pair) == 2:
                lines[i], lines[i + 1] = pair
                continue
        lines[i] = redact_text(lines[i])
    return "\n".join(lines)
