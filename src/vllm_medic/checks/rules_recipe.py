"""other: the launch against an official recipe's profile for this strategy and hardware."""

from __future__ import annotations

import json
from typing import Any

from vllm_medic.checks.facts import Facts
from vllm_medic.checks.launch_topology import choose_strategy
from vllm_medic.checks.registry import Rule, rule
from vllm_medic.model import Finding
from vllm_medic.recipes.model import Recipe
from vllm_medic.recipes.profile import resolve_profile


def _norm(value: Any) -> Any:
    """Compare JSON-valued flags by content: '{"a":1}' equals {"a": 1}."""
    if isinstance(value, list) and value:
        return _norm(value[-1])  # a repeated flag: vLLM's argparse keeps the last
    if isinstance(value, str):
        try:
            return _norm(json.loads(value))
        except ValueError:
            return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _flag(dest: str, value: Any) -> str:
    name = dest.replace("_", "-")
    if isinstance(value, list) and value:
        value = value[-1]
    if value is True:
        return f"--{name}"
    if value is False:
        return f"--no-{name}"
    if isinstance(value, dict | list):
        value = json.dumps(value, separators=(",", ":"))
    return f"--{name} {value}"


@rule(
    "REC001",
    "other",
    "Launch follows the official recipe's profile for this strategy and hardware",
    "The recipe's profile (base_args + strategy + hardware overrides, the last layer winning) is what was "
    "verified; a flag or env it sets that the launch lacks (or sets differently) is an unverified deviation. "
    "The strategy is the one the launch's topology is (nodes x TP x PP x DP x EP), unless --strategy says.",
    [
        "Add the missing flags/env, or note why the deployment deviates.",
        "Pass --strategy/--hardware to pick the profile.",
    ],
    ["https://recipes.vllm.ai/"],
    by_hand="render the command on recipes.vllm.ai for your hardware and strategy and diff it with yours",
)
def follows_profile(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    off = recipe.official
    if off is None:
        return [
            r.finding(
                "pass",
                f"Recipe {recipe.name} has no official launch profile to compare",
                ["load an official vllm-project/recipes model file with --recipe PATH to compare"],
            )
        ]
    if not facts.launch_known:
        return [r.finding("info", "Launch not known: recipe profile not compared", ["no launch"])]
    choice = choose_strategy(facts, recipe)
    strategy = choice.name
    hw, family = facts.hardware(), facts.family()
    ev = [f"recipe {off.path}", choice.evidence(), f"hardware {hw or '?'} ({family or '?'})"]
    if strategy:
        ok, why = recipe.strategy_allowed(strategy, hw, family)
        if not ok:
            return [
                r.finding(
                    "warn",
                    f"Strategy {strategy} is not supported by the recipe on {hw or 'this hardware'}",
                    ev + [why],
                )
            ]
    topo = choice.topology
    prof = resolve_profile(
        off, strategy, hw, family, topo.pd_role if topo and strategy == "pd_cluster" else None
    )
    ev.append("profile layers: " + ", ".join(prof.layers))
    diffs = []
    for dest, setting in prof.args.items():
        have = facts.arg(dest)
        if have is None:
            diffs.append(f"missing {_flag(dest, setting.value)} ({setting.provenance()})")
        elif _norm(have) != _norm(setting.value):
            diffs.append(
                f"{_flag(dest, have)} (recipe: {_flag(dest, setting.value)}, {setting.provenance()})"
            )
    for k, setting in prof.env.items():
        v = str(setting.value)
        if v.startswith("$"):
            continue
        have, _ = facts.env(k)
        if have is None:
            diffs.append(f"missing env {k}={v} ({setting.provenance()})")
        elif have != v:
            diffs.append(f"env {k}={have} (recipe: {v}, {setting.provenance()})")
    label = f"{strategy or 'no strategy'} on {hw or '?'}"
    if diffs:
        return [
            r.finding(
                "info",
                f"Launch deviates from the recipe profile ({label}) in {len(diffs)} setting(s)",
                ev + diffs,
                [f"Align or document: {d}" for d in diffs[:6]],
            )
        ]
    return [r.finding("pass", f"Launch matches the recipe profile ({label})", ev)]
