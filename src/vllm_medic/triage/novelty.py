"""A model of healthy output: log templates mined from real healthy logs, matched without the miner.

`data/healthy_templates.json` is built by `scripts/build_healthy_templates.py` with drain3 (a maintained
log-template miner, a dev/test dependency) from real healthy vLLM / SGLang / NCCL / Ray / LMCache
output. At run time only this module's small matcher runs: a line is healthy when its masked tokens
equal a template's tokens, `<*>` matching any one token. drain3 is not needed to triage.

`mask()` is shared by the builder and the matcher, so both see the same tokens.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from importlib import resources

WILDCARD = "<*>"
_MASKS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"), "<ID>"),
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<HEX>"),
    (re.compile(r"\b[0-9a-f]{12,}\b"), "<HEX>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:/[\w.\-~@+]+){2,}/?"), "<PATH>"),
    (re.compile(r"(?<![\w<])[-+]?\d+(?:[.,:]\d+)*(?:[eE][-+]?\d+)?"), "<NUM>"),
)
# Tokens that carry nothing but punctuation are dropped, so wrapping and alignment do not matter.
_PUNCT = re.compile(r"^[\W_]+$")
MAX_TOKENS = 120


def mask(message: str) -> list[str]:
    """The line's tokens with ids, hex, paths and numbers replaced by placeholders."""
    text = message.strip()[:4096]
    for rx, repl in _MASKS:
        text = rx.sub(repl, text)
    return [t for t in text.split() if not _PUNCT.match(t)][:MAX_TOKENS]


@dataclass
class HealthyModel:
    """Templates indexed by token count, then by their first literal token (or None)."""

    templates: list[list[str]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    _index: dict[int, dict[str | None, list[list[str]]]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        for tpl in self.templates:
            head = tpl[0] if tpl and tpl[0] != WILDCARD else None
            self._index.setdefault(len(tpl), {}).setdefault(head, []).append(tpl)

    def is_healthy(self, message: str) -> bool:
        tokens = mask(message)
        if not tokens:
            return True
        by_head = self._index.get(len(tokens))
        if not by_head:
            return False
        candidates = by_head.get(tokens[0], []) + by_head.get(None, [])
        return any(_fits(tpl, tokens) for tpl in candidates)


def _fits(template: list[str], tokens: list[str]) -> bool:
    return all(t in (WILDCARD, x) for t, x in zip(template, tokens, strict=True))


@functools.cache
def load_healthy_model() -> HealthyModel:
    raw = (resources.files("vllm_medic.triage") / "data" / "healthy_templates.json").read_text(
        encoding="utf-8"
    )
    doc = json.loads(raw)
    return HealthyModel(
        templates=[t.split(" ") for t in doc.get("templates", []) if t],
        sources=list(doc.get("sources", [])),
    )
