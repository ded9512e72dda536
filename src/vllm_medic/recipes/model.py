"""The recipe a deployment is checked against: typed requirements, every value with its source.

Two file formats produce a `Recipe`: vllm-medic's own YAML (`data/*.yaml`, schema
``vllm-medic/recipe/v1``) and an official vllm-project/recipes model file, which is merged over our
troubleshooting data for the same model (or over ``generic``).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Sourced:
    """A value and where it comes from (URL, commit, file and field)."""

    value: Any
    source: str


@dataclass(frozen=True)
class Floor:
    version: str
    source: str
    enforced: bool = True  # rules fail below it; an unenforced floor is shown with its source


@dataclass(frozen=True)
class ImageSpec:
    tag: str
    platform: str
    source: str
    cuda: str | None = None


@dataclass(frozen=True)
class BadImage:
    match: str
    kind: str  # exact | prefix | glob
    reason: str
    fix: tuple[str, ...]
    source: str

    def matches(self, image: str) -> bool:
        if self.kind == "exact":
            return image == self.match
        if self.kind == "prefix":
            return image.startswith(self.match)
        return fnmatch.fnmatchcase(image, self.match)


@dataclass(frozen=True)
class DriverFloor:
    min_version: str
    branch: str
    cuda: str | None
    source: str
    compliant_paths: tuple[str, ...] = ()
    paths_source: str = ""


@dataclass(frozen=True)
class HardwareBaseline:
    min_gpus: int
    min_nodes: int | None
    note: str
    source: str
    layout: tuple[
        tuple[str, int], ...
    ] = ()  # the layout at min_gpus that `plan` verified fits: (("tp", 8), ("pp", 2))


@dataclass(frozen=True)
class RequiredFlag:
    flag: str
    dest: str
    category: str
    why: str
    source: str


@dataclass(frozen=True)
class Architecture:
    name: str
    min_vllm: str | None
    source: str


@dataclass
class Network:
    all2all: dict[str, str] | None = None  # interconnect (rdma|nvlink) -> backend
    all2all_source: str = ""
    nvlink_only_moe_backends: Sourced | None = None
    rdma_env: dict[str, Sourced] = field(default_factory=dict)
    rdma_env_strategies: dict[str, list[str]] = field(default_factory=dict)  # env -> strategies it belongs to
    dmabuf_fallback: dict[str, str] | None = None  # env, value, requires_module, source
    mnnvl_env: Sourced | None = None


@dataclass
class OfficialProfile:
    """What an official vllm-project/recipes file prescribes, kept for args/env per hardware and strategy."""

    path: str
    base_args: list[str] = field(default_factory=list)
    base_env: dict[str, str] = field(default_factory=dict)
    hardware_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    strategy_overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    compatible_strategies: list[str] = field(default_factory=list)
    strategies: dict[str, dict[str, Any]] = field(default_factory=dict)  # resolved from strategies/ dir
    strategy_hardware: dict[str, dict[str, str]] = field(default_factory=dict)
    default_strategy: str | None = None
    default_hardware: str | None = None
    verified_hardware: dict[str, str] = field(default_factory=dict)
    guide: str = ""


@dataclass
class Recipe:
    name: str
    title: str
    model_id: str | None
    source: str  # where this recipe was loaded from (shipped name, file path, URL)
    origin: str = "shipped"  # shipped | user | official
    model_aliases: list[str] = field(default_factory=list)
    docs: list[str] = field(default_factory=list)
    architectures: list[Architecture] = field(default_factory=list)
    hybrid_attention: Sourced | None = None
    known_hybrid: dict[str, Any] | None = None  # model_patterns, architectures, source
    vllm_floors: list[Floor] = field(default_factory=list)
    images: list[ImageSpec] = field(default_factory=list)
    known_bad_images: list[BadImage] = field(default_factory=list)
    unverified_tags: dict[str, Any] | None = None  # patterns, reason, source
    driver: DriverFloor | None = None
    hardware: dict[str, HardwareBaseline] = field(default_factory=dict)
    strategy_min_gpus: Sourced | None = None  # dict strategy -> gpus
    compatible_strategies: Sourced | None = None  # list of strategy names offered on every GPU
    strategy_hardware: dict[str, dict[str, str]] = field(
        default_factory=dict
    )  # strategy -> gpu -> (un)supported
    weights: Sourced | None = None  # value = GB
    context_length: Sourced | None = None  # tokens: vLLM's --max-model-len when the launch sets none
    required_flags: list[RequiredFlag] = field(default_factory=list)
    network: Network = field(default_factory=Network)
    official: OfficialProfile | None = None
    prefix_cache_retention: dict[str, Any] | None = None  # env, flag, example_interval_tokens, choose, source

    def enforced_vllm_floor(self) -> Floor | None:
        """The vLLM floor rules enforce (the highest enforced one), or None."""
        from vllm_medic.recipes.versions import parse_version

        floors = [f for f in self.vllm_floors if f.enforced] or self.vllm_floors
        return max(floors, key=lambda f: parse_version(f.version) or (0,), default=None)

    def hybrid_match(self, model: str | None, architectures: list[str]) -> str | None:
        """Why this model is a known hybrid ("model id matches *Kimi-Linear*"), or None."""
        kh = self.known_hybrid or {}
        for arch in architectures:
            if arch in kh.get("architectures", []):
                return f"architecture {arch} is hybrid ({kh.get('source', '')})"
        for pat in kh.get("model_patterns", []):
            if model and fnmatch.fnmatchcase(model, pat):
                return f"model {model} matches {pat} ({kh.get('source', '')})"
        return None

    def image_for(self, platform: str = "nvidia") -> ImageSpec | None:
        for img in self.images:
            if img.platform == platform:
                return img
        return None

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "model": self.model_id,
            "origin": self.origin,
            "source": self.source,
            "vllm_floors": [{"version": f.version, "source": f.source} for f in self.vllm_floors],
            "images": [img.tag for img in self.images],
            "driver_floor": self.driver.min_version if self.driver else None,
        }

    def strategy_allowed(
        self, strategy: str, hardware: str | None, family: str | None = None
    ) -> tuple[bool, str]:
        """Whether the recipe offers ``strategy`` on ``hardware`` (the recipes site's gate), and why.
        A recipe that lists no strategies allows every one."""
        from vllm_medic.recipes.strategy import strategy_allowed

        if self.compatible_strategies is None and not self.strategy_hardware:
            return True, f"recipe {self.name} lists no strategies"
        compatible = list(self.compatible_strategies.value) if self.compatible_strategies else []
        return strategy_allowed(strategy, hardware, compatible, self.strategy_hardware, family)
