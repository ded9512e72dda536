"""A deterministic toy tokenizer and chat template for the sim (not any real model's).

Words, punctuation and ``<|role|>`` markers are tokens; ids are a CRC of the token text, so the same
text always gives the same ids, and a shared prefix of text gives a shared prefix of tokens.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

_TOKEN_RE = re.compile(r"<\|[a-z_]+\|>|\w+|[^\w\s]")
VOCAB = 50_000
OUTPUT_WORDS = ("the", "sim", "answers", "with", "plain", "words", "so", "tests", "can", "count", "them", ".")


def tokenize_text(text: str) -> list[str]:
    return _TOKEN_RE.findall(text)


def token_ids(tokens: list[str]) -> list[int]:
    return [100 + zlib.crc32(t.encode()) % VOCAB for t in tokens]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def render_chat(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
) -> str:
    parts = []
    if tools:
        parts.append("<|system|> tools: " + json.dumps(tools, sort_keys=True) + "\n")
    for m in messages:
        role = str(m.get("role", "user"))
        text = _content_text(m.get("content"))
        for call in m.get("tool_calls") or ():
            text += " " + json.dumps(call.get("function", {}), sort_keys=True)
        parts.append(f"<|{role}|> {text}\n")
    if add_generation_prompt:
        parts.append("<|assistant|>")
    return "".join(parts)


def output_piece(i: int) -> str:
    return (" " if i else "") + OUTPUT_WORDS[i % len(OUTPUT_WORDS)]
