"""The dtypes vLLM actually serves weights and KV cache in (pure), resolved the way vLLM resolves them.

A planner that trusts ``config.json`` literally counts 4-byte KV for a float32 checkpoint, while
vLLM's ``--dtype auto`` never serves float32 on a GPU: it logs "Downcasting torch.float32 to
torch.bfloat16" and sizes the KV cache in 2-byte elements. Each step below cites the vLLM 0.32.0
source it follows (the version of the real server in tests/vllm_tier.py; paths under ``vllm/``):

1. The checkpoint dtype: ``hf_config.dtype``, else the text config's, else float32
   (``transformers_utils/model_arch_config_convertor.py:223-261`` ``get_torch_dtype``; vLLM also
   reads the safetensors header when the config names none, which a planner without the shards
   approximates by float32, its final fallback). transformers >= 5 writes ``"dtype"``; older
   checkpoints say ``"torch_dtype"``, which transformers maps onto ``dtype`` when ``dtype`` is absent
   (``transformers/configuration_utils.py:317-319``: "If both are provided, keep `dtype`").
2. ``--dtype auto``: ``config/model.py:2405-2446`` ``_resolve_auto_dtype``: the platform's supported
   dtypes (minus float16 for the models in ``_FLOAT16_NOT_SUPPORTED_MODELS``, ``config/model.py:2380-2385``)
   give a preferred dtype, the first of the list; a float32 checkpoint is downcast to it; any dtype
   the platform lacks falls back to it. Supported lists: CUDA compute capability >= 8.0
   ``[bfloat16, float16, float32]``, 6.x-7.x ``[float16, float32]`` (``platforms/cuda.py:255-264``);
   ROCm and every other platform ``[bfloat16, float16, float32]`` (``platforms/interface.py:189-194``);
   x86/aarch64 CPU the same (``platforms/cpu.py:131-132``).
3. An explicit ``--dtype``: ``config/model.py:2366-2372`` ``_STR_DTYPE_TO_TORCH_DTYPE`` (half,
   float16, float, float32, bfloat16); the casts are logged in ``_get_and_verify_dtype``, ``config/model.py:2489-2498``.
4. ``--kv-cache-dtype auto`` is the served model dtype (``utils/torch_utils.py:533-539``
   ``kv_cache_dtype_str_to_dtype``); any other value is ``STR_DTYPE_TO_TORCH_DTYPE[value]``
   (``utils/torch_utils.py:33-47``), fp8 variants one byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# vLLM's --dtype spellings (config/model.py:2366-2372) and the aliases this tool has always accepted.
MODEL_DTYPES: dict[str, str] = {
    "half": "float16",
    "float16": "float16",
    "fp16": "float16",
    "float": "float32",
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
}
ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}

# config/model.py:2380-2385: models whose float16 is numerically unstable; auto never picks it for them.
FLOAT16_NOT_SUPPORTED_MODELS = frozenset({"gemma2", "gemma3", "gemma3_text", "glm4"})

# Supported dtypes by platform, first = vLLM's preferred (see module docstring, step 2).
PLATFORM_DTYPES_BF16 = ("bfloat16", "float16", "float32")
PLATFORM_DTYPES_PRE_AMPERE = ("float16", "float32")


@dataclass(frozen=True)
class ServedDtype:
    """What vLLM loads the weights in, and why (the log line it writes when it casts)."""

    config_dtype: str  # what the checkpoint's config says (float32 when it says nothing)
    config_source: str  # "config.json dtype" / "config.json torch_dtype" / "text_config.dtype" / "default"
    served: str  # the dtype vLLM serves the weights (and `auto` KV) in
    reason: str

    @property
    def bytes(self) -> int:
        return ELEMENT_BYTES[self.served]

    @property
    def config_bytes(self) -> int:
        return ELEMENT_BYTES[self.config_dtype]


def normalize_model_dtype(name: Any) -> str | None:
    """A config/CLI dtype spelling as vLLM's canonical name, or None when it is not a model dtype."""
    if not isinstance(name, str):
        return None
    return MODEL_DTYPES.get(name.strip().lower().removeprefix("torch."))


def config_dtype(raw: dict[str, Any]) -> tuple[str, str]:
    """(dtype, where it was read) for a config.json, in transformers' and vLLM's order (step 1)."""
    layers: list[tuple[str, dict[str, Any]]] = [("config.json", raw)]
    for key in ("text_config", "language_config", "llm_config"):
        inner = raw.get(key)
        if isinstance(inner, dict):
            layers.append((f"config.json {key}", inner))
            break
    for where, layer in layers:
        for key in ("dtype", "torch_dtype"):  # transformers keeps `dtype` when both are present
            value = normalize_model_dtype(layer.get(key))
            if value is not None:
                return value, f"{where} {key}"
    return "float32", "config.json names no dtype: vLLM's fallback float32"


def platform_dtypes(bf16: bool) -> tuple[str, ...]:
    return PLATFORM_DTYPES_BF16 if bf16 else PLATFORM_DTYPES_PRE_AMPERE


def resolve_model_dtype(
    cfg_dtype: str,
    cfg_source: str,
    requested: str = "auto",
    *,
    model_type: str = "",
    bf16: bool = True,
) -> ServedDtype:
    """The served dtype for ``--dtype requested`` (steps 2 and 3). ``bf16``: the GPU supports bfloat16."""
    supported = [
        d
        for d in platform_dtypes(bf16)
        if not (d == "float16" and model_type in FLOAT16_NOT_SUPPORTED_MODELS)
    ]
    preferred = supported[0]
    req = (requested or "auto").strip().lower()
    if req == "auto":
        if cfg_dtype == "float32":
            served = preferred
            reason = f"--dtype auto: vLLM downcasts a float32 checkpoint to the platform's {preferred}"
            if served != cfg_dtype:
                reason += f' (log: "Downcasting torch.float32 to torch.{served}.")'
        elif cfg_dtype in supported:
            served, reason = cfg_dtype, f"--dtype auto: the checkpoint's {cfg_dtype}"
        else:
            served = preferred
            reason = f"--dtype auto: {cfg_dtype} is not supported on this GPU; vLLM falls back to {preferred}"
    else:
        norm = normalize_model_dtype(req)
        if norm is None:
            raise ValueError(f"--dtype {requested!r}: use auto, half, float16, bfloat16, float or float32")
        served = norm
        reason = f"--dtype {requested}"
        if served != cfg_dtype:
            verb = (
                "Upcasting" if served == "float32" else "Downcasting" if cfg_dtype == "float32" else "Casting"
            )
            reason += f' (log: "{verb} torch.{cfg_dtype} to torch.{served}.")'
    return ServedDtype(cfg_dtype, cfg_source, served, reason)


# utils/torch_utils.py:68-71: a ModelOpt checkpoint's kv_cache_quant_algo -> vLLM cache dtype.
MODELOPT_KV_CACHE_DTYPES = {"fp8": "fp8_e4m3", "nvfp4": "nvfp4"}


def checkpoint_kv_cache_dtype(quant_cfg: Any) -> str | None:
    """The KV cache dtype a ModelOpt checkpoint asks for when ``--kv-cache-dtype`` is ``auto``
    (``utils/torch_utils.py:457-530`` ``get_kv_cache_quant_algo_string`` /
    ``resolve_kv_cache_dtype_string``), or None (then ``auto`` is the served model dtype)."""
    if not isinstance(quant_cfg, dict):
        return None
    if not str(quant_cfg.get("quant_method") or "").startswith("modelopt"):
        return None
    inner = quant_cfg.get("quantization", quant_cfg)
    inner = inner if isinstance(inner, dict) else quant_cfg
    algo = (
        inner.get("kv_cache_scheme")
        or quant_cfg.get("kv_cache_scheme")
        or inner.get("kv_cache_quant_algo")
        or quant_cfg.get("kv_cache_quant_algo")
    )
    if isinstance(algo, dict):
        if algo.get("dynamic") is False and algo.get("num_bits") == 8 and algo.get("type") == "float":
            algo = "fp8"
        elif algo.get("num_bits") == 4 and algo.get("type") == "float":
            algo = "nvfp4"
        else:
            return None
    if isinstance(algo, str):
        return MODELOPT_KV_CACHE_DTYPES.get(algo.lower())
    return None


@dataclass(frozen=True)
class KvDtype:
    name: str  # the dtype the KV cache is stored in (a model dtype, or fp8_e4m3, ...)
    reason: str


def resolve_kv_cache_dtype(requested: str, served: ServedDtype, from_ckpt: str | None = None) -> KvDtype:
    """``--kv-cache-dtype`` as vLLM resolves it (module docstring, step 4); ``from_ckpt`` is
    :func:`checkpoint_kv_cache_dtype` of the checkpoint's quantization config."""
    req = (requested or "auto").strip().lower()
    if req == "auto":
        if from_ckpt is not None:
            return KvDtype(
                from_ckpt, f"--kv-cache-dtype auto: the checkpoint's kv_cache_quant_algo ({from_ckpt})"
            )
        return KvDtype(served.served, f"--kv-cache-dtype auto: the served model dtype {served.served}")
    norm = normalize_model_dtype(req)
    return KvDtype(norm or req, f"--kv-cache-dtype {requested}")
