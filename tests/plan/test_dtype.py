"""`vllm_medic.plan.dtype`: the dtype rules vLLM 0.32.0 applies (config/model.py `_resolve_auto_dtype`,
`_get_and_verify_dtype`; utils/torch_utils.py `resolve_kv_cache_dtype_string`), case by case."""

from __future__ import annotations

import pytest

from vllm_medic.plan.dtype import (
    checkpoint_kv_cache_dtype,
    config_dtype,
    resolve_kv_cache_dtype,
    resolve_model_dtype,
)


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ({"dtype": "float32"}, ("float32", "config.json dtype")),
        ({"torch_dtype": "bfloat16"}, ("bfloat16", "config.json torch_dtype")),
        ({"dtype": "float16", "torch_dtype": "float32"}, ("float16", "config.json dtype")),
        ({"text_config": {"torch_dtype": "float16"}}, ("float16", "config.json text_config torch_dtype")),
        (
            {"torch_dtype": "bfloat16", "text_config": {"dtype": "float32"}},
            ("bfloat16", "config.json torch_dtype"),
        ),
    ],
)
def test_config_dtype_is_read_in_vllms_order(raw, want):
    assert config_dtype(raw) == want


def test_no_dtype_is_float32_as_in_vllm():
    dtype, where = config_dtype({})
    assert dtype == "float32" and "fallback" in where


@pytest.mark.parametrize(
    ("cfg", "requested", "bf16", "model_type", "served", "log"),
    [
        ("float32", "auto", True, "llama", "bfloat16", "Downcasting torch.float32 to torch.bfloat16"),
        ("float32", "auto", False, "llama", "float16", "Downcasting torch.float32 to torch.float16"),
        ("bfloat16", "auto", True, "llama", "bfloat16", None),
        ("bfloat16", "auto", False, "llama", "float16", None),  # V100/T4: bf16 unsupported -> fp16
        ("float32", "auto", False, "gemma2", "float32", None),  # fp16 unstable for gemma2: stays fp32
        ("bfloat16", "float32", True, "llama", "float32", "Upcasting torch.bfloat16 to torch.float32"),
        ("bfloat16", "half", True, "llama", "float16", "Casting torch.bfloat16 to torch.float16"),
    ],
)
def test_served_dtype(cfg, requested, bf16, model_type, served, log):
    got = resolve_model_dtype(cfg, "config.json dtype", requested, model_type=model_type, bf16=bf16)
    assert got.served == served
    if log:
        assert log in got.reason


def test_bad_dtype_is_a_value_error():
    with pytest.raises(ValueError, match="--dtype"):
        resolve_model_dtype("bfloat16", "x", "fp8")


def test_kv_cache_dtype_auto_follows_the_served_dtype_or_the_checkpoint():
    served = resolve_model_dtype("float32", "x")
    assert resolve_kv_cache_dtype("auto", served).name == "bfloat16"
    assert resolve_kv_cache_dtype("fp8", served).name == "fp8"
    modelopt = {"quant_method": "modelopt", "quantization": {"kv_cache_quant_algo": "FP8"}}
    ckpt = checkpoint_kv_cache_dtype(modelopt)
    assert ckpt == "fp8_e4m3"
    assert resolve_kv_cache_dtype("auto", served, ckpt).name == "fp8_e4m3"
    assert checkpoint_kv_cache_dtype({"quant_method": "fp8"}) is None  # only ModelOpt carries a KV algo
