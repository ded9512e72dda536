"""prefix_cache (static): will the engine cache prefixes at all, given the model and the flags?"""

from __future__ import annotations

from typing import Any

from vllm_medic.checks.facts import Facts
from vllm_medic.checks.registry import Rule, rule
from vllm_medic.model import Finding
from vllm_medic.recipes.model import Recipe

# config.json shapes of hybrid (linear-attention / mamba + attention) models, for which vLLM leaves
# prefix caching off unless --enable-prefix-caching is passed (vllm/config/model.py).
_HYBRID_KEYS = ("linear_attn_config", "mamba_config", "ssm_cfg", "linear_attention_config")
_HYBRID_LAYER_WORDS = ("linear", "mamba", "kda", "gdn", "ssm")


def config_is_hybrid(cfg: dict[str, Any] | None) -> tuple[bool | None, str]:
    if not cfg:
        return None, "no config.json"
    nested = cfg.get("text_config")
    text_cfg: dict[str, Any] = nested if isinstance(nested, dict) else {}
    for c in (cfg, text_cfg):
        for key in _HYBRID_KEYS:
            if key in c:
                return True, f"config.json has '{key}'"
        layers = c.get("layer_types") or c.get("layers_block_type")
        if isinstance(layers, list):
            kinds = {str(x).lower() for x in layers}
            hit = [k for k in kinds if any(w in k for w in _HYBRID_LAYER_WORDS)]
            if hit:
                return True, f"config.json layer types include {', '.join(sorted(hit))}"
    return False, "config.json shows attention layers only"


@rule(
    "PFX001",
    "prefix_cache",
    "--enable-prefix-caching is explicit where the model defaults it off",
    "Prefix caching is on by default for ordinary decoder models, but OFF for hybrid models (Kimi K3, "
    "Kimi-Linear, Qwen3-Next...): without the flag no prefix is reused and every agent turn recomputes.",
    ["Add --enable-prefix-caching to the launch command.", "Verify after start with `vllm-medic cache`."],
    ["https://docs.vllm.ai/en/latest/features/automatic_prefix_caching.html"],
    by_hand="grep the command line for --enable-prefix-caching; after start, `vllm-medic cache`",
)
def prefix_caching_explicit(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    hybrid_cfg, cfg_ev = config_is_hybrid(facts.model_config)
    recipe_hybrid = bool(recipe.hybrid_attention and recipe.hybrid_attention.value)
    required = [f for f in recipe.required_flags if f.dest == "enable_prefix_caching"]
    archs = [str(a) for a in (facts.model_config or {}).get("architectures") or []]
    known = recipe.hybrid_match(facts.snapshot.launch.model or facts.arg("model"), archs)
    hybrid = recipe_hybrid or bool(hybrid_cfg) or bool(required) or bool(known)
    ev = []
    if recipe_hybrid and recipe.hybrid_attention:
        ev.append(
            f"recipe {recipe.name}: hybrid model, prefix caching off by default ({recipe.hybrid_attention.source})"
        )
    if known:
        ev.append(known)
    if facts.model_config is not None:
        ev.append(cfg_ev)
    if not facts.launch_known:
        return [
            r.not_checked(
                "Launch not known: prefix-caching flag not checked",
                ev or [facts.unread("launch") or "no launch"],
                ["Pass --launch 'vllm serve ...'."],
            )
        ]
    val = facts.arg("enable_prefix_caching")
    if val is True:
        return [
            r.finding(
                "pass",
                "--enable-prefix-caching is on the command line",
                ev + [f"{facts.launch_where('--enable-prefix-caching')}: --enable-prefix-caching"],
            )
        ]
    if val is False:
        return [
            r.finding(
                "info",
                "Prefix caching explicitly disabled (--no-enable-prefix-caching)",
                ev
                + [
                    f"{facts.launch_where('--no-enable-prefix-caching')}: --no-enable-prefix-caching "
                    "(the recipe's P/D decode pool does this on purpose)"
                ],
                ["If this server should reuse prefixes, replace it with --enable-prefix-caching."],
            )
        ]
    if hybrid:
        return [
            r.finding(
                "warn",
                "--enable-prefix-caching missing: this model defaults it OFF",
                ev + ["launch: flag absent"],
            )
        ]
    if facts.model_config is None:
        return [
            r.not_checked(
                "--enable-prefix-caching not passed; whether this model defaults it on is unknown without its "
                "config.json",
                ev
                + [
                    f"{facts.launch_where('serve')}: flag absent",
                    f"model {facts.snapshot.launch.model or facts.arg('model') or '?'} is not a known hybrid "
                    "(hybrid models default prefix caching off)",
                ],
                [
                    "Pass --model PATH (the model directory or its config.json), or add --enable-prefix-caching "
                    "(harmless on ordinary models)."
                ],
            )
        ]
    return [
        r.finding(
            "pass",
            "Prefix caching on by default for this model (attention layers only)",
            ev + [f"{facts.launch_where('serve')}: flag absent (default on)"],
        )
    ]
