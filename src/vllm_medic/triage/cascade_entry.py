"""One line of a triage verdict's cascade or signals: a kind of anomaly, how often, where it came first.

``to_json`` is the entry as `triage --json` prints it (the quoted line redacted); the verdict keeps the
line as read, for the terminal view and the findings, which redact it themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vllm_medic.redact import redact_text


@dataclass(frozen=True)
class FirstSeen:
    source: str
    line: int
    text: str
    rank: int | None
    timestamp: str | None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "line": self.line,
            "text": redact_text(self.text),
            "rank": self.rank,
            "timestamp": self.timestamp,
        }


@dataclass(frozen=True)
class CascadeEntry:
    signature: str
    role: str  # the signature's role (cascade, root), "family", the hit's kind, or "repeat" of the root
    category: str
    title: str
    count: int
    ranks: list[int]
    sources: list[str]
    summary: str
    first: FirstSeen

    def to_json(self) -> dict[str, Any]:
        return {
            "signature": self.signature,
            "role": self.role,
            "category": self.category,
            "title": self.title,
            "count": self.count,
            "ranks": list(self.ranks),
            "sources": list(self.sources),
            "summary": self.summary,
            "first": self.first.to_json(),
        }
