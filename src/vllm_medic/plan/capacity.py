"""Capacity arithmetic (pure): weights per GPU, KV bytes per token, KV tokens, concurrency, fit.

It follows vLLM's own accounting where it is simple and stated:

* the per-instance budget is ``total device memory x --gpu-memory-utilization``; weights, an
  activation/CUDA-graph/non-torch allowance and the KV cache must fit inside it;
* KV blocks are sized per layer (``block_size x kv_heads_per_gpu x head_dim x 2 x dtype`` for
  MHA/GQA, ``block_size x (kv_lora_rank + rope_dim) x dtype`` for MLA), ``num_blocks =
  kv_bytes // (page x layers)``, ``GPU KV cache size = num_blocks x block_size`` tokens and
  ``Maximum concurrency for L tokens = num_blocks / ceil(L / block_size)``;
* sliding-window layers need at most ``ceil((window-1)/block)+1`` blocks per sequence;
* linear-attention / KDA / GDN layers hold a constant state per sequence;
* with pipeline parallelism the stage with the most KV per token sets the capacity.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from vllm_medic.plan.dtype import KvDtype, ServedDtype, resolve_kv_cache_dtype, resolve_model_dtype
from vllm_medic.plan.gpus import GB, GIB, GpuSpec
from vllm_medic.plan.recipe_input import RecipeBaseline
from vllm_medic.plan.shape import (
    ModelShape,
    attention_bytes_per_token_per_layer,
    dtype_bytes,
    kv_heads_per_gpu,
    pp_stage_layers,
)

DEFAULT_GPU_MEMORY_UTILIZATION = 0.92  # vLLM CacheConfig default since #38284 (2026-04-21)
OVERHEAD_FRACTION = 0.05
OVERHEAD_FLOOR = 2 * GIB


@dataclass(frozen=True)
class PlanRequest:
    gpu: GpuSpec
    gpus: int
    gpus_per_node: int = 8
    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: bool = False
    gpu_memory_utilization: float = DEFAULT_GPU_MEMORY_UTILIZATION
    max_model_len: int | None = None
    kv_cache_dtype: str = "auto"
    dtype: str = "auto"  # vLLM's --dtype
    block_size: int = 16
    context_len: int | None = None
    concurrency: int | None = None
    kv_cache_bytes: int | None = None  # per GPU, bypasses the memory model (--kv-cache-gib)
    overhead_bytes: int | None = None
    weights_bytes: int | None = None
    weights_basis: str = ""
    weights_from_checkpoint: bool = False  # weights_bytes are the checkpoint files (stored in its dtype)
    profile_source: str = (
        ""  # an official recipe profile supplied launch values (plan.layouts.profile_values)
    )


@dataclass
class StageKv:
    full_bytes_per_token: int  # attention layers whose KV grows with the sequence
    swa_bytes_per_token: int  # sliding-window layers (capped at the window)
    state_bytes_per_seq: int  # linear / recurrent layers
    full_layers: int
    swa_layers: int
    linear_layers: int


@dataclass
class PlanResult:
    fits: bool
    weights_fit: bool
    kv_fits_one_request: bool | None
    recipe_baseline_met: bool | None
    concurrency_met: bool | None
    weights_total_bytes: int | None
    weights_per_gpu_bytes: int | None
    overhead_bytes: int
    usable_bytes_per_gpu: int
    kv_cache_bytes_per_gpu: int | None
    kv_bytes_per_token: int | None
    kv_bytes_per_token_model: int | None
    state_bytes_per_sequence: int | None
    kv_tokens: int | None
    num_blocks: int | None
    max_concurrency: float | None
    context_len: int | None
    max_model_len: int | None
    max_model_len_that_fits: int | None
    margin_bytes: int | None
    min_gpus_for_weights: int | None
    recipe_min_gpus: int | None
    recipe_min_nodes: int | None
    kv_dtype_bytes: float | None
    kv_heads_per_gpu: int | None
    model_dtype: str | None = None  # what vLLM serves the weights in (--dtype resolved)
    kv_cache_dtype: str | None = None  # what the KV cache is stored in (--kv-cache-dtype resolved)
    assumptions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in (
            "weights_per_gpu_bytes",
            "overhead_bytes",
            "usable_bytes_per_gpu",
            "kv_cache_bytes_per_gpu",
            "margin_bytes",
        ):
            v = d.get(k)
            d[k.replace("_bytes", "_gib")] = None if v is None else round(v / GIB, 3)
        if self.max_concurrency is not None:
            d["max_concurrency"] = round(self.max_concurrency, 2)
        d["kv_checked"] = self.kv_bytes_per_token is not None  # False: `fits` speaks for the weights only
        return d


def stage_kv(shape: ModelShape, kinds: tuple[str, ...], tp: int, kv_b: float, model_b: float = 2) -> StageKv:
    per_layer = attention_bytes_per_token_per_layer(shape, tp, kv_b)
    n_full = sum(1 for k in kinds if k == "full")
    n_swa = sum(1 for k in kinds if k == "sliding")
    n_lin = sum(1 for k in kinds if k == "linear")
    state = shape.linear_state.bytes_per_gpu(tp, model_b) if shape.linear_state else 0
    return StageKv(per_layer * n_full, per_layer * n_swa, state * n_lin, n_full, n_swa, n_lin)


def seq_bytes(st: StageKv, length: int, block: int, window: int | None) -> int:
    """KV bytes one sequence of ``length`` tokens holds on one GPU of this stage (block-rounded)."""
    blocks = math.ceil(length / block)
    total = blocks * block * st.full_bytes_per_token
    if st.swa_layers:
        swa_blocks = min(blocks, math.ceil(max((window or length) - 1, 1) / block) + 1)
        total += swa_blocks * block * st.swa_bytes_per_token
    return total + st.state_bytes_per_seq


def default_overhead(gpu: GpuSpec) -> int:
    return max(OVERHEAD_FLOOR, int(gpu.memory_bytes * OVERHEAD_FRACTION))


def weights_per_gpu(total: int, req: PlanRequest, expert_fraction: float | None) -> tuple[int, str]:
    if req.ep and req.dp > 1:
        if expert_fraction is not None:
            dense = total * (1 - expert_fraction) / (req.tp * req.pp)
            experts = total * expert_fraction / (req.tp * req.dp * req.pp)
            return int(dense + experts), (
                f"expert parallel: experts ({expert_fraction:.0%} of the weights, estimated from config.json) "
                f"split over TP x DP x PP = {req.tp * req.dp * req.pp} GPUs, the rest over TP x PP = {req.tp * req.pp}"
            )
        return int(total / (req.tp * req.dp * req.pp)), (
            "expert parallel without a config.json: all weights treated as split over every GPU (optimistic)"
        )
    return int(total / (req.tp * req.pp)), f"weights split over TP x PP = {req.tp * req.pp} GPUs" + (
        f", replicated in each of the {req.dp} DP replicas" if req.dp > 1 else ""
    )


def plan(req: PlanRequest, shape: ModelShape | None, recipe: RecipeBaseline | None) -> PlanResult:
    """The arithmetic of one layout, step by step; each step appends its reasoning to the notes, in order."""
    notes: list[str] = []
    usable = int(req.gpu.memory_bytes * req.gpu_memory_utilization)
    notes.append(
        f"per-GPU budget = {req.gpu.memory_bytes / GIB:.2f} GiB ({req.gpu.memory_basis}) x "
        f"--gpu-memory-utilization {req.gpu_memory_utilization:g} = {usable / GIB:.2f} GiB"
    )
    if req.profile_source:
        notes.append(f"launch values from the {req.profile_source}")
    served, kv_dtype = _dtypes(req, shape, notes)
    weights_total = _weights_total(req, shape, recipe, served, notes)
    per_gpu_w: int | None = None
    if weights_total is not None:
        per_gpu_w, how = weights_per_gpu(
            weights_total, req, shape.param_estimate.expert_fraction if shape else None
        )
        notes.append(how)
    overhead, kv_mem, weights_fit = _kv_memory(req, usable, per_gpu_w, notes)
    min_gpus_for_weights = None
    if weights_total is not None and req.kv_cache_bytes is None:
        room = usable - overhead
        min_gpus_for_weights = math.ceil(weights_total / room) if room > 0 else None
    recipe_min, recipe_nodes, recipe_ok = _recipe_baseline(req, recipe, notes)
    max_model_len = (
        req.max_model_len
        or (shape.max_position_embeddings if shape else None)
        or (recipe.context_length if recipe else None)
    )
    context_len = req.context_len or max_model_len
    kv = _KvCapacity(margin=kv_mem)
    if shape is not None and served is not None and kv_dtype is not None:
        kv = _kv_capacity(req, shape, served, kv_dtype, kv_mem, context_len, max_model_len, notes)
    concurrency_ok = None
    if req.concurrency is not None and kv.concurrency is not None:
        concurrency_ok = kv.concurrency * req.dp >= req.concurrency
    fits = weights_fit and kv.kv_one is not False and recipe_ok is not False and concurrency_ok is not False
    return PlanResult(
        fits=fits,
        weights_fit=weights_fit,
        kv_fits_one_request=kv.kv_one,
        recipe_baseline_met=recipe_ok,
        concurrency_met=concurrency_ok,
        weights_total_bytes=weights_total,
        weights_per_gpu_bytes=per_gpu_w,
        overhead_bytes=overhead,
        usable_bytes_per_gpu=usable,
        kv_cache_bytes_per_gpu=kv_mem,
        kv_bytes_per_token=kv.per_token,
        kv_bytes_per_token_model=kv.per_token_model,
        state_bytes_per_sequence=kv.state,
        kv_tokens=kv.kv_tokens,
        num_blocks=kv.num_blocks,
        max_concurrency=kv.concurrency,
        context_len=context_len,
        max_model_len=max_model_len,
        max_model_len_that_fits=kv.fits_len,
        margin_bytes=kv.margin,
        min_gpus_for_weights=min_gpus_for_weights,
        recipe_min_gpus=recipe_min,
        recipe_min_nodes=recipe_nodes,
        kv_dtype_bytes=kv.kv_b,
        kv_heads_per_gpu=kv.heads_gpu,
        model_dtype=served.served if served else None,
        kv_cache_dtype=kv_dtype.name if kv_dtype else None,
        assumptions=notes,
    )


def _dtypes(
    req: PlanRequest, shape: ModelShape | None, notes: list[str]
) -> tuple[ServedDtype | None, KvDtype | None]:
    """The dtype vLLM serves the weights in and the KV cache's, as --dtype / --kv-cache-dtype resolve."""
    if shape is None:
        return None, None
    served = resolve_model_dtype(
        shape.dtype, shape.dtype_source, req.dtype, model_type=shape.model_type, bf16=req.gpu.bf16
    )
    kv_dtype = resolve_kv_cache_dtype(req.kv_cache_dtype, served, shape.checkpoint_kv_dtype)
    notes.append(f"model dtype {served.served} ({shape.dtype_source}: {shape.dtype}; {served.reason})")
    notes.append(f"KV cache dtype {kv_dtype.name} ({kv_dtype.reason})")
    return served, kv_dtype


def _weights_total(
    req: PlanRequest,
    shape: ModelShape | None,
    recipe: RecipeBaseline | None,
    served: ServedDtype | None,
    notes: list[str],
) -> int | None:
    """All weights in bytes: the checkpoint (rescaled to the served dtype), else the recipe's, else estimated."""
    weights_total = req.weights_bytes
    weights_basis = req.weights_basis
    if (
        weights_total is not None
        and req.weights_from_checkpoint
        and served is not None
        and shape is not None
        and not shape.quantized
        and served.bytes != served.config_bytes
    ):
        weights_total = weights_total * served.bytes // served.config_bytes
        weights_basis += (
            f"; stored as {served.config_dtype}, loaded as {served.served}: "
            f"x {served.bytes}/{served.config_bytes} = {weights_total:,} bytes"
        )
    if weights_total is None and recipe and recipe.weights_gb:
        weights_total = int(recipe.weights_gb * GB)
        weights_basis = f"recipe weight footprint {recipe.weights_gb:g} GB ({recipe.weights_source})"
    if weights_total is None and shape is not None and served is not None:
        weights_total = shape.param_estimate.weight_bytes(served.bytes)
        weights_basis = f"{shape.param_estimate.basis}: {shape.param_estimate.total / 1e9:.1f}B parameters"
    if weights_basis:
        notes.append(f"weights: {weights_basis}")
    return weights_total


def _kv_memory(
    req: PlanRequest, usable: int, per_gpu_w: int | None, notes: list[str]
) -> tuple[int, int, bool]:
    """(overhead, KV cache bytes per GPU, whether the weights fit): what is left after weights and overhead."""
    if req.kv_cache_bytes is not None:
        overhead = 0
        kv_mem = req.kv_cache_bytes
        notes.append(
            f"KV cache fixed at {kv_mem / GIB:g} GiB per GPU (--kv-cache-gib); weights and overhead not subtracted"
        )
        weights_fit = True
    else:
        overhead = req.overhead_bytes if req.overhead_bytes is not None else default_overhead(req.gpu)
        notes.append(
            f"activation / CUDA-graph / non-torch allowance: {overhead / GIB:.2f} GiB per GPU"
            + (
                " (--overhead-gib)"
                if req.overhead_bytes is not None
                else f" (max(2 GiB, {OVERHEAD_FRACTION:.0%} of the GPU)); vLLM measures the real figure at startup"
            )
        )
        kv_mem = usable - (per_gpu_w or 0) - overhead
        weights_fit = kv_mem > 0
    if per_gpu_w is None and req.kv_cache_bytes is None:
        notes.append(
            "no weight size known (give a model dir with model.safetensors.index.json, --weights-gib or --recipe)"
        )
    return overhead, kv_mem, weights_fit


def _recipe_baseline(
    req: PlanRequest, recipe: RecipeBaseline | None, notes: list[str]
) -> tuple[int | None, int | None, bool | None]:
    """(the recipe's minimum GPUs and nodes on this GPU, whether the layout meets them)."""
    if recipe is None:
        return None, None, None
    recipe_min, recipe_nodes, note = recipe.baseline_for(req.gpu.name)
    if recipe_min is None:
        return recipe_min, recipe_nodes, None
    recipe_ok = req.gpus >= recipe_min and (
        recipe_nodes is None or math.ceil(req.gpus / req.gpus_per_node) >= recipe_nodes
    )
    if note:
        notes.append(f"recipe baseline for {req.gpu.name}: {recipe_min} GPUs ({note})")
    return recipe_min, recipe_nodes, recipe_ok


@dataclass
class _KvCapacity:
    """What the KV cache of one GPU holds; every field None when the model's shape is unknown."""

    margin: int
    kv_b: float | None = None
    per_token: int | None = None
    per_token_model: int | None = None
    state: int | None = None
    kv_tokens: int | None = None
    num_blocks: int | None = None
    fits_len: int | None = None
    heads_gpu: int | None = None
    concurrency: float | None = None
    kv_one: bool | None = None


def _kv_capacity(
    req: PlanRequest,
    shape: ModelShape,
    served: ServedDtype,
    kv_dtype: KvDtype,
    kv_mem: int,
    context_len: int | None,
    max_model_len: int | None,
    notes: list[str],
) -> _KvCapacity:
    """KV bytes per token on the fullest PP stage, and how many tokens / sequences the KV cache holds."""
    kv = _KvCapacity(margin=kv_mem, kv_b=dtype_bytes(kv_dtype.name))
    assert kv.kv_b is not None
    model_b = served.bytes
    if shape.attention == "gqa":
        kv.heads_gpu = kv_heads_per_gpu(shape.num_kv_heads, req.tp)
        if shape.num_kv_heads < req.tp:
            notes.append(f"{shape.num_kv_heads} KV heads < TP {req.tp}: each GPU holds a replicated KV head")
    else:
        notes.append(f"MLA: one {shape.mla_dim}-wide latent per token per layer, not split by TP")
    stages = [
        stage_kv(shape, kinds, req.tp, kv.kv_b, model_b)
        for kinds in pp_stage_layers(shape.layer_kinds, req.pp)
    ]
    worst = max(stages, key=lambda s: (s.full_bytes_per_token + s.swa_bytes_per_token, s.state_bytes_per_seq))
    kv.per_token = worst.full_bytes_per_token + worst.swa_bytes_per_token
    whole = stage_kv(shape, shape.layer_kinds, 1, kv.kv_b, model_b)
    kv.per_token_model = whole.full_bytes_per_token + whole.swa_bytes_per_token
    kv.state = worst.state_bytes_per_seq
    notes.extend(_layer_notes(req, shape, worst, model_b))
    if kv_mem > 0 and kv.per_token > 0:
        kv.num_blocks, kv.kv_tokens, kv.fits_len, kv.concurrency = _fill(
            req, shape, worst, kv_mem, kv.per_token, context_len, max_model_len
        )
    elif kv_mem <= 0:
        kv.kv_tokens, kv.concurrency, kv.fits_len = 0, 0.0, 0
    if max_model_len:
        need = seq_bytes(worst, max_model_len, req.block_size, shape.sliding_window)
        kv.kv_one = kv_mem >= need
        kv.margin = kv_mem - need
    return kv


def _layer_notes(req: PlanRequest, shape: ModelShape, worst: StageKv, model_b: float) -> list[str]:
    """Why the fullest stage holds what it holds: PP stages, sliding-window and linear-attention layers."""
    notes: list[str] = []
    if req.pp > 1:
        notes.append(
            f"PP {req.pp}: the stage with the most KV per token ({worst.full_layers + worst.swa_layers + worst.linear_layers} layers) sets capacity"
        )
    if shape.sliding_window:
        notes.append(
            f"{shape.count('sliding')} sliding-window layers hold at most {shape.sliding_window} tokens each"
        )
    if shape.linear_state:
        notes.append(
            f"{shape.count('linear')} {shape.linear_state.kind.upper()} layers hold a constant state of "
            f"{shape.linear_state.bytes_per_gpu(req.tp, model_b):,} bytes per sequence each on one GPU (no prefix-cache checkpoints counted)"
        )
    return notes


def _fill(
    req: PlanRequest,
    shape: ModelShape,
    worst: StageKv,
    kv_mem: int,
    per_token: int,
    context_len: int | None,
    max_model_len: int | None,
) -> tuple[int | None, int | None, int | None, float | None]:
    """(blocks, tokens, longest request, concurrency) the KV cache holds: blocks of every layer when all
    layers are full attention, else by sequence (sliding windows and linear state do not grow per token)."""
    num_blocks = kv_tokens = fits_len = None
    concurrency = None
    if worst.swa_layers == 0 and worst.linear_layers == 0:
        num_blocks = kv_mem // (req.block_size * per_token)
        kv_tokens = num_blocks * req.block_size
        fits_len = kv_tokens
        if context_len:
            concurrency = num_blocks / math.ceil(context_len / req.block_size)
        return num_blocks, kv_tokens, fits_len, concurrency
    if context_len:
        concurrency = kv_mem / seq_bytes(worst, context_len, req.block_size, shape.sliding_window)
    if max_model_len:
        kv_tokens = int(
            kv_mem / seq_bytes(worst, max_model_len, req.block_size, shape.sliding_window) * max_model_len
        )
    fits_len = _longest_fitting(worst, kv_mem, req.block_size, shape.sliding_window, max_model_len)
    return num_blocks, kv_tokens, fits_len, concurrency


def _longest_fitting(st: StageKv, kv_mem: int, block: int, window: int | None, upper: int | None) -> int:
    """Largest block-aligned length whose sequence fits in ``kv_mem`` (binary search over blocks; monotone)."""
    if seq_bytes(st, block, block, window) > kv_mem:
        return 0
    lo, hi = 1, max(math.ceil((upper or block) / block), 1) * 64
    if seq_bytes(st, hi * block, block, window) <= kv_mem:
        return hi * block
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if seq_bytes(st, mid * block, block, window) <= kv_mem:
            lo = mid
        else:
            hi = mid
    return lo * block
