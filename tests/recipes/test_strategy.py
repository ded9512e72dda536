"""`recipes.strategy` and `recipes.profile` against the official K3 recipe (tests/data/checks/official-recipes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_medic.recipes import load_recipe
from vllm_medic.recipes.profile import resolve_profile
from vllm_medic.recipes.strategy import Topology, strategy_for

OFFICIAL_K3 = load_recipe(
    str(Path(__file__).parents[1] / "data/checks/official-recipes/models/moonshotai/Kimi-K3.yaml")
)


@pytest.mark.parametrize(
    ("topo", "want"),
    [
        (Topology(tp=8, gpus_per_node=8), "single_node_tp"),
        (Topology(tp=8, ep=True, gpus_per_node=8), "single_node_tep"),
        (Topology(tp=1, dp=8, ep=True, gpus_per_node=8), "single_node_dep"),
        (Topology(tp=8, pp=2, nodes=2, gpus_per_node=8), "multi_node_tp_pp"),
        (Topology(tp=8, pp=2, nodes=1, gpus_per_node=8), "multi_node_tp_pp"),  # 16 ranks > one node of 8
        (Topology(tp=8, pp=2), None),  # PP within one node (nothing says otherwise): no recipe strategy
        (Topology(tp=8, dp=2, nodes=2, gpus_per_node=8), "multi_node_tp_dp"),
        (Topology(tp=4, dp=4, gpus_per_node=4), "multi_node_tp_dp"),  # GB200/GB300 trays
        (Topology(tp=16, nodes=2, gpus_per_node=8), "multi_node_tp"),
        (Topology(tp=16, ep=True, nodes=2, gpus_per_node=8), "multi_node_tep"),
        (Topology(tp=1, dp=16, ep=True, nodes=2, gpus_per_node=8), "multi_node_dep"),
        (Topology(tp=4, pp=4, nodes=2, gpus_per_node=8), None),  # TP is not one node's GPUs
        (Topology(tp=8, pd_role="decode"), "pd_cluster"),
    ],
)
def test_strategy_from_topology(topo, want):
    assert strategy_for(topo)[0] == want


def test_ep_spans_nodes_only_when_the_ep_group_does():
    assert Topology(tp=8, pp=2, ep=True, nodes=2, gpus_per_node=8).ep_spans_nodes()[0] is False
    assert Topology(tp=8, dp=2, ep=True, nodes=2, gpus_per_node=8).ep_spans_nodes()[0] is True
    assert Topology(tp=1, dp=16, ep=True, nodes=2, gpus_per_node=8).ep_spans_nodes()[0] is True
    assert Topology(tp=8, ep=True, nodes=1, gpus_per_node=8).ep_spans_nodes()[0] is False


def test_profile_resolution_follows_the_recipes_layering():
    off = OFFICIAL_K3.official
    hopper = resolve_profile(off, "multi_node_tp_pp", "h200", "hopper")
    gmu = hopper.args["gpu_memory_utilization"]
    assert gmu.value == 0.97 and gmu.layer == "hardware_overrides.hopper"
    assert [v for _, v in gmu.overridden] == [0.95, 0.9]
    assert hopper.arg("max_model_len") == 32768
    blackwell = resolve_profile(off, "multi_node_tp_pp", "b200", "blackwell")
    assert blackwell.arg("gpu_memory_utilization") == 0.9 and blackwell.arg("max_model_len") == 1048576
    # a strategy's hardware block replaces the recipe's: P/D decode on Blackwell drops fp8 KV and 1M
    decode = resolve_profile(off, "pd_cluster", "b200", "blackwell", "decode")
    assert decode.env["UCX_TLS"].value == "rc,cuda_copy" and "kv_cache_dtype" not in decode.args
    assert decode.arg("enable_prefix_caching") is False
    assert "NCCL_MNNVL_ENABLE" not in decode.env  # NVL4-only keys kept on GB200/GB300 only
    assert "NCCL_MNNVL_ENABLE" in resolve_profile(off, "pd_cluster", "gb300", "blackwell", "prefill").env
    # an exact-GPU block adds on top: MegaMoE for DEP on GB300, not on B300
    assert (
        resolve_profile(off, "multi_node_dep", "gb300", "blackwell").arg("moe_backend")
        == "deep_gemm_mega_moe"
    )
    assert resolve_profile(off, "multi_node_dep", "b300", "blackwell").arg("moe_backend") is None


def test_strategy_gates_follow_compatible_strategies_and_strategy_hardware():
    for recipe in (OFFICIAL_K3, load_recipe("kimi-k3")):
        assert recipe.strategy_allowed("multi_node_tp_dp", "h200")[0] is True  # granted
        assert recipe.strategy_allowed("multi_node_tp_dp", "b300")[0] is False  # not listed
        assert recipe.strategy_allowed("multi_node_dep", "h200")[0] is False  # opted out
        assert recipe.strategy_allowed("multi_node_tp_pp", "h200")[0] is True
