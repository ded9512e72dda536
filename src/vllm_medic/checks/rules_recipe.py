"""other: the launch against an official recipe's profile for this strategy and hardware."""

from __future__ import annotations

import json
from typing import Any

from vllm_medic.checks.facts import Facts
from vllm_medic.checks.registry import Rule, rule
from vllm_medic.model import Finding
from vllm_medic.recipes.model import OfficialProfile, Recipe


def _block_args(block: Any) -> tuple[list[str], dict[str, str]]:
    if not isinstance(block, dict):
        return [], {}
    args = [str(a) for a in block.get("extra_args") or block.get("vllm_args") or []]
    env = {str(k): str(v) for k, v in (block.get("extra_env") or block.get("env") or {}).items()}
    return args, env


def _norm(value: Any) -> Any:
    """Compare JSON-valued flags by content: '{"a":1}' equals {"a": 1}."""
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
    if value is True:
        return f"--{name}"
    if value is False:
        return f"--no-{name}"
    if isinstance(value, dict | list):
        value = json.dumps(value, separators=(",", ":"))
    return f"--{name} {value}"


def expected_profile(off: OfficialProfile, strategy: str | None, hardware: str | None, family: str | None):
    """Args and env the official recipe prescribes, in its layering order (later wins)."""
    args: list[str] = list(off.base_args)
    env: dict[str, str] = dict(off.base_env)
    layers: list[tuple[str, Any]] = []
    if strategy and strategy in off.strategies:
        layers.append((f"strategies/{strategy}.yaml", off.strategies[strategy]))
    so = off.strategy_overrides.get(strategy or "") if strategy else None
    if isinstance(so, dict):
        layers.append((f"strategy_overrides.{strategy}", so))
    if family and family in off.hardware_overrides:
        layers.append((f"hardware_overrides.{family}", off.hardware_overrides[family]))
    if isinstance(so, dict) and isinstance(so.get("hardware_overrides"), dict):
        for key in (family, hardware):
            if key and key in so["hardware_overrides"]:
                layers.append(
                    (f"strategy_overrides.{strategy}.hardware_overrides.{key}", so["hardware_overrides"][key])
                )
    used = ["model.base_args"]
    for name, block in layers:
        a, e = _block_args(block)
        if a or e:
            used.append(name)
        args += a
        env.update(e)
    return args, env, used


@rule(
    "REC001",
    "other",
    "Launch follows the official recipe's profile for this strategy and hardware",
    "The recipe's profile (base_args + strategy + hardware overrides) is what was verified; a flag or env "
    "it sets that the launch lacks (or sets differently) is an unverified deviation.",
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
            r.not_applicable(
                f"Recipe {recipe.name} has no official launch profile to compare",
                ["load an official vllm-project/recipes model file with --recipe PATH to compare"],
            )
        ]
    if not facts.launch_known:
        return [
            r.not_checked(
                "Launch not known: recipe profile not compared", [facts.unread("launch") or "no launch"]
            )
        ]
    from vllm_medic.collect.launch import parse_launch

    strategy = facts.strategy or off.default_strategy
    hw, family = facts.hardware(), facts.family()
    ev = [f"recipe {off.path}", f"strategy {strategy or '?'}, hardware {hw or '?'} ({family or '?'})"]
    if strategy and off.compatible_strategies and strategy not in off.compatible_strategies:
        grant = {}
        if isinstance(off.strategy_hardware, dict):
            grant = off.strategy_hardware.get(strategy) or {}
        if not (hw and grant.get(hw) == "supported"):
            return [
                r.finding(
                    "warn",
                    f"Strategy {strategy} is not supported by the recipe on {hw or 'this hardware'}",
                    ev + [f"compatible_strategies: {', '.join(off.compatible_strategies)}"],
                )
            ]
    args, env, used = expected_profile(off, strategy, hw, family)
    expected = parse_launch(["vllm", "serve", recipe.model_id or "model", *args]).args
    ev.append("profile layers: " + ", ".join(used))
    diffs = []
    for dest, want in expected.items():
        if dest == "model":
            continue
        have = facts.arg(dest)
        if have is None:
            diffs.append(f"missing {_flag(dest, want)}")
        elif _norm(have) != _norm(want):
            diffs.append(f"{_flag(dest, have)} (recipe: {_flag(dest, want)})")
    for k, v in env.items():
        have, _ = facts.env(k)
        if v.startswith("$"):
            continue
        if have is None:
            diffs.append(f"missing env {k}={v}")
        elif have != v:
            diffs.append(f"env {k}={have} (recipe: {v})")
    if diffs:
        return [
            r.finding(
                "info",
                f"Launch deviates from the recipe profile in {len(diffs)} setting(s)",
                ev + diffs,
                [f"Align or document: {d}" for d in diffs[:6]],
            )
        ]
    return [r.finding("pass", "Launch matches the recipe profile", ev)]
