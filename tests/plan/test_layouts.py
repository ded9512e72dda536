"""Layout search through `vllm-medic plan`, with the real K3 recipe numbers (1680 GB MXFP4 weights,
its hardware baselines and strategies; the official recipe file under tests/data/checks/official-recipes)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_medic.recipes import load_recipe

ROOT = Path(__file__).resolve().parents[2]
OFFICIAL_K3 = str(ROOT / "tests/data/checks/official-recipes/models/moonshotai/Kimi-K3.yaml")
DATA = ROOT / "tests/data/plan"


def plan(*args: str) -> tuple[int, dict]:
    env = {**os.environ, "COLUMNS": "400"}
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_medic.cli", "plan", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    return proc.returncode, json.loads(proc.stdout)


def finding(out: dict, rule: str) -> dict:
    return next(f for f in out["findings"] if f["id"] == rule)


def test_16_h200_tp8_dp2_does_not_fit_and_the_search_names_tp8_pp2():
    # TP8 x DP2 replicates the 1680 GB (1564.6 GiB) weights per node: 195.6 GiB per H200 > 129.2 GiB budget.
    code, out = plan("--recipe", "kimi-k3", "--gpu", "H200", "--gpus", "16", "--tp", "8", "--dp", "2")
    assert code == 1 and out["weights_fit"] is False
    search = out["layout_search"]
    assert search["within_given_gpus"] is True
    best = search["best"][0]
    assert (best["tp"], best["pp"], best["dp"], best["strategy"]) == (8, 2, 1, "multi_node_tp_pp")
    assert best["weights_per_gpu_gib"] == pytest.approx(1680e9 / 16 / 2**30, abs=0.01)
    # TP within a node ranks before TP across the two nodes at the same margin
    assert [c["tp"] for c in search["best"][:2]] == [8, 16]
    fix = " ".join(finding(out, "PLAN001")["fix"])
    assert "at least" not in fix and "--tensor-parallel-size 8 --pipeline-parallel-size 2" in fix
    assert finding(out, "PLAN006")["severity"] == "info"


def test_too_few_gpus_names_the_smallest_layout_that_fits():
    code, out = plan("--recipe", "kimi-k3", "--gpu", "H100", "--gpus", "16", "--tp", "8", "--pp", "2")
    assert code == 1
    search = out["layout_search"]
    assert search["within_given_gpus"] is False
    assert (search["best"][0]["gpus"], search["best"][0]["tp"], search["best"][0]["pp"]) == (32, 8, 4)
    assert (
        "No layout fits 16 x H100; smallest that fits: 32 GPUs, TP 8 x PP 4"
        in finding(out, "PLAN006")["title"]
    )


def test_dep_is_not_ranked_without_a_config_and_not_offered_where_the_recipe_opts_out():
    _, out = plan(
        "--recipe",
        "kimi-k3",
        "--gpu",
        "B200",
        "--gpus",
        "16",
        "--tp",
        "16",
        "--gpu-memory-utilization",
        "0.3",
    )
    notes = " ".join(out["layout_search"]["notes"])
    assert "expert-parallel layouts with DP > 1 were not ranked" in notes
    _, h200 = plan("--recipe", "kimi-k3", "--gpu", "H200", "--gpus", "16", "--tp", "8", "--dp", "2")
    assert all(c["strategy"] != "multi_node_dep" for c in h200["layout_search"]["best"])


def test_official_recipe_plans_each_layout_with_its_resolved_hopper_profile():
    # the Hopper profile: --gpu-memory-utilization 0.97 and --max-model-len 32768 (hardware_overrides.hopper)
    code, out = plan("--recipe", OFFICIAL_K3, "--gpu", "H200", "--gpus", "16", "--tp", "8", "--pp", "2")
    assert code == 0 and out["fits"] is True
    assert out["inputs"]["gpu_memory_utilization"] == 0.97 and out["max_model_len"] == 32768
    assert any("hardware_overrides.hopper" in a for a in out["assumptions"])
    # the user's own value wins over the profile
    _, mine = plan("--recipe", OFFICIAL_K3, "--gpu", "H200", "--gpus", "16", "--tp", "8", "--pp", "2",
                   "--gpu-memory-utilization", "0.9")  # fmt: skip
    assert mine["inputs"]["gpu_memory_utilization"] == 0.9


def test_search_with_a_config_respects_heads_and_counts_kv():
    # Qwen3-235B-A22B bf16 (~470 GB) on 4 x H100: does not fit; 8 GPUs do, with TP dividing 64 heads.
    code, out = plan("--config", str(DATA / "qwen3-235b-a22b.config.json"), "--gpu", "H100", "--gpus", "4",
                     "--max-model-len", "32768")  # fmt: skip
    assert code == 1
    search = out["layout_search"]
    assert search["within_given_gpus"] is False and search["best"][0]["gpus"] == 8
    assert all(64 % c["tp"] == 0 for c in search["best"])
    assert search["best"][0]["kv_tokens"] > 32768


LAYOUT_IN_TEXT = re.compile(r"TP ?(\d+) ?[x×·] ?(PP|DP) ?(\d+)")


@pytest.mark.parametrize("gpu", sorted(load_recipe("kimi-k3").hardware))
def test_every_k3_baseline_layout_fits_and_no_note_recommends_one_that_does_not(gpu):
    base = load_recipe("kimi-k3").hardware[gpu]
    layout = dict(base.layout)
    args = ["--recipe", "kimi-k3", "--gpu", gpu.upper(), "--gpus", str(base.min_gpus)]
    for k in ("tp", "pp", "dp"):
        if layout.get(k, 1) > 1:
            args += [f"--{k}", str(layout[k])]
    code, out = plan(*args)
    assert code == 0 and out["weights_fit"] and out["recipe_baseline_met"], (gpu, out["findings"])
    for m in LAYOUT_IN_TEXT.finditer(base.note):
        tp, kind, n = int(m.group(1)), m.group(2).lower(), int(m.group(3))
        _, named = plan(
            "--recipe",
            "kimi-k3",
            "--gpu",
            gpu.upper(),
            "--gpus",
            str(tp * n),
            "--tp",
            str(tp),
            f"--{kind}",
            str(n),
        )
        assert named["weights_fit"] or "does not fit" in base.note, (gpu, m.group(0))
