"""The launch's real topology (nodes x TP x PP x DP x EP, and a P/D role) and the recipe strategy it is.

Rules that belong to one strategy (the P/D-only ``UCX_TLS``, the cross-node expert all-to-all, the
per-strategy recipe profile) read the strategy from here, so a 2-node TP8 x PP2 launch is judged as
``multi_node_tp_pp`` and never as the recipe's ``default_strategy``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vllm_medic.checks.facts import Facts
from vllm_medic.recipes.model import Recipe
from vllm_medic.recipes.strategy import Topology, strategy_for

PD_ROLES = {"kv_producer": "prefill", "kv_consumer": "decode", "kv_both": "both"}


def _last(value: Any) -> Any:
    """vLLM's argparse keeps the last of a repeated flag."""
    return value[-1] if isinstance(value, list) and value else value


def _int(facts: Facts, dest: str, default: int) -> int:
    v = _last(facts.arg(dest))
    if v is None or isinstance(v, bool):
        return default
    try:
        return max(1, int(v))
    except (TypeError, ValueError):
        return default


def pd_role(facts: Facts) -> str | None:
    """prefill / decode / both when a KV-transfer connector is configured (P/D disaggregation)."""
    kvt = _last(facts.arg("kv_transfer_config"))
    if isinstance(kvt, str):
        try:
            kvt = json.loads(kvt)
        except ValueError:
            return "both" if kvt.strip() else None
    if not isinstance(kvt, dict) or not kvt.get("kv_connector"):
        return None
    return PD_ROLES.get(str(kvt.get("kv_role") or ""), "both")


def launch_topology(facts: Facts) -> Topology | None:
    if not facts.launch_known:
        return None
    nodes, _ = facts.nnodes()
    return Topology(
        tp=_int(facts, "tensor_parallel_size", 1),
        pp=_int(facts, "pipeline_parallel_size", 1),
        dp=_int(facts, "data_parallel_size", 1),
        ep=bool(_last(facts.arg("enable_expert_parallel"))),
        nodes=nodes,
        gpus_per_node=facts.gpus_per_node(),
        pd_role=pd_role(facts),
    )


@dataclass(frozen=True)
class StrategyChoice:
    name: str | None
    how: str  # "--strategy" / "detected from the launch" / "the recipe's default_strategy (...)"
    detail: str  # the topology and why it is that strategy
    topology: Topology | None

    def evidence(self) -> str:
        return f"strategy {self.name or '(none of the recipe strategies)'}: {self.how}; {self.detail}"


def choose_strategy(facts: Facts, recipe: Recipe) -> StrategyChoice:
    """The user's --strategy, else the one the launch's topology is, else (no launch) the recipe default."""
    topo = launch_topology(facts)
    detected, why = strategy_for(topo) if topo is not None else (None, "no launch")
    detail = why if topo is None else f"{topo.describe()}: " + (topo.node_count()[1] if detected else why)
    if facts.strategy:
        if topo is not None and detected and detected != facts.strategy:
            detail += f"; the launch's topology is {detected}"
        return StrategyChoice(facts.strategy, "--strategy", detail, topo)
    if topo is not None:
        return StrategyChoice(detected, "detected from the launch", detail, topo)
    default = recipe.official.default_strategy if recipe.official else None
    return StrategyChoice(default, "the recipe's default_strategy (no launch to read)", detail, None)
