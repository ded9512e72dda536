"""`vllm-medic plan`: weights + KV cache per token against GPUs, before anything is launched."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vllm_medic.cli_common import JsonOpt, JunitOpt, StrictOpt, VerboseOpt, emit_findings
from vllm_medic.errors import UsageError

if TYPE_CHECKING:
    from vllm_medic.plan.capacity import PlanRequest, PlanResult
    from vllm_medic.plan.layouts import LayoutSearch
    from vllm_medic.plan.recipe_input import RecipeBaseline
    from vllm_medic.plan.shape import ModelShape


def register(app: typer.Typer) -> None:
    app.command(name="plan", help=PLAN_HELP)(plan_command)


PLAN_HELP = (
    "Capacity plan: weights per GPU, KV bytes per token (MHA/GQA, MLA, sliding window, hybrid "
    "linear-attention/KDA state), KV tokens, maximum concurrency and whether it fits, with the fix. "
    "Kimi K3 uses the recipe's baseline (--recipe kimi-k3)."
)


# The options of `plan`, one alias each, so the command's signature reads as the list of its inputs.
ConfigOpt = Annotated[
    str | None,
    typer.Option("--config", help="Model config.json, or a model dir (config.json + safetensors index)."),
]
RecipeOpt = Annotated[
    str | None,
    typer.Option("--recipe", help="Shipped recipe name (kimi-k3) or an official recipe YAML file."),
]
VariantOpt = Annotated[str, typer.Option("--variant", help="Recipe variant for the weight footprint.")]
GpuOpt = Annotated[
    str, typer.Option("--gpu", help="GPU type: B300, GB300, B200, H200, H100, A100, MI355X, ...")
]
GpusOpt = Annotated[int | None, typer.Option("--gpus", min=1, help="Number of GPUs (default TP x PP x DP).")]
GpusPerNodeOpt = Annotated[
    int | None,
    typer.Option("--gpus-per-node", min=1, help="GPUs per node (default 8; GB200/GB300 trays: 4)."),
]
GpuMemoryGibOpt = Annotated[
    float | None, typer.Option("--gpu-memory-gib", help="Memory per GPU in GiB (overrides the table).")
]
TpOpt = Annotated[int | None, typer.Option("--tp", "--tensor-parallel-size", min=1)]
PpOpt = Annotated[int, typer.Option("--pp", "--pipeline-parallel-size", min=1)]
DpOpt = Annotated[int, typer.Option("--dp", "--data-parallel-size", min=1)]
EpOpt = Annotated[bool, typer.Option("--ep/--no-ep", "--enable-expert-parallel", help="Expert parallelism.")]
GpuMemoryUtilizationOpt = Annotated[
    float, typer.Option("--gpu-memory-utilization", min=0.01, max=1.0, help="vLLM default 0.92.")
]
MaxModelLenOpt = Annotated[int | None, typer.Option("--max-model-len", min=1)]
KvCacheDtypeOpt = Annotated[
    str,
    typer.Option("--kv-cache-dtype", help="auto (the served model dtype, as vLLM), fp8, bf16, fp16, ..."),
]
DtypeOpt = Annotated[
    str,
    typer.Option(
        "--dtype",
        help="vLLM's --dtype: auto (a float32 checkpoint is served in bfloat16, as vLLM does), "
        "bfloat16, float16, float32.",
    ),
]
BlockSizeOpt = Annotated[int, typer.Option("--block-size", min=1, help="KV block size (GPU default 16).")]
ContextLenOpt = Annotated[
    int | None, typer.Option("--context-len", min=1, help="Tokens per request for max concurrency.")
]
ConcurrencyOpt = Annotated[
    int | None, typer.Option("--concurrency", min=1, help="Concurrent requests to plan for.")
]
KvCacheGibOpt = Annotated[
    float | None,
    typer.Option(
        "--kv-cache-gib",
        help="Fix the KV cache per GPU (like --kv-cache-memory-bytes / VLLM_CPU_KVCACHE_SPACE).",
    ),
]
WeightsGibOpt = Annotated[float | None, typer.Option("--weights-gib", help="Total weight bytes, in GiB.")]
OverheadGibOpt = Annotated[
    float | None,
    typer.Option("--overhead-gib", help="Activation/CUDA-graph/non-torch allowance per GPU."),
]


@dataclass
class _ModelInputs:
    """What the model side of the plan rests on: its shape, weight bytes and recipe baseline."""

    shape: ModelShape | None = None
    weights_bytes: int | None = None
    weights_basis: str = ""
    from_checkpoint: bool = False
    baseline: RecipeBaseline | None = None
    source: dict[str, str] = field(default_factory=dict)


def plan_command(
    config: ConfigOpt = None,
    recipe: RecipeOpt = None,
    variant: VariantOpt = "default",
    gpu: GpuOpt = "H100",
    gpus: GpusOpt = None,
    gpus_per_node: GpusPerNodeOpt = None,
    gpu_memory_gib: GpuMemoryGibOpt = None,
    tp: TpOpt = None,
    pp: PpOpt = 1,
    dp: DpOpt = 1,
    ep: EpOpt = False,
    gpu_memory_utilization: GpuMemoryUtilizationOpt = 0.92,
    max_model_len: MaxModelLenOpt = None,
    kv_cache_dtype: KvCacheDtypeOpt = "auto",
    dtype: DtypeOpt = "auto",
    block_size: BlockSizeOpt = 16,
    context_len: ContextLenOpt = None,
    concurrency: ConcurrencyOpt = None,
    kv_cache_gib: KvCacheGibOpt = None,
    weights_gib: WeightsGibOpt = None,
    overhead_gib: OverheadGibOpt = None,
    as_json: JsonOpt = False,
    junit: JunitOpt = None,
    strict: StrictOpt = False,
    verbose: VerboseOpt = False,
    ctx: typer.Context = None,  # type: ignore[assignment]  # typer injects it
) -> None:
    from vllm_medic.plan.capacity import PlanRequest, plan
    from vllm_medic.plan.gpus import lookup_gpu
    from vllm_medic.plan.verdict import plan_findings

    gmu_given = _given(ctx, "gpu_memory_utilization")
    _check_inputs(config, recipe, gpu_memory_gib, kv_cache_gib, weights_gib, overhead_gib)
    _check_dtypes(kv_cache_dtype, dtype)
    tp, gpus = _layout(tp, pp, dp, gpus)
    model = _model_inputs(config, recipe, variant, weights_gib)
    gpu_spec = lookup_gpu(gpu, gpu_memory_gib)
    req = PlanRequest(
        gpu=gpu_spec,
        gpus=gpus,
        gpus_per_node=gpus_per_node or gpu_spec.gpus_per_node,
        tp=tp,
        pp=pp,
        dp=dp,
        ep=ep,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_model_len,
        kv_cache_dtype=kv_cache_dtype.lower(),
        dtype=dtype.lower(),
        block_size=block_size,
        context_len=context_len,
        concurrency=concurrency,
        kv_cache_bytes=_gib_bytes(kv_cache_gib),
        overhead_bytes=_gib_bytes(overhead_gib),
        weights_bytes=model.weights_bytes,
        weights_basis=model.weights_basis,
        weights_from_checkpoint=model.from_checkpoint,
    )
    baseline = model.baseline
    if baseline is not None and baseline.recipe is not None and baseline.recipe.official is not None:
        req = _with_profile_values(req, baseline, gmu_given, max_model_len is not None)
    result = plan(req, model.shape, baseline)
    search = None if result.fits else _search(req, model, gmu_given, max_model_len is not None)
    findings = plan_findings(req, result, model.shape, search, baseline)
    extra = _plan_extra(req, result, search, model)
    if not as_json:
        _print_summary(req, result)
    code = emit_findings(
        findings,
        as_json=as_json,
        junit=junit,
        strict=strict,
        suite="vllm-medic plan",
        extra=extra,
        verbose=verbose,
    )
    raise typer.Exit(int(code))


def _gib_bytes(gib: float | None) -> int | None:
    from vllm_medic.plan.gpus import GIB

    return int(gib * GIB) if gib is not None else None


def _check_inputs(
    config: str | None,
    recipe: str | None,
    gpu_memory_gib: float | None,
    kv_cache_gib: float | None,
    weights_gib: float | None,
    overhead_gib: float | None,
) -> None:
    """Something to plan from, and sizes that are sizes."""
    if config is None and recipe is None and weights_gib is None and kv_cache_gib is None:
        raise UsageError(
            "give --config (a model's config.json or dir), --recipe (e.g. kimi-k3) or --weights-gib"
        )
    _check_sizes(
        {
            "--gpu-memory-gib": (gpu_memory_gib, False),
            "--kv-cache-gib": (kv_cache_gib, True),
            "--weights-gib": (weights_gib, True),
            "--overhead-gib": (overhead_gib, True),
        }
    )


def _check_dtypes(kv_cache_dtype: str, dtype: str) -> None:
    from vllm_medic.plan.dtype import normalize_model_dtype
    from vllm_medic.plan.shape import DTYPE_BYTES

    if kv_cache_dtype != "auto" and kv_cache_dtype.lower() not in DTYPE_BYTES:
        raise UsageError(
            f"--kv-cache-dtype {kv_cache_dtype!r}: use auto or one of {', '.join(sorted(DTYPE_BYTES))}"
        )
    if dtype.strip().lower() != "auto" and normalize_model_dtype(dtype) is None:
        raise UsageError(f"--dtype {dtype!r}: use auto, bfloat16, float16 (half) or float32 (float)")


def _layout(tp: int | None, pp: int, dp: int, gpus: int | None) -> tuple[int, int]:
    """(TP, GPUs): TP defaults to what --gpus leaves after PP x DP; --gpus defaults to TP x PP x DP."""
    if tp is None:
        if gpus is None:
            tp = 1
        elif gpus % (pp * dp):
            raise UsageError(f"--gpus {gpus} is not divisible by PP {pp} x DP {dp}")
        else:
            tp = gpus // (pp * dp)
    world = tp * pp * dp
    if gpus is None:
        gpus = world
    elif gpus != world:
        raise UsageError(f"--gpus {gpus} does not match TP {tp} x PP {pp} x DP {dp} = {world}")
    return tp, gpus


def _model_inputs(
    config: str | None, recipe: str | None, variant: str, weights_gib: float | None
) -> _ModelInputs:
    """The model's shape and weights (--config, overridden by --weights-gib) and the recipe baseline
    (--recipe; Kimi K3 gets its recipe's even without one)."""
    from vllm_medic.plan.gpus import GIB
    from vllm_medic.plan.inputs import read_model
    from vllm_medic.plan.recipe_input import load_recipe_baseline
    from vllm_medic.plan.shape import parse_model_config

    model = _ModelInputs()
    if config is not None:
        files = read_model(config)
        try:
            model.shape = parse_model_config(files.config)
        except ValueError as exc:
            raise UsageError(f"{files.config_path}: {exc}") from exc
        model.weights_bytes, model.weights_basis = files.weight_bytes, files.weight_basis
        model.source["config"] = str(files.config_path)
    model.from_checkpoint = model.weights_bytes is not None
    if weights_gib is not None:
        model.weights_bytes, model.weights_basis = int(weights_gib * GIB), f"--weights-gib {weights_gib:g}"
        model.from_checkpoint = False
    model.baseline = load_recipe_baseline(recipe, variant) if recipe else None
    shape = model.shape
    if model.baseline is None and shape is not None and _is_kimi_k3(shape.architecture, shape.model_type):
        # Kimi K3 is always judged against its recipe's baseline, never a small model's experience.
        model.baseline = load_recipe_baseline("kimi-k3")
        model.source["recipe"] = (
            f"{model.baseline.source} (applied automatically: {shape.architecture or shape.model_type})"
        )
    if model.baseline is not None and "recipe" not in model.source:
        model.source["recipe"] = model.baseline.source
    return model


def _search(req: PlanRequest, model: _ModelInputs, gmu_given: bool, mml_given: bool) -> LayoutSearch:
    """The layouts that would fit, searched when the asked one does not."""
    from vllm_medic.plan.layouts import search_layouts

    baseline = model.baseline
    return search_layouts(
        req,
        model.shape,
        baseline,
        gmu_given=gmu_given,
        max_model_len_given=mml_given,
        hardware_key=baseline.key_for(req.gpu.name) if baseline else None,
    )


def _plan_extra(
    req: PlanRequest, result: PlanResult, search: LayoutSearch | None, model: _ModelInputs
) -> dict[str, Any]:
    """The JSON beside the findings: the result, the layout search, the inputs and the model's shape."""
    extra = result.to_dict()
    if search is not None:
        extra["layout_search"] = search.to_dict()
    extra["inputs"] = {
        **model.source,
        "gpu": req.gpu.name,
        "gpu_memory_bytes": req.gpu.memory_bytes,
        "gpu_memory_source": req.gpu.source,
        "gpus": req.gpus,
        "tp": req.tp,
        "pp": req.pp,
        "dp": req.dp,
        "ep": req.ep,
        "gpu_memory_utilization": req.gpu_memory_utilization,
        "gpus_per_node": req.gpus_per_node,
        "kv_cache_dtype": req.kv_cache_dtype,
        "dtype": req.dtype,
        "block_size": req.block_size,
    }
    shape = model.shape
    if shape is not None:
        extra["model"] = {
            "architecture": shape.architecture,
            "attention": shape.attention,
            "layers": shape.num_layers,
            "full_attention_layers": shape.count("full"),
            "sliding_window_layers": shape.count("sliding"),
            "linear_layers": shape.count("linear"),
            "num_kv_heads": shape.num_kv_heads,
            "head_dim": shape.head_dim,
            "hybrid": shape.hybrid,
            "notes": list(shape.notes),
        }
    return extra


def _check_sizes(sizes: dict[str, tuple[float | None, bool]]) -> None:
    """GiB options must be finite numbers, >= 0 where zero makes sense (else > 0): a negative or NaN
    size would turn into a plan that 'fits' on nonsense instead of a usage error."""
    for flag, (value, zero_ok) in sizes.items():
        if value is None:
            continue
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero_ok):
            bound = "a number >= 0" if zero_ok else "a number > 0"
            raise UsageError(f"{flag} {value:g}: expected {bound} (GiB)")


def _with_profile_values(req, baseline, gmu_given: bool, mml_given: bool):  # noqa: ANN001, ANN202
    """An official recipe's resolved --gpu-memory-utilization / --max-model-len for this layout's strategy
    and GPU generation, where the user did not set them."""
    from dataclasses import replace

    from vllm_medic.plan.layouts import profile_values
    from vllm_medic.recipes.strategy import Topology, strategy_for

    topo = Topology(tp=req.tp, pp=req.pp, dp=req.dp, ep=req.ep, gpus_per_node=req.gpus_per_node)
    strategy, _ = strategy_for(topo)
    gmu, mml, src = profile_values(baseline, strategy, baseline.key_for(req.gpu.name), req.gpu.family)
    if not src:
        return req
    return replace(
        req,
        gpu_memory_utilization=req.gpu_memory_utilization if gmu_given or gmu is None else gmu,
        max_model_len=req.max_model_len if mml_given or mml is None else mml,
        profile_source=src,
    )


def _given(ctx: typer.Context | None, param: str) -> bool:
    """Did the user pass this option (rather than take its default)?"""
    if ctx is None:
        return True
    source = ctx.get_parameter_source(param)  # typer may vendor its own click: compare by name
    return source is not None and getattr(source, "name", "") != "DEFAULT"


def _is_kimi_k3(architecture: str, model_type: str) -> bool:
    return architecture.startswith("KimiK3") or model_type.lower().replace("-", "_").startswith("kimi_k3")


def _print_summary(req, result) -> None:  # noqa: ANN001 - typed in capacity; kept lazy-imported
    from rich.markup import escape
    from rich.table import Table

    from vllm_medic.cli_common import console
    from vllm_medic.plan.gpus import GIB

    def gib(v: int | None) -> str:
        return "unknown" if v is None else f"{v / GIB:,.2f} GiB"

    t = Table(
        title=f"vllm-medic plan: {req.gpus} x {req.gpu.name}, TP {req.tp} PP {req.pp} DP {req.dp}",
        show_header=False,
    )
    t.add_column("what")
    t.add_column("value")
    t.add_row("weights per GPU", gib(result.weights_per_gpu_bytes))
    t.add_row("allowance (activations, graphs, non-torch)", gib(result.overhead_bytes))
    t.add_row("KV cache per GPU", gib(result.kv_cache_bytes_per_gpu))
    t.add_row(
        "KV bytes per token (per GPU)",
        "not checked" if result.kv_bytes_per_token is None else f"{result.kv_bytes_per_token:,}",
    )
    if result.state_bytes_per_sequence:
        t.add_row("constant state per sequence", f"{result.state_bytes_per_sequence:,} bytes")
    t.add_row("KV tokens", "not checked" if result.kv_tokens is None else f"{result.kv_tokens:,}")
    if result.max_concurrency is not None:
        t.add_row(f"max concurrency at {result.context_len:,} tokens", f"{result.max_concurrency:.2f}x")
    if result.kv_bytes_per_token is None and result.weights_fit:
        t.add_row("fits", "weights: yes; KV cache: not checked (no config.json: pass --config)")
    else:
        t.add_row(
            "fits",
            ("yes" if result.fits else "NO")
            + (f" (margin {gib(result.margin_bytes)})" if result.margin_bytes is not None else ""),
        )
    out = console()
    out.print(t)
    for a in result.assumptions:
        out.print(f"  [dim]- {escape(a)}[/]", highlight=False)
    out.print()
