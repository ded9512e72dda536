"""YAML from users (recipes, catalogues): aliases refused, nesting and size capped.

A billion-laughs document (nine levels of ``&a [*b, *b, ...]``) expands to 10^9 nodes from a few hundred
bytes and hung `check --recipe`/`plan`; nothing vllm-medic reads needs anchors, so an alias is refused
with the line it is on. Nesting past :data:`MAX_DEPTH` (which would exhaust Python's recursion) is refused
the same way. Both raise ``yaml.YAMLError`` so every caller's existing "not valid YAML" message names the
file.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_DEPTH = 100
MAX_BYTES = 8 * 1024 * 1024


class _NoAliasLoader(yaml.SafeLoader):
    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: ANN401 - PyYAML's signature
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.YAMLError(
                f"aliases (*name) are not accepted (line {mark.line + 1}): write the value out"
            )
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.YAMLError(f"nested more than {MAX_DEPTH} levels deep (line {mark.line + 1})")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def safe_load(text: str) -> Any:
    if len(text) > MAX_BYTES:
        raise yaml.YAMLError(f"larger than {MAX_BYTES // 2**20} MiB")
    return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
