"""What the planner takes from a recipe: the weight footprint and the hardware baseline.

Two shapes are read: the recipes shipped with vllm-medic (``vllm_medic/recipes/data/<name>.yaml``:
``weights.gb`` and ``hardware.baselines``) and an official ``vllm-project/recipes`` model file
(``variants.<variant>.vram_minimum_gb``, ``strategy_min_gpus``, ``meta.hardware``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_medic.errors import UsageError


@dataclass(frozen=True)
class RecipeBaseline:
    name: str
    source: str
    weights_gb: float | None
    weights_source: str
    min_gpus: dict[str, int] = field(default_factory=dict)  # by lower-case GPU key
    min_nodes: dict[str, int] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    general_min_gpus: int | None = None
    verified_hardware: tuple[str, ...] = ()
    context_length: int | None = None
    layouts: dict[str, dict[str, int]] = field(default_factory=dict)  # by GPU key: the baseline's layout
    recipe: Any = None  # the loaded vllm_medic.recipes.Recipe (strategies, official profile), when known

    def baseline_for(self, gpu_name: str) -> tuple[int | None, int | None, str]:
        k = self.key_for(gpu_name)
        if k is not None:
            return self.min_gpus[k], self.min_nodes.get(k), self.notes.get(k, "")
        return self.general_min_gpus, None, ""

    def key_for(self, gpu_name: str) -> str | None:
        """The recipe's hardware key for a GPU name (b300, h200, ...), or None."""
        key = gpu_name.lower().replace("-", "").replace("_", "")
        for k in self.min_gpus:
            if k.replace("-", "").replace("_", "") == key:
                return k
        return None


def load_recipe_baseline(name_or_path: str, variant: str = "default") -> RecipeBaseline:
    """Weight footprint and hardware baseline of a recipe, read through ``vllm_medic.recipes.load_recipe``.

    ``load_recipe`` validates the file (bad YAML or fields are usage errors naming the field). Only the
    default variant's footprint is kept there, so another ``--variant`` of an official file is read here.
    """
    from vllm_medic.recipes import load_recipe

    recipe = load_recipe(name_or_path)
    smg = recipe.strategy_min_gpus.value if recipe.strategy_min_gpus else {}
    base = RecipeBaseline(
        name=recipe.name,
        source=recipe.source,
        weights_gb=float(recipe.weights.value) if recipe.weights else None,
        weights_source=recipe.weights.source if recipe.weights else recipe.source,
        min_gpus={k: hb.min_gpus for k, hb in recipe.hardware.items()},
        min_nodes={k: hb.min_nodes for k, hb in recipe.hardware.items() if hb.min_nodes},
        notes={k: hb.note or hb.source for k, hb in recipe.hardware.items()},
        general_min_gpus=min(smg.values()) if smg else None,
        verified_hardware=tuple(recipe.hardware),
        layouts={k: dict(hb.layout) for k, hb in recipe.hardware.items() if hb.layout},
        recipe=recipe,
    )
    path = Path(name_or_path).expanduser()
    if path.is_file():
        import yaml

        from vllm_medic.safeio import read_arg_text
        from vllm_medic.safeyaml import safe_load

        try:
            # aliases refused, nesting and size capped; the recipe loader has named what is wrong already
            raw = safe_load(read_arg_text(path, "--recipe"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            raw = None
        if isinstance(raw, dict) and isinstance(raw.get("variants"), dict):
            official = recipe_baseline_from_dict(raw, str(path), variant)
            return RecipeBaseline(
                **{
                    **base.__dict__,
                    "weights_gb": official.weights_gb,
                    "weights_source": official.weights_source,
                    "context_length": official.context_length,
                    "min_nodes": base.min_nodes or official.min_nodes,
                }
            )
    if variant != "default":
        raise UsageError(
            f"recipe {name_or_path}: --variant {variant} needs an official recipe file with variants"
        )
    return base


def recipe_baseline_from_dict(raw: dict[str, Any], source: str, variant: str = "default") -> RecipeBaseline:
    if (
        isinstance(raw.get("weights"), dict)
        or isinstance(raw.get("hardware"), dict)
        and "baselines" in raw["hardware"]
    ):
        weights = raw.get("weights") or {}
        baselines = (raw.get("hardware") or {}).get("baselines") or {}
        smg = (raw.get("strategy_min_gpus") or {}).get("value") or {}
        return RecipeBaseline(
            name=str(raw.get("name") or source),
            source=source,
            weights_gb=float(weights["gb"]) if weights.get("gb") is not None else None,
            weights_source=str(weights.get("source") or source),
            min_gpus={k.lower(): int(v["min_gpus"]) for k, v in baselines.items() if v.get("min_gpus")},
            min_nodes={k.lower(): int(v["min_nodes"]) for k, v in baselines.items() if v.get("min_nodes")},
            notes={k.lower(): str(v.get("note", "")) for k, v in baselines.items()},
            general_min_gpus=min(smg.values()) if smg else None,
            verified_hardware=tuple(k.lower() for k in baselines),
        )
    variants = raw.get("variants") or {}
    if not isinstance(variants, dict) or variant not in variants:
        raise UsageError(f"recipe {source} has no variants.{variant} (have: {', '.join(variants) or 'none'})")
    v = variants[variant] or {}
    if not isinstance(v, dict):
        raise UsageError(f"recipe {source}: variants.{variant} must be a mapping, not {type(v).__name__}")
    smg = raw.get("strategy_min_gpus") or {}
    strategy_keys = {k: int(val) for k, val in smg.items() if "_" in k}
    gpu_keys = {k.lower(): int(val) for k, val in smg.items() if "_" not in k}
    meta = raw.get("meta") or {}
    model = raw.get("model") or {}
    return RecipeBaseline(
        name=str(meta.get("slug") or meta.get("title") or source),
        source=source,
        weights_gb=float(v["vram_minimum_gb"]) if v.get("vram_minimum_gb") is not None else None,
        weights_source=f"{source} variants.{variant}.vram_minimum_gb",
        min_gpus=gpu_keys,
        min_nodes={k: max(1, val // 8) for k, val in gpu_keys.items()},
        notes={k: f"strategy_min_gpus.{k}: {val}" for k, val in gpu_keys.items()},
        general_min_gpus=min(strategy_keys.values()) if strategy_keys else None,
        verified_hardware=tuple(k.lower() for k in (meta.get("hardware") or {})),
        context_length=int(model["context_length"]) if model.get("context_length") else None,
    )
