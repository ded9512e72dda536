"""A model's memory-relevant shape, read from its Hugging Face ``config.json`` (pure functions).

What the planner needs from a config: how many layers of each attention kind there are
(full MHA/GQA, MLA, sliding-window, linear/recurrent state), their KV geometry, the model
dtype, and enough sizes to estimate parameter counts when no safetensors index is given.
Multimodal configs keep the language model under ``text_config``; that is what is read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from vllm_medic.plan.dtype import checkpoint_kv_cache_dtype, config_dtype

DTYPE_BYTES: dict[str, float] = {
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "bfloat16": 2,
    "bf16": 2,
    "float16": 2,
    "fp16": 2,
    "half": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
    "int8": 1,
}


def dtype_bytes(name: str) -> float:
    key = str(name).lower().removeprefix("torch.")
    if key not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {name!r} (known: {', '.join(sorted(DTYPE_BYTES))})")
    return DTYPE_BYTES[key]


@dataclass(frozen=True)
class LinearState:
    """Constant per-sequence state of one linear-attention / recurrent layer, before TP sharding.

    A dtype of None is the served model dtype (vLLM's mamba/conv state dtype ``auto``), known only
    once ``--dtype`` is resolved for the GPU (``plan.dtype``)."""

    kind: str  # "kda" | "gdn" | "lightning"
    conv_elems: int  # conv-state elements (sharded by TP)
    conv_dtype_bytes: float | None
    recurrent_elems: int  # recurrent-state elements (sharded by TP over heads)
    recurrent_dtype_bytes: float | None

    def bytes_per_gpu(self, tp: int, model_dtype_bytes: float = 2) -> int:
        conv_b = self.conv_dtype_bytes if self.conv_dtype_bytes is not None else model_dtype_bytes
        rec_b = self.recurrent_dtype_bytes if self.recurrent_dtype_bytes is not None else model_dtype_bytes
        conv = math.ceil(self.conv_elems / tp) * conv_b
        rec = math.ceil(self.recurrent_elems / tp) * rec_b
        return int(conv + rec)


@dataclass(frozen=True)
class ModelShape:
    model_type: str
    architecture: str
    num_layers: int
    layer_kinds: tuple[str, ...]  # per layer: "full" | "sliding" | "linear"
    attention: str  # "mla" | "gqa"
    num_heads: int
    num_kv_heads: int
    head_dim: int
    mla_dim: int  # kv_lora_rank + qk_rope_head_dim (MLA only)
    sliding_window: int | None
    linear_state: LinearState | None
    dtype: str  # the checkpoint's dtype as vLLM reads it (plan.dtype.config_dtype), not the served one
    max_position_embeddings: int | None
    hybrid: bool
    param_estimate: ParamEstimate
    notes: tuple[str, ...] = ()
    dtype_source: str = ""
    quantized: bool = False  # weights stored in a quantized format: the served dtype does not rescale them
    checkpoint_kv_dtype: str | None = None  # a ModelOpt checkpoint's kv_cache_quant_algo (what `auto` uses)

    def count(self, kind: str) -> int:
        return sum(1 for k in self.layer_kinds if k == kind)


@dataclass(frozen=True)
class ParamEstimate:
    total: int
    expert: int
    bytes_per_param: float | None  # None: unquantized, the served model dtype's size
    basis: str
    extra: dict[str, Any] = field(default_factory=dict)

    def weight_bytes(self, model_dtype_bytes: float) -> int:
        bpp = self.bytes_per_param if self.bytes_per_param is not None else model_dtype_bytes
        return int(self.total * bpp)

    @property
    def expert_fraction(self) -> float:
        return self.expert / self.total if self.total else 0.0


def text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The language model's config: ``text_config`` merged over the top level (multimodal wrappers)."""
    inner = cfg.get("text_config") or cfg.get("language_config") or cfg.get("llm_config")
    if isinstance(inner, dict):
        merged = {k: v for k, v in cfg.items() if k not in ("text_config", "vision_config")}
        merged.update(inner)
        return merged
    return cfg


def _int(cfg: dict[str, Any], *names: str, default: int | None = None) -> int | None:
    for n in names:
        v = cfg.get(n)
        if isinstance(v, bool):
            continue
        if isinstance(v, int | float) and math.isfinite(v):
            return int(v)
    return default


def _layer_kinds(cfg: dict[str, Any], n: int) -> tuple[list[str], list[str]]:
    """Per-layer attention kind and how it was decided."""
    notes: list[str] = []
    lac = cfg.get("linear_attn_config")
    if isinstance(lac, dict) and (lac.get("kda_layers") or lac.get("full_attn_layers")):
        full = {int(i) for i in lac.get("full_attn_layers") or []}
        kda = {int(i) for i in lac.get("kda_layers") or []}
        # Kimi configs number layers from 1; vLLM's is_kda_layer(i) is (i + 1) in kda_layers.
        one_based = 0 not in full | kda
        kinds = []
        for i in range(n):
            idx = i + 1 if one_based else i
            if idx in full:
                kinds.append("full")
            elif kda:
                kinds.append("linear" if idx in kda else "full")
            else:
                kinds.append("linear")
        notes.append(
            f"layer kinds from linear_attn_config: {len(full)} full-attention, {len(kda) or n - len(full)} KDA"
        )
        return kinds, notes
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and len(layer_types) >= n:
        kinds = []
        for t in layer_types[:n]:
            t = str(t).lower()
            if "sliding" in t or t in ("local", "swa"):
                kinds.append("sliding")
            elif "linear" in t or "mamba" in t or "kda" in t or "delta" in t:
                kinds.append("linear")
            else:
                kinds.append("full")
        notes.append("layer kinds from layer_types")
        return kinds, notes
    interval = _int(cfg, "full_attention_interval")
    if interval and cfg.get("linear_num_value_heads"):
        kinds = ["full" if (i + 1) % interval == 0 else "linear" for i in range(n)]
        notes.append(f"layer kinds from full_attention_interval={interval}")
        return kinds, notes
    attn_type_list = cfg.get("attn_type_list")
    if isinstance(attn_type_list, list) and len(attn_type_list) >= n:
        kinds = ["full" if int(t) == 1 else "linear" for t in attn_type_list[:n]]
        notes.append("layer kinds from attn_type_list (1 = softmax attention, 0 = lightning/linear)")
        return kinds, notes
    window = _int(cfg, "sliding_window")
    if window and cfg.get("use_sliding_window") is not False:
        pattern = _int(cfg, "sliding_window_pattern", "_sliding_window_pattern")
        if pattern:
            kinds = ["full" if (i + 1) % pattern == 0 else "sliding" for i in range(n)]
            notes.append(f"layer kinds from sliding_window_pattern={pattern}")
        elif str(cfg.get("model_type", "")).startswith("gemma2"):
            kinds = ["sliding" if i % 2 == 0 else "full" for i in range(n)]
            notes.append("gemma2: even layers sliding-window, odd layers global")
        else:
            kinds = ["sliding"] * n
            notes.append(f"every layer uses sliding_window={window}")
        return kinds, notes
    return ["full"] * n, notes


def _linear_state(cfg: dict[str, Any]) -> LinearState | None:
    lac = cfg.get("linear_attn_config")
    if isinstance(lac, dict) and lac.get("num_heads"):
        heads = int(lac["num_heads"])
        head_dim = int(lac.get("head_dim") or 128)
        kernel = int(lac.get("short_conv_kernel_size") or 4)
        # vLLM KDA: three short convs (q, k, v) of (kernel-1) x heads*head_dim in the model dtype,
        # and a float32 recurrent state of heads x head_dim x head_dim.
        return LinearState("kda", 3 * (kernel - 1) * heads * head_dim, None, heads * head_dim * head_dim, 4)
    if cfg.get("linear_num_value_heads"):
        nk = int(cfg.get("linear_num_key_heads") or 0)
        dk = int(cfg.get("linear_key_head_dim") or 0)
        nv = int(cfg["linear_num_value_heads"])
        dv = int(cfg.get("linear_value_head_dim") or 0)
        kernel = int(cfg.get("linear_conv_kernel_dim") or 4)
        ssm_dtype = cfg.get("mamba_ssm_dtype")
        ssm_bytes = dtype_bytes(ssm_dtype) if ssm_dtype else None
        return LinearState("gdn", (kernel - 1) * (2 * nk * dk + nv * dv), None, nv * dk * dv, ssm_bytes)
    if isinstance(cfg.get("attn_type_list"), list):
        heads = int(cfg.get("num_attention_heads") or 0)
        head_dim = int(cfg.get("head_dim") or (int(cfg.get("hidden_size") or 0) // max(heads, 1)))
        return LinearState("lightning", 0, None, heads * head_dim * head_dim, 4)
    return None


def _estimate_params(cfg: dict[str, Any], kinds: list[str]) -> ParamEstimate:
    hidden = _int(cfg, "hidden_size", default=0) or 0
    vocab = _int(cfg, "vocab_size", default=0) or 0
    heads = _int(cfg, "num_attention_heads", default=1) or 1
    kv_heads = _int(cfg, "num_key_value_heads", default=heads) or heads
    head_dim = _int(cfg, "head_dim", default=hidden // heads) or hidden // heads
    n = len(kinds)
    embed = vocab * hidden * (1 if cfg.get("tie_word_embeddings") else 2)
    if cfg.get("kv_lora_rank"):
        q_lora = _int(cfg, "q_lora_rank")
        nope = _int(cfg, "qk_nope_head_dim", default=128) or 128
        rope = _int(cfg, "qk_rope_head_dim", default=64) or 64
        v_dim = _int(cfg, "v_head_dim", default=128) or 128
        kvr = int(cfg["kv_lora_rank"])
        q = hidden * q_lora + q_lora * heads * (nope + rope) if q_lora else hidden * heads * (nope + rope)
        attn = q + hidden * (kvr + rope) + kvr * heads * (nope + v_dim) + heads * v_dim * hidden
    else:
        attn = 2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim
    lac_raw = cfg.get("linear_attn_config")
    lac: dict[str, Any] = lac_raw if isinstance(lac_raw, dict) else {}
    if lac.get("num_heads"):
        lin_attn = 4 * hidden * int(lac["num_heads"]) * int(lac.get("head_dim") or 128)
    elif cfg.get("linear_num_value_heads"):
        k_dim = int(cfg.get("linear_num_key_heads") or 0) * int(cfg.get("linear_key_head_dim") or 0)
        v_dim = int(cfg["linear_num_value_heads"]) * int(cfg.get("linear_value_head_dim") or 0)
        lin_attn = hidden * (2 * k_dim + 2 * v_dim) + v_dim * hidden
    else:
        lin_attn = attn
    n_experts = _int(cfg, "n_routed_experts", "num_experts", "num_local_experts", default=0) or 0
    moe_inter = (
        _int(cfg, "moe_intermediate_size", default=0) or _int(cfg, "intermediate_size", default=0) or 0
    )
    dense_inter = _int(cfg, "intermediate_size", default=0) or 0
    shared = _int(cfg, "n_shared_experts", "num_shared_experts", default=0) or 0
    shared_inter = _int(cfg, "shared_expert_intermediate_size", default=0) or shared * moe_inter
    first_dense = _int(cfg, "first_k_dense_replace", default=0) or 0
    freq = _int(cfg, "moe_layer_freq", "decoder_sparse_step", default=1) or 1
    mlp_only = set(cfg.get("mlp_only_layers") or [])
    total = embed
    expert = 0
    for i, kind in enumerate(kinds):
        total += lin_attn if kind == "linear" else attn
        is_moe = n_experts > 0 and i >= first_dense and (i % freq == 0 or freq == 1) and i not in mlp_only
        if is_moe:
            e = n_experts * 3 * hidden * moe_inter
            expert += e
            total += e + 3 * hidden * shared_inter + hidden * n_experts
        else:
            total += 3 * hidden * dense_inter
    bpp: float | None = None
    basis = "parameters estimated from config.json sizes x the served dtype's bytes"
    quant = cfg.get("quantization_config")
    if isinstance(quant, dict):
        method = str(quant.get("quant_method") or quant.get("format") or "").lower()
        bits = quant.get("bits") or quant.get("weight_bits")
        if "fp8" in method or bits == 8:
            bpp = 1.0
        elif bits == 4 or any(s in method for s in ("awq", "gptq", "mxfp4", "nvfp4", "fp4", "int4")):
            bpp = 0.5625  # 4-bit weights plus group scales (about 1/16 overhead)
        elif "compressed" in method:
            bpp = 1.0
        basis = f"parameters estimated from config.json sizes x {bpp:g} bytes ({method or 'quantized'})"
    del n
    return ParamEstimate(total=int(total), expert=int(expert), bytes_per_param=bpp, basis=basis)


# No real model has more layers or a wider dimension; beyond them a config is corrupt, and a layer list
# of that length would exhaust memory before any answer.
MAX_LAYERS = 100_000
MAX_DIM = 10_000_000


def parse_model_config(raw: dict[str, Any]) -> ModelShape:
    """Read a ``config.json`` dict. Raises ValueError with what is missing or malformed (a field of the
    wrong type, a negative or absurd size): never another exception, whatever the JSON holds."""
    if not isinstance(raw, dict):
        raise ValueError("config.json is not a JSON object")
    try:
        return _parse_model_config(raw)
    except (TypeError, OverflowError, AttributeError, KeyError, IndexError) as exc:
        raise ValueError(
            f"config.json has a field of an unexpected type or size ({type(exc).__name__}: {exc})"
        ) from exc


def _check_size(name: str, value: int | None, limit: int) -> None:
    if value is not None and not 0 <= value <= limit:
        raise ValueError(f"config.json: {name} = {value} is outside 0..{limit:,}")


def _parse_model_config(raw: dict[str, Any]) -> ModelShape:
    cfg = text_config(raw)
    n = _int(cfg, "num_hidden_layers", "n_layers", "num_layers")
    if not n:
        raise ValueError("config.json has no num_hidden_layers")
    _check_size("num_hidden_layers", n, MAX_LAYERS)
    heads = _int(cfg, "num_attention_heads", "n_heads")
    if not heads:
        raise ValueError("config.json has no num_attention_heads")
    hidden = _int(cfg, "hidden_size", "d_model", default=0) or 0
    kv_heads = _int(cfg, "num_key_value_heads", "n_kv_heads", default=heads) or heads
    head_dim = _int(cfg, "head_dim") or (hidden // heads if hidden else 0)
    for name, value in (
        ("num_attention_heads", heads),
        ("hidden_size", hidden),
        ("num_key_value_heads", kv_heads),
        ("head_dim", head_dim),
    ):
        _check_size(name, value, MAX_DIM)
    if not head_dim:
        raise ValueError("config.json has neither head_dim nor hidden_size")
    dtype, dtype_source = config_dtype(raw)
    kinds, notes = _layer_kinds(cfg, n)
    mla = bool(cfg.get("kv_lora_rank"))
    mla_dim = (int(cfg["kv_lora_rank"]) + int(cfg.get("qk_rope_head_dim") or 64)) if mla else 0
    _check_size("kv_lora_rank + qk_rope_head_dim", mla_dim, MAX_DIM)
    state = _linear_state(cfg) if "linear" in kinds else None
    if "linear" in kinds and state is None:
        notes.append(
            "linear/recurrent layers found but their state size is not known from this config: counted as 0"
        )
    params = _estimate_params(cfg, kinds)
    archs = raw.get("architectures") or cfg.get("architectures") or [""]
    return ModelShape(
        model_type=str(cfg.get("model_type") or raw.get("model_type") or ""),
        architecture=str(archs[0] if archs else ""),
        num_layers=n,
        layer_kinds=tuple(kinds),
        attention="mla" if mla else "gqa",
        num_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        mla_dim=mla_dim,
        sliding_window=_int(cfg, "sliding_window") if "sliding" in kinds else None,
        linear_state=state,
        dtype=dtype,
        max_position_embeddings=_int(cfg, "max_position_embeddings"),
        hybrid="linear" in kinds,
        param_estimate=params,
        notes=tuple(notes),
        dtype_source=dtype_source,
        quantized=params.bytes_per_param is not None,
        checkpoint_kv_dtype=checkpoint_kv_cache_dtype(
            cfg.get("quantization_config") or raw.get("quantization_config")
        ),
    )


def kv_heads_per_gpu(total_kv_heads: int, tp: int) -> int:
    """vLLM shards KV heads over TP and replicates them when there are fewer heads than ranks."""
    return max(1, total_kv_heads // tp)


def attention_bytes_per_token_per_layer(shape: ModelShape, tp: int, kv_dtype_bytes: float) -> int:
    """KV bytes one token costs in one attention layer on one GPU."""
    if shape.attention == "mla":
        # MLA caches one latent (kv_lora_rank + rope dims) per token; it is not split by TP.
        return int(shape.mla_dim * kv_dtype_bytes)
    return int(2 * kv_heads_per_gpu(shape.num_kv_heads, tp) * shape.head_dim * kv_dtype_bytes)


def pp_stage_layers(kinds: tuple[str, ...], pp: int) -> list[tuple[str, ...]]:
    """Contiguous pipeline stages; the remainder goes to the last stages, as vLLM's get_pp_indices does."""
    n = len(kinds)
    base, rem = divmod(n, pp)
    stages = []
    start = 0
    for s in range(pp):
        size = base + (1 if s >= pp - rem else 0)
        stages.append(kinds[start : start + size])
        start += size
    return stages
