"""Which environment variables are looked at, and for what: ``data/env_vocabulary.yaml``, read once.

Collection (local and, through the JSON spec, the remote probe), the cluster consistency check and the
health probe each take their selection from that one file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml


@dataclass(frozen=True)
class EnvSelection:
    prefixes: tuple[str, ...] = ()
    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()
    excluded: frozenset[str] = frozenset()

    def matches(self, name: str) -> bool:
        if name in self.excluded:
            return False
        return name in self.names or name.startswith(self.prefixes) or name.endswith(self.suffixes)

    def select(self, env: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in env.items() if self.matches(k)}

    def to_spec(self) -> dict[str, list[str]]:
        """The plain-JSON form the standard-library remote probe reads (``remote_probe.select_env``)."""
        return {"prefixes": list(self.prefixes), "names": sorted(self.names), "suffixes": list(self.suffixes)}


def _selection(section: Mapping[str, Any]) -> EnvSelection:
    return EnvSelection(
        prefixes=tuple(section.get("prefixes") or ()),
        names=frozenset(section.get("names") or ()),
        suffixes=tuple(section.get("suffixes") or ()),
        excluded=frozenset(section.get("except") or ()),
    )


def _load() -> dict[str, EnvSelection]:
    text = resources.files("vllm_medic").joinpath("data/env_vocabulary.yaml").read_text(encoding="utf-8")
    return {name: _selection(section) for name, section in yaml.safe_load(text).items()}


_VOCABULARY = _load()
COLLECTED = _VOCABULARY["collected"]
MUST_MATCH_ACROSS_NODES = _VOCABULARY["must_match_across_nodes"]
HEALTH_PROBE = _VOCABULARY["health_probe"]
