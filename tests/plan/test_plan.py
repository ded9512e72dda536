"""`vllm-medic plan` through the public CLI, checked against numbers vLLM and the K3 recipe published.

Calibration sources are listed in tests/data/plan/SOURCES.md.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "plan"
EXE = [sys.executable, "-m", "vllm_medic.cli"]


def run(*args: str, check_json: bool = True) -> tuple[int, dict | str, str]:
    env = {**os.environ, "COLUMNS": "400"}  # keep rich from wrapping messages mid-phrase
    proc = subprocess.run([*EXE, "plan", *args], capture_output=True, text=True, timeout=120, env=env)
    if check_json and "--json" in args:
        return proc.returncode, json.loads(proc.stdout), proc.stderr
    return proc.returncode, proc.stdout, proc.stderr


def cfg(name: str) -> str:
    return str(DATA / name)


def test_tiny_model_reproduces_vllm_cpu_capacity_line_exactly() -> None:
    # vLLM on CPU with VLLM_CPU_KVCACHE_SPACE=1 logs: "CPU KV cache size: 2,097,152 tokens" and
    # "Maximum concurrency for 2,048 tokens per request: 1024.00x" (block size 128). The config says
    # float32; vLLM's --dtype auto serves it in bfloat16 ("Downcasting torch.float32 to torch.bfloat16"),
    # so the KV cache is 2 bytes per element: 2 layers x 1 KV head x 64 x 2 (K and V) x 2 = 512 B/token.
    code, out, _ = run(
        "--config",
        cfg("tiny-llama-vllm-tier.config.json"),
        "--gpu",
        "CPU",
        "--gpu-memory-gib",
        "8",
        "--kv-cache-gib",
        "1",
        "--block-size",
        "128",
        "--max-model-len",
        "2048",
        "--json",
    )
    assert code == 0
    assert out["model_dtype"] == "bfloat16" and out["kv_cache_dtype"] == "bfloat16"
    assert out["kv_bytes_per_token"] == 512
    assert out["kv_tokens"] == 2_097_152
    assert out["max_concurrency"] == 1024.0
    assert out["fits"] is True
    assert any("Downcasting torch.float32 to torch.bfloat16" in a for a in out["assumptions"])


def test_float32_config_in_either_spelling_is_served_in_bfloat16(tmp_path: Path) -> None:
    # The issue's measure: `plan --config <tiny Llama, float32> --kv-cache-gib 1 --json`.
    base = json.loads((DATA / "tiny-llama-vllm-tier.config.json").read_text())
    del base["torch_dtype"]
    for spelling in ({"dtype": "float32"}, {"torch_dtype": "float32"}, {}):  # transformers >= 5, < 5, none
        path = tmp_path / "config.json"
        path.write_text(json.dumps({**base, **spelling}))
        code, out, _ = run("--config", str(path), "--kv-cache-gib", "1", "--json")
        assert code == 0, spelling
        assert (out["kv_bytes_per_token"], out["kv_tokens"]) == (512, 2_097_152), spelling
    # transformers keeps `dtype` when both are written (configuration_utils.py "keep `dtype`")
    path.write_text(json.dumps({**base, "dtype": "float16", "torch_dtype": "float32"}))
    _, out, _ = run("--config", str(path), "--kv-cache-gib", "1", "--json")
    assert out["model_dtype"] == "float16"


def test_explicit_dtype_and_kv_cache_dtype_are_honoured(tmp_path: Path) -> None:
    tiny = cfg("tiny-llama-vllm-tier.config.json")
    _, fp32, _ = run("--config", tiny, "--kv-cache-gib", "1", "--dtype", "float32", "--json")
    assert fp32["model_dtype"] == "float32" and fp32["kv_bytes_per_token"] == 1024
    assert fp32["kv_tokens"] == 1_048_576
    _, fp8, _ = run("--config", tiny, "--kv-cache-gib", "1", "--kv-cache-dtype", "fp8", "--json")
    assert fp8["kv_bytes_per_token"] == 256 and fp8["model_dtype"] == "bfloat16"
    code, _, err = run("--config", tiny, "--dtype", "float8", check_json=False)
    assert code == 2 and "--dtype" in err and "Traceback" not in err


def test_float32_checkpoint_weights_are_counted_at_the_served_dtype(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text((DATA / "tiny-llama-vllm-tier.config.json").read_text())
    stored = 4 * 10**9  # a float32 checkpoint's shards: 1e9 parameters x 4 bytes
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": stored}}))
    _, out, _ = run("--config", str(model), "--gpu", "H100", "--json")
    assert out["weights_total_bytes"] == stored // 2  # vLLM loads them into bfloat16 parameters
    _, out32, _ = run("--config", str(model), "--gpu", "H100", "--dtype", "float32", "--json")
    assert out32["weights_total_bytes"] == stored


def test_qwen3_235b_tp4_matches_vllm_issue_21348_within_two_percent() -> None:
    # Issue #21348 (4xH100, TP4, Qwen3-235B-A22B-FP8): "Available KV cache memory: 8.11 GiB",
    # "GPU KV cache size: 178,880 tokens". 94 layers x 1 KV head per GPU x 128 x 2 x 2 bytes.
    code, out, _ = run(
        "--config",
        cfg("qwen3-235b-a22b.config.json"),
        "--gpu",
        "H100",
        "--tp",
        "4",
        "--kv-cache-gib",
        "8.11",
        "--max-model-len",
        "40960",
        "--json",
    )
    assert code == 0
    assert out["kv_bytes_per_token"] == 94 * 2 * 1 * 128 * 2
    assert abs(out["kv_tokens"] - 178_880) / 178_880 < 0.02


def test_llama31_8b_matches_vllm_issue_10517_blocks_concurrency_and_refusal() -> None:
    # RTX 3090, Llama-3.1-8B: "kv_cache_size=3.81GiB ... GPU blocks: 1952 ... Maximum concurrency for
    # 20000 tokens per request: 1.56x"; at 2.89 GiB: 1478 blocks and max_model_len 29000 refused (23648).
    base = [
        "--config",
        cfg("llama-3.1-8b.config.json"),
        "--gpu",
        "RTX3090",
        "--gpu-memory-gib",
        "23.58",
        "--json",
    ]
    code, out, _ = run(*base, "--kv-cache-gib", "3.81", "--max-model-len", "20000")
    assert code == 0
    assert out["kv_bytes_per_token"] == 32 * 2 * 8 * 128 * 2
    assert abs(out["num_blocks"] - 1952) <= 0.002 * 1952
    assert out["max_concurrency"] == 1.56
    code, out, _ = run(*base, "--kv-cache-gib", "2.89", "--max-model-len", "29000")
    assert code == 1 and out["kv_fits_one_request"] is False
    assert abs(out["max_model_len_that_fits"] - 23648) <= 0.002 * 23648
    fix = [f for f in out["findings"] if f["id"] == "PLAN002"][0]["fix"][0]
    assert f"{out['max_model_len_that_fits']:,}" in fix


def test_kv_heads_replicate_when_fewer_than_tp() -> None:
    code, tp4, _ = run(
        "--config",
        cfg("qwen3-235b-a22b.config.json"),
        "--gpu",
        "H100",
        "--tp",
        "4",
        "--kv-cache-gib",
        "8",
        "--json",
    )
    code8, tp8, _ = run(
        "--config",
        cfg("qwen3-235b-a22b.config.json"),
        "--gpu",
        "H100",
        "--tp",
        "8",
        "--kv-cache-gib",
        "8",
        "--json",
    )
    assert code == code8 == 0
    assert tp4["kv_heads_per_gpu"] == tp8["kv_heads_per_gpu"] == 1  # 4 KV heads: TP8 replicates
    assert tp4["kv_bytes_per_token"] == tp8["kv_bytes_per_token"]
    assert any("replicated KV head" in a for a in tp8["assumptions"])


def test_mla_latent_is_not_split_by_tp_and_fp8_halves_it() -> None:
    base = ["--config", cfg("deepseek-r1.config.json"), "--gpu", "H200", "--max-model-len", "32768", "--json"]
    _, tp8, _ = run(*base, "--tp", "8")
    _, tp8_fp8, _ = run(*base, "--tp", "8", "--kv-cache-dtype", "fp8")
    assert tp8["kv_bytes_per_token"] == 61 * (512 + 64) * 2  # 70,272 bytes, same on every TP rank
    assert tp8_fp8["kv_bytes_per_token"] == 61 * (512 + 64)
    assert tp8["model"]["attention"] == "mla"
    assert tp8["fits"] is True and tp8_fp8["kv_tokens"] > tp8["kv_tokens"]


def test_sliding_window_layers_are_capped_at_the_window() -> None:
    _, out, _ = run(
        "--config", cfg("gemma-3-12b-it.config.json"), "--gpu", "H100", "--max-model-len", "131072", "--json"
    )
    assert out["model"]["sliding_window_layers"] == 40 and out["model"]["full_attention_layers"] == 8
    per_layer = 2 * 8 * 256 * 2
    assert out["kv_bytes_per_token"] == 48 * per_layer  # uncapped per-token rate of all attention layers
    # Only 8 global layers grow with the context; at 128K the sliding layers are a small constant,
    # so far more sequences fit than a plain 48-layer model of the same shape would allow.
    plain = out["kv_cache_bytes_per_gpu"] / (48 * per_layer * 131072)
    assert out["max_concurrency"] > 4 * plain


def test_hybrid_kda_model_counts_constant_state_per_sequence() -> None:
    _, out, _ = run(
        "--config",
        cfg("kimi-linear-48b-a3b-instruct.config.json"),
        "--gpu",
        "H100",
        "--tp",
        "4",
        "--max-model-len",
        "131072",
        "--json",
    )
    assert out["model"]["hybrid"] is True
    assert out["model"]["linear_layers"] == 20 and out["model"]["full_attention_layers"] == 7
    assert out["kv_bytes_per_token"] == 7 * (512 + 64) * 2
    # KDA per layer per GPU at TP4: conv 3 x 3 x (32*128/4) x 2 bytes + fp32 state (32/4) x 128 x 128 x 4 bytes
    per_layer = 3 * 3 * 1024 * 2 + 8 * 128 * 128 * 4
    assert out["state_bytes_per_sequence"] == 20 * per_layer


def test_kimi_k3_recipe_b200_does_not_fit_one_node() -> None:
    code, out, _ = run("--recipe", "kimi-k3", "--gpu", "B200", "--gpus", "8", "--json")
    assert code == 1
    assert out["fits"] is False and out["weights_fit"] is False
    assert out["weights_total_bytes"] == 1680 * 10**9
    assert out["recipe_min_gpus"] == 16
    fix = " ".join(s for f in out["findings"] if f["id"] == "PLAN001" for s in f["fix"])
    # not "use at least 16 GPUs": the layout that fits, found by the search
    assert "No layout of 8 x B200 fits" in fix and "TP 8 x PP 2 (16 x B200, 2 nodes" in fix
    assert "--tensor-parallel-size 8 --pipeline-parallel-size 2" in fix


def test_kimi_k3_recipe_fits_one_b300_node() -> None:
    code, out, _ = run("--recipe", "kimi-k3", "--gpu", "B300", "--gpus", "8", "--json")
    assert code == 0 and out["fits"] is True
    assert out["margin_gib"] > 0


def test_unknown_kv_is_not_checked_never_no_issues() -> None:
    # No public K3 config.json: KV bytes per token are unknown. A 1M-context plan at concurrency 8 must
    # say what was not checked and what to supply, not "No issues found".
    args = ("--recipe", "kimi-k3", "--gpu", "B300", "--gpus", "8", "--max-model-len", "1048576")
    code, out, _ = run(*args, "--concurrency", "8", "--json")
    assert code == 0 and out["kv_checked"] is False
    unchecked = {f["id"]: f for f in out["findings"] if f["severity"] == "not_checked"}
    assert set(unchecked) == {"PLAN002", "PLAN003"}
    assert "1,048,576-token" in unchecked["PLAN002"]["title"]
    assert any("--config" in step for step in unchecked["PLAN002"]["fix"])
    _, text, _ = run(*args, "--concurrency", "8")
    assert "[?] KV cache not checked" in text and "2 not checked" in text
    assert "• No issues found." not in text


def test_kimi_k3_recipe_h100_needs_32_even_when_24_hold_the_weights() -> None:
    code, out, _ = run("--recipe", "kimi-k3", "--gpu", "H100", "--gpus", "24", "--pp", "3", "--json")
    assert code == 1
    assert out["weights_fit"] is True  # by raw memory 24 H100s would hold 1680 GB ...
    assert out["recipe_baseline_met"] is False  # ... but the recipe's baseline is 32 (4 nodes)
    assert out["recipe_min_gpus"] == 32
    code32, out32, _ = run("--recipe", "kimi-k3", "--gpu", "H100", "--gpus", "32", "--pp", "4", "--json")
    assert code32 == 0 and out32["fits"] is True


def test_official_recipe_file_is_read(tmp_path: Path) -> None:
    # the official vllm-project/recipes file (Apache-2.0, commit 8959cf64), copied with its licence note
    official = (
        Path(__file__).resolve().parents[2]
        / "tests/data/checks/official-recipes/models/moonshotai/Kimi-K3.yaml"
    )
    _, out, _ = run("--recipe", str(official), "--gpu", "H100", "--gpus", "16", "--pp", "2", "--json")
    assert out["weights_total_bytes"] == 1680 * 10**9 and out["recipe_min_gpus"] == 32
    assert out["fits"] is False
    _, nv, _ = run("--recipe", str(official), "--variant", "nvfp4", "--gpu", "B300", "--gpus", "8", "--json")
    assert nv["weights_total_bytes"] == 1650 * 10**9 and nv["fits"] is True
    bad = tmp_path / "bad.yaml"
    bad.write_text("variants: [unclosed")
    code, _, err = run("--recipe", str(bad), check_json=False)
    assert code == 2 and "not valid YAML" in err and "Traceback" not in err


def test_weights_from_safetensors_index_and_max_model_len_fix(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text((DATA / "qwen3-0.6b.config.json").read_text())
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 20 * 2**30}}))
    code, out, _ = run("--config", str(model), "--gpu", "A100-40GB", "--max-model-len", "40960", "--json")
    assert out["weights_total_bytes"] == 20 * 2**30
    assert code == 0
    code, out, _ = run(
        "--config",
        str(model),
        "--gpu",
        "A100-40GB",
        "--max-model-len",
        "40960",
        "--gpu-memory-utilization",
        "0.6",
        "--json",
    )
    assert code == 1 and out["kv_fits_one_request"] is False
    fix = [f for f in out["findings"] if f["id"] == "PLAN002"][0]["fix"]
    assert re.search(r"--max-model-len to [\d,]+", fix[0])
    assert any("--kv-cache-dtype fp8" in s for s in fix)


def test_concurrency_target_and_dp_replicas() -> None:
    base = ["--config", cfg("qwen3-0.6b.config.json"), "--gpu", "H100", "--max-model-len", "32768", "--json"]
    _, one, _ = run(*base)
    want = int(one["max_concurrency"]) + 5
    code, short, _ = run(*base, "--concurrency", str(want))
    assert code == 1 and short["concurrency_met"] is False
    code, two, _ = run(*base, "--dp", "2", "--concurrency", str(want))
    assert code == 0 and two["concurrency_met"] is True


def test_terminal_output_states_the_allowance_and_the_verdict(tmp_path: Path) -> None:
    junit = tmp_path / "plan.xml"
    code, text, _ = run("--recipe", "kimi-k3", "--gpu", "B200", "--gpus", "8", "--junit", str(junit))
    assert code == 1
    assert "allowance" in text and "Weights do not fit" in text and "recipe baseline" in text
    xml = junit.read_text()
    assert "PLAN001" in xml and "<failure" in xml


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "give --config"),
        (["--config", "/nonexistent/config.json"], "no such file"),
        (["--weights-gib", "10", "--gpu", "NoSuchGPU"], "unknown GPU"),
        (["--weights-gib", "10", "--gpus", "8", "--tp", "4"], "does not match"),
        (["--weights-gib", "10", "--kv-cache-dtype", "fp3"], "--kv-cache-dtype"),
        (["--recipe", "no-such-recipe"], "unknown recipe"),
    ],
)
def test_bad_input_is_a_usage_error_without_traceback(args: list[str], message: str) -> None:
    code, _, err = run(*args, check_json=False)
    assert code == 2
    assert message in err
    assert "Traceback" not in err


def test_garbage_config_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    code, _, err = run("--config", str(bad), check_json=False)
    assert code == 2 and "not valid JSON" in err and "Traceback" not in err
    bad.write_text(json.dumps({"hidden_size": 10}))
    code, _, err = run("--config", str(bad), check_json=False)
    assert code == 2 and "num_hidden_layers" in err


@pytest.mark.real_vllm
def test_plan_matches_the_real_cpu_server_log(vllm_server_cached) -> None:  # noqa: ANN001
    # The tiny model's config.json says float32 (tests/vllm_tier_model.py saves a float32 model with
    # transformers >= 5, which writes "dtype"): the plan must follow vLLM's downcast, read live.
    config = json.loads((vllm_server_cached.model_dir / "config.json").read_text())
    assert (config.get("dtype") or config.get("torch_dtype")) == "float32"
    log = vllm_server_cached.log_path.read_text(errors="replace")
    assert "Downcasting torch.float32 to torch.bfloat16" in log
    tokens = re.search(r"CPU KV cache size: ([\d,]+) tokens", log)
    conc = re.search(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x", log)
    assert tokens and conc, "the server log has no KV capacity lines"
    code, out, _ = run(
        "--config",
        str(vllm_server_cached.model_dir),
        "--gpu",
        "CPU",
        "--gpu-memory-gib",
        "8",
        "--kv-cache-gib",
        "1",
        "--block-size",
        str(vllm_server_cached.block_size),
        "--max-model-len",
        conc.group(1).replace(",", ""),
        "--json",
    )
    assert code == 0
    assert out["model_dtype"] == "bfloat16"
    assert out["kv_tokens"] == int(tokens.group(1).replace(",", ""))
    assert f"{out['max_concurrency']:.2f}" == conc.group(2)


def test_a_kimi_k3_config_gets_the_recipe_baseline_automatically(tmp_path: Path) -> None:
    # SYNTHETIC config: only the architecture name is real (KimiK3ForConditionalGeneration, vllm-facts §1.1).
    k3 = json.loads((DATA / "kimi-linear-48b-a3b-instruct.config.json").read_text())
    k3["architectures"] = ["KimiK3ForConditionalGeneration"]
    k3["model_type"] = "kimi_k3"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(k3))
    code, out, _ = run("--config", str(path), "--gpu", "H100", "--gpus", "8", "--json")
    assert code == 1
    assert out["recipe_min_gpus"] == 32 and out["recipe_baseline_met"] is False
    assert "applied automatically" in out["inputs"]["recipe"]
