"""Recipes are data: shipped names, our YAML format, and official vllm-project/recipes files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vllm_medic.cli import app
from vllm_medic.errors import UsageError
from vllm_medic.recipes import list_recipes, load_recipe
from vllm_medic.recipes.cuda import family_floor, native_requirement

DATA = Path(__file__).parents[1] / "data" / "checks" / "official-recipes"
OFFICIAL_K3 = DATA / "models" / "moonshotai" / "Kimi-K3.yaml"
OFFICIAL_LLAMA = DATA / "models" / "meta-llama" / "Llama-3.3-70B-Instruct.yaml"
runner = CliRunner()


def test_shipped_k3_carries_every_value_with_its_source():
    r = load_recipe("kimi-k3")
    assert [f.version for f in r.vllm_floors] == ["0.27.1", "0.27.0"]
    assert all(f.source for f in r.vllm_floors)
    assert {i.tag for i in r.images} == {"vllm/vllm-openai:kimi-k3", "vllm/vllm-openai-rocm:kimi-k3"}
    assert r.image_for("nvidia").cuda == "13.0"
    assert r.driver.min_version == "580.65.06" and len(r.driver.compliant_paths) == 2
    assert r.hardware["b200"].min_gpus == 16 and r.hardware["h100"].min_gpus == 32
    assert r.hardware["h200"].min_nodes == 2 and r.weights.value == 1680
    assert r.network.all2all == {"rdma": "deepep_v2", "nvlink": "flashinfer_nvlink_one_sided"}
    assert r.network.rdma_env["UCX_TLS"].value == "rc,cuda_copy"
    assert r.network.dmabuf_fallback["requires_module"] == "nvidia_peermem"
    assert {f.flag for f in r.required_flags} == {"--trust-remote-code", "--enable-prefix-caching"}
    assert any(b.match.endswith("kimi-k3-cu129") for b in r.known_bad_images)


def test_list_recipes_names_shipped():
    assert [i.name for i in list_recipes()] == ["kimi-k3", "generic"]


def test_official_k3_file_merges_our_troubleshooting_data():
    r = load_recipe(str(OFFICIAL_K3))
    assert r.origin == "official" and r.model_id == "moonshotai/Kimi-K3"
    assert r.vllm_floors[0].version == "0.27.1" and str(OFFICIAL_K3) in r.vllm_floors[0].source
    assert r.weights.value == 1680 and "vram_minimum_gb" in r.weights.source
    assert r.strategy_min_gpus.value["multi_node_dep"] == 16
    assert "h100" not in r.strategy_min_gpus.value and r.hardware["h100"].min_gpus == 32
    assert r.driver is not None and r.driver.min_version == "580.65.06"  # our data, merged
    off = r.official
    assert off.base_args[:1] == ["--trust-remote-code"]
    assert "--enable-prefix-caching" in off.hardware_overrides["blackwell"]["extra_args"]
    assert off.hardware_overrides["hopper"]["extra_env"]["VLLM_USE_V2_MODEL_RUNNER"] == "1"
    assert "multi_node_dep" in off.strategy_overrides and "single_node_tp" in off.compatible_strategies
    assert off.strategies["multi_node_dep"]["parallel_flag"] == "--data-parallel-size"  # sibling strategies/


def test_official_non_k3_falls_back_to_generic():
    r = load_recipe(str(OFFICIAL_LLAMA))
    assert r.model_id == "meta-llama/Llama-3.3-70B-Instruct"
    assert r.driver is None and [f.version for f in r.vllm_floors] == ["0.12.0"]
    assert r.weights.value == 170


def test_official_file_without_strategies_dir(tmp_path):
    p = tmp_path / "Kimi-K3.yaml"
    p.write_text(OFFICIAL_K3.read_text())
    r = load_recipe(str(p))
    assert r.official.strategies == {} and r.weights.value == 1680


def test_user_recipe_in_our_format(tmp_path):
    p = tmp_path / "mine.yaml"
    p.write_text(
        "schema: vllm-medic/recipe/v1\nname: mine\nvllm_floors:\n  - {version: '0.30.0', source: 'my runbook'}\n"
        "known_bad_images:\n  - {match: 'registry.local/vllm:broken', kind: exact, reason: 'bad build', fix: ['use :good']}\n"
    )
    r = load_recipe(str(p))
    assert r.name == "mine" and r.origin == "user" and r.vllm_floors[0].source == "my runbook"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("schema: vllm-medic/recipe/v1\nname: [unclosed\n", "not valid YAML"),
        ("schema: vllm-medic/recipe/v1\ntitle: no name\n", "missing required field 'name'"),
        ("schema: vllm-medic/recipe/v1\nname: x\nvllm_floors: 3\n", "'vllm_floors' must be list"),
        (
            "schema: vllm-medic/recipe/v1\nname: x\nhardware: {baselines: {b200: {min_gpus: lots}}}\n",
            "min_gpus",
        ),
        ("just: a mapping\n", "not a recipe"),
        ("model: {model_id: x/y}\nvariants: {default: {vram_minimum_gb: huge}}\n", "vram_minimum_gb"),
        ("\x00\x01", "not"),
    ],
)
def test_malformed_recipe_is_a_usage_error(tmp_path, text, needle):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    with pytest.raises(UsageError) as exc:
        load_recipe(str(p))
    assert needle in str(exc.value) and str(p) in str(exc.value)


def test_unknown_recipe_name_lists_the_shipped_ones():
    with pytest.raises(UsageError, match="kimi-k3, generic"):
        load_recipe("kimi-k9")


def test_malformed_recipe_through_the_cli_exits_2_without_traceback(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("schema: vllm-medic/recipe/v1\nname: [unclosed\n")
    snap = tmp_path / "s.json"
    snap.write_text("{}")
    import subprocess
    import sys

    exe = Path(sys.executable).with_name("vllm-medic")
    proc = subprocess.run(
        [str(exe), "check", "--snapshot", str(snap), "--recipe", str(p)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    err = " ".join(proc.stderr.split())  # rich wraps long lines
    assert "not valid YAML" in err and "line 2" in err and "Traceback" not in proc.stderr + proc.stdout


def test_recipes_command_lists_and_says_a_path_works():
    res = runner.invoke(app, ["recipes", "--json"])
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    assert [r["name"] for r in data["recipes"]] == ["kimi-k3", "generic"]
    assert "path" in data["note"]
    res = runner.invoke(app, ["recipes"])
    assert "kimi-k3" in res.stdout and "generic" in res.stdout


def test_cuda_driver_table_lookups():
    assert native_requirement("13.0.1").min_driver == "580.65.06"
    assert native_requirement("12.4").min_driver == "550.54.14"
    assert native_requirement("12.8").min_driver == "570.26"
    assert native_requirement("12.9").min_driver == "575.51.03"
    assert native_requirement("12.0").min_driver == "525.60.13"
    assert family_floor("12.9").min_driver == "525.60.13"
    assert family_floor("13.1").min_driver == "580.65.06"
    assert native_requirement("garbage") is None and family_floor(None) is None
