"""Which recipe strategy a layout is, from its real topology (pure): nodes x TP x PP x DP x EP.

The names are the vllm-project/recipes strategies (``strategies/*.yaml``); what each one launches is
how the recipes site renders it (``src/lib/command-synthesis.js`` ``resolveCommand``):

* ``single_node_tp``  one node, ``--tensor-parallel-size <gpus>``;
* ``single_node_tep`` / ``single_node_dep``  one node, ``--enable-expert-parallel`` with TP / DP;
* ``multi_node_tp``  TP over every GPU of every node (``--nnodes``, ``--headless`` on followers);
* ``multi_node_tep``  the same plus ``--enable-expert-parallel``;
* ``multi_node_tp_pp``  TP within a node, PP across nodes (``parallelism: tp_pp``);
* ``multi_node_tp_dp``  TP within a node, one DP replica per node (``parallelism: tp_dp``);
* ``multi_node_dep``  ``--data-parallel-size <all GPUs>`` with expert parallelism;
* ``pd_cluster``  prefill and decode pools joined by a KV connector (``--kv-transfer-config``).

A launch spans several nodes when it says so (``--nnodes``, ``-dp`` over ``-dpl``) *or* when its
world size (TP x PP x DP) is more than one node holds: a 2-node TP8 x PP2 launch is never
``single_node_tp``, whatever the recipe's default strategy is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SINGLE_NODE = ("single_node_tp", "single_node_tep", "single_node_dep")


@dataclass(frozen=True)
class Topology:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: bool = False
    nodes: int | None = None  # as the launch says; None when it does not
    gpus_per_node: int | None = None  # GPUs one node has (the collected node's count)
    pd_role: str | None = None  # "prefill" / "decode" / "both" when a KV-transfer connector is set

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    def node_count(self) -> tuple[int | None, str]:
        """Nodes the layout spans, and how that was decided."""
        need = math.ceil(self.world / self.gpus_per_node) if self.gpus_per_node else None
        if self.nodes is not None and need is not None and need > self.nodes:
            return need, (
                f"TP {self.tp} x PP {self.pp} x DP {self.dp} = {self.world} GPUs > {self.nodes} node(s) of "
                f"{self.gpus_per_node}: spans {need} nodes"
            )
        if self.nodes is not None:
            return self.nodes, f"{self.nodes} node(s) per the launch"
        if need is not None:
            return need, f"{self.world} GPUs at {self.gpus_per_node} per node: {need} node(s)"
        return None, "node count unknown (no --nnodes / -dpl and no GPU count per node)"

    def per_node(self) -> int | None:
        nodes, _ = self.node_count()
        if self.gpus_per_node:
            return self.gpus_per_node
        return math.ceil(self.world / nodes) if nodes else None

    def ep_spans_nodes(self) -> tuple[bool | None, str]:
        """Does the expert-parallel group (TP x DP ranks of one pipeline stage) cross a node boundary?"""
        if not self.ep:
            return False, "no expert parallelism"
        nodes, how = self.node_count()
        if nodes is None:
            return None, how
        if nodes == 1:
            return False, f"EP group of {self.tp * self.dp} within one node"
        group = self.tp * self.dp
        per = self.per_node()
        if per is None:
            return None, how
        spans = group > per
        return spans, (
            f"EP group TP {self.tp} x DP {self.dp} = {group} ranks "
            + (
                f"> {per} GPUs per node: crosses nodes"
                if spans
                else f"fits one node of {per} (PP {self.pp} across)"
            )
        )

    def describe(self) -> str:
        nodes, _ = self.node_count()
        parts = [f"TP {self.tp}"]
        if self.pp > 1:
            parts.append(f"PP {self.pp}")
        if self.dp > 1:
            parts.append(f"DP {self.dp}")
        text = " x ".join(parts) + (" + EP" if self.ep else "")
        return f"{nodes if nodes is not None else '?'} node(s), {text}"


def strategy_for(t: Topology) -> tuple[str | None, str]:
    """The recipe strategy this topology is (None when it is none of them), with the reason."""
    if t.pd_role:
        return "pd_cluster", f"KV-transfer connector ({t.pd_role} role): disaggregated prefill/decode"
    nodes, how = t.node_count()
    if nodes is None:
        return None, how
    if nodes == 1:
        if t.pp > 1:
            return None, f"PP {t.pp} within one node: no recipe strategy uses it"
        if t.ep:
            return ("single_node_dep" if t.dp > 1 else "single_node_tep"), f"one node, EP ({how})"
        if t.dp > 1:
            return None, f"TP {t.tp} x DP {t.dp} within one node: no recipe strategy uses it"
        return "single_node_tp", f"one node, TP {t.tp} ({how})"
    if t.ep:
        if t.dp > 1 and t.pp == 1:
            return "multi_node_dep", f"{nodes} nodes, DP {t.dp} + EP ({how})"
        if t.pp == 1:
            return "multi_node_tep", f"{nodes} nodes, TP {t.tp} + EP ({how})"
        return None, f"TP {t.tp} x PP {t.pp} + EP over {nodes} nodes: no recipe strategy uses it"
    per = t.per_node()
    if (t.pp > 1) != (t.dp > 1) and per is not None and t.tp != per:
        # the recipes render TP x PP / TP x DP as TP = one node's GPUs, PP / DP = the nodes
        return None, f"TP {t.tp} is not one node's {per} GPUs: not the recipe's TP-per-node layout"
    if t.pp > 1 and t.dp == 1:
        return "multi_node_tp_pp", f"{nodes} nodes, TP {t.tp} x PP {t.pp} ({how})"
    if t.dp > 1 and t.pp == 1:
        return "multi_node_tp_dp", f"{nodes} nodes, TP {t.tp} x DP {t.dp} ({how})"
    if t.pp == 1 and t.dp == 1:
        return "multi_node_tp", f"{nodes} nodes, TP {t.tp} across them ({how})"
    return None, f"TP {t.tp} x PP {t.pp} x DP {t.dp} over {nodes} nodes: no recipe strategy uses it"


def strategy_allowed(
    strategy: str,
    hardware: str | None,
    compatible: list[str] | tuple[str, ...],
    strategy_hardware: dict[str, dict[str, str]],
    family: str | None = None,
) -> tuple[bool, str]:
    """The recipes site's gate (``isStrategySupportedOnHardware``): a ``strategy_hardware`` entry for the
    GPU (exact id, then generation) wins in either direction; otherwise membership in
    ``compatible_strategies``."""
    gate = strategy_hardware.get(strategy) or {}
    for key in (hardware, family, "default"):
        if key and key in gate:
            ok = gate[key] != "unsupported"
            return ok, f"strategy_hardware.{strategy}.{key}: {gate[key]}"
    if strategy in compatible:
        return True, f"{strategy} is in compatible_strategies"
    return False, f"{strategy} is not in compatible_strategies ({', '.join(compatible) or 'none'})"
