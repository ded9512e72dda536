"""The launch an official recipe prescribes for one strategy and GPU, each setting resolved (pure).

An official recipe layers args and env: ``model.base_args``, the strategy's own args, the recipe's
``strategy_overrides``, then the hardware overrides, and the site keeps the *last* occurrence of each
flag ("last-wins dedupe"). The order and the replace rules follow the recipes site's
``src/lib/command-synthesis.js`` ``resolveCommand`` (``buildArgs`` steps 1-5, ``buildEnv``):

1. ``model.base_args`` / ``model.base_env``;
2. the strategy file's ``vllm_args`` / ``env`` (for ``pd_cluster``: the role's block);
3. ``strategy_overrides.<strategy>``: ``extra_args`` / ``vllm_args`` / ``env`` / ``extra_env``
   (for a pd role: ``strategy_overrides.pd_cluster.<role>``);
4. hardware: ``strategy_overrides.<strategy>.hardware_overrides.<generation>`` (or ``.nvidia``)
   REPLACES the recipe-level ``hardware_overrides.<generation>`` (or ``.nvidia``); then the exact-GPU
   ``strategy_overrides.<strategy>.hardware_overrides.<gpu>`` (and the role's) add on top;
5. ``pd_cluster`` env keeps the NVL4-only NCCL/UCX keys only on GB200/GB300.

So on Hopper with ``multi_node_tp_pp`` the value of ``--gpu-memory-utilization`` is 0.97 (the hopper
block, last), not the list ``[0.95, 0.9, 0.97]`` of every layer that names it. Each resolved setting
keeps the layer it came from and the values it overrode, for the evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vllm_medic.recipes.model import OfficialProfile

NVIDIA_FAMILIES = ("hopper", "blackwell", "ampere", "ada")
NVL4_ONLY_ENV = (
    "VLLM_USE_NCCL_SYMM_MEM",
    "NCCL_CUMEM_ENABLE",
    "NCCL_MNNVL_ENABLE",
    "NCCL_NVLS_ENABLE",
    "UCX_NET_DEVICES",
)
NVL4_HARDWARE = ("gb200", "gb300")


@dataclass(frozen=True)
class Setting:
    key: str  # argparse dest (args) or variable name (env)
    value: Any
    layer: str  # where the winning value was set
    overridden: tuple[tuple[str, Any], ...] = ()  # (layer, value) of earlier layers it replaced

    def provenance(self) -> str:
        text = self.layer
        if self.overridden:
            text += "; over " + ", ".join(f"{layer} {_show(v)}" for layer, v in self.overridden)
        return text


@dataclass
class ResolvedProfile:
    strategy: str | None
    hardware: str | None
    family: str | None
    role: str | None
    args: dict[str, Setting] = field(default_factory=dict)
    env: dict[str, Setting] = field(default_factory=dict)
    layers: list[str] = field(default_factory=list)  # layers that contributed, in order

    def arg(self, dest: str) -> Any:
        s = self.args.get(dest)
        return None if s is None else s.value


def _show(value: Any) -> str:
    import json

    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _groups(tokens: list[str]) -> list[list[str]]:
    """Split an args list into flag groups: a flag and the value that follows it (if any)."""
    out: list[list[str]] = []
    for tok in tokens:
        if tok.startswith("-") and not _is_number(tok) or not out:
            out.append([tok])
        else:
            out[-1].append(tok)
    return out


def _is_number(tok: str) -> bool:
    try:
        float(tok)
    except ValueError:
        return False
    return True


def _block(block: Any, *keys: str) -> tuple[list[str], dict[str, str]]:
    if not isinstance(block, dict):
        return [], {}
    args: list[str] = []
    for k in keys:
        args += [str(a) for a in block.get(k) or []]
    env: dict[str, str] = {}
    for k in ("env", "extra_env"):
        if isinstance(block.get(k), dict):
            env.update({str(a): str(b) for a, b in block[k].items()})
    return args, env


def _hw_block(overrides: Any, family: str | None) -> tuple[str | None, Any]:
    """The generation block (or the brand-wide ``nvidia`` one for NVIDIA generations)."""
    if not isinstance(overrides, dict):
        return None, None
    if family and family in overrides:
        return family, overrides[family]
    if family in NVIDIA_FAMILIES and "nvidia" in overrides:
        return "nvidia", overrides["nvidia"]
    return None, None


def profile_layers(
    off: OfficialProfile, strategy: str | None, hardware: str | None, family: str | None, role: str | None
) -> list[tuple[str, list[str], dict[str, str]]]:
    """(layer name, args, env) in the order the recipes site emits them."""
    layers: list[tuple[str, list[str], dict[str, str]]] = [
        ("model.base_args", list(off.base_args), dict(off.base_env))
    ]
    strat = off.strategies.get(strategy or "") if strategy else None
    if isinstance(strat, dict):
        block = strat.get(role) if role and isinstance(strat.get(role), dict) else strat
        a, e = _block(block, "vllm_args")
        layers.append(
            (f"strategies/{strategy}.yaml" + (f" {role}" if role and block is not strat else ""), a, e)
        )
    so = off.strategy_overrides.get(strategy or "") if strategy else None
    so = so if isinstance(so, dict) else {}
    if role and isinstance(so.get(role), dict):
        _, so_env = _block({"env": so.get("env")})
        layers.append((f"strategy_overrides.{strategy}.env", [], so_env))
        a, e = _block(so[role], "extra_args", "vllm_args")
        layers.append((f"strategy_overrides.{strategy}.{role}", a, e))
    elif so:
        a, e = _block(so, "extra_args", "vllm_args")
        layers.append((f"strategy_overrides.{strategy}", a, e))
    key, strategy_ho = _hw_block(so.get("hardware_overrides"), family)
    if strategy_ho is not None:
        a, e = _block(strategy_ho, "extra_args")
        layers.append(
            (
                f"strategy_overrides.{strategy}.hardware_overrides.{key} (replaces hardware_overrides.{key})",
                a,
                e,
            )
        )
    else:
        key, recipe_ho = _hw_block(off.hardware_overrides, family)
        if recipe_ho is not None:
            a, e = _block(recipe_ho, "extra_args")
            layers.append((f"hardware_overrides.{key}", a, e))
    exact = (so.get("hardware_overrides") or {}).get(hardware or "") if hardware else None
    if isinstance(exact, dict) and hardware != family:
        a, e = _block(exact, "extra_args")
        layers.append((f"strategy_overrides.{strategy}.hardware_overrides.{hardware}", a, e))
    if role and isinstance(so.get(role), dict) and hardware:
        role_exact = (so[role].get("hardware_overrides") or {}).get(hardware)
        if isinstance(role_exact, dict):
            a, e = _block(role_exact, "extra_args")
            layers.append((f"strategy_overrides.{strategy}.{role}.hardware_overrides.{hardware}", a, e))
    return layers


def resolve_profile(
    off: OfficialProfile,
    strategy: str | None,
    hardware: str | None,
    family: str | None,
    role: str | None = None,
) -> ResolvedProfile:
    from vllm_medic.collect.launch import parse_launch

    out = ResolvedProfile(strategy, hardware, family, role)
    for name, args, env in profile_layers(off, strategy, hardware, family, role):
        if args or env:
            out.layers.append(name)
        for group in _groups(args):
            parsed = parse_launch(["vllm", "serve", "model", *group]).args
            for dest, value in parsed.items():
                if dest == "model":
                    continue
                prev = out.args.get(dest)
                over = (*prev.overridden, (prev.layer, prev.value)) if prev else ()
                out.args[dest] = Setting(dest, value, name, over)
        for k, v in env.items():
            prev = out.env.get(k)
            over = (*prev.overridden, (prev.layer, prev.value)) if prev else ()
            out.env[k] = Setting(k, v, name, over)
    if strategy == "pd_cluster" and hardware not in NVL4_HARDWARE:
        for k in NVL4_ONLY_ENV:
            out.env.pop(k, None)
    return out
