"""Turn a capacity result into findings with the fix, in the method's order (pure)."""

from __future__ import annotations

import math

from vllm_medic.model import Category, Finding, Severity
from vllm_medic.plan.capacity import PlanRequest, PlanResult
from vllm_medic.plan.gpus import GIB
from vllm_medic.plan.layouts import MAX_NODES, LayoutSearch
from vllm_medic.plan.recipe_input import RecipeBaseline
from vllm_medic.plan.shape import ModelShape

DOCS_MEMORY = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"


def _gib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / GIB:.2f} GiB"


def _nodes(gpus: int, per_node: int) -> str:
    nodes = math.ceil(gpus / per_node)
    return f"{gpus} GPUs ({nodes} node{'s' if nodes != 1 else ''} of {per_node})"


def _layout_fix(req: PlanRequest, search: LayoutSearch | None) -> list[str]:
    """The layout to use instead, from the search (never a bare GPU count)."""
    if search is None:
        return []
    best = search.best
    gpu = req.gpu.name
    if best is None:
        return [
            f"No TP/PP/DP/EP layout of up to {req.gpus_per_node * MAX_NODES} x {gpu} fits at these settings: "
            "use a GPU with more memory or a smaller-precision checkpoint."
        ]
    if search.within_given:
        return [f"Use {best.summary(gpu)}: launch with `{best.flags()}` (more in PLAN006)."]
    return [
        f"No layout of {req.gpus} x {gpu} fits; the smallest that does is {best.summary(gpu)}: "
        f"launch with `{best.flags()}` (more in PLAN006)."
    ]


def _search_finding(req: PlanRequest, search: LayoutSearch) -> Finding:
    gpu = req.gpu.name
    ev = [f"{c.summary(gpu)}; flags: {c.flags()}" for c in search.candidates[:3]]
    ev.append(
        f"searched {search.evaluated} TP x PP x DP (+ EP) layouts the model and recipe allow; ranked by fewest "
        "GPUs, then standard strategy shapes, then margin, then TP within a node"
    )
    ev += search.notes
    if search.best is None:
        title = f"No layout fits {req.gpus} x {gpu} (nor up to {req.gpus_per_node * MAX_NODES} GPUs)"
    elif search.within_given:
        n = len(search.candidates)
        title = f"{n} layout{'s' if n != 1 else ''} fit {req.gpus} x {gpu}; best: {search.best.label()}"
    else:
        title = f"No layout fits {req.gpus} x {gpu}; smallest that fits: {search.best.gpus} GPUs, {search.best.label()}"
    fix = (
        [f"`{search.best.flags()}`" + (f" (strategy {search.best.strategy})" if search.best.strategy else "")]
        if search.best
        else []
    )
    return Finding("PLAN006", Severity.INFO, Category.PARALLEL_LAYOUT, title, ev, fix)


def plan_findings(
    req: PlanRequest,
    res: PlanResult,
    shape: ModelShape | None,
    search: LayoutSearch | None = None,
    recipe: RecipeBaseline | None = None,
) -> list[Finding]:
    """PLAN005, PLAN004, PLAN001, PLAN002 (or KV not checked), PLAN006, PLAN003: one small judge each."""
    out: list[Finding] = []
    layout_fix = _layout_fix(req, search)
    layout = (
        f"TP {req.tp} x PP {req.pp} x DP {req.dp}{' + EP' if req.ep else ''} on {req.gpus} x {req.gpu.name}"
    )
    out.extend(_tp_divides_heads(req, shape))
    out.extend(_recipe_baseline(req, res, recipe, layout_fix))
    out.extend(_weights_fit(req, res, layout, layout_fix))
    out.extend(_one_request_fits(res, shape, layout_fix))
    if shape is None and res.weights_fit:
        out.extend(_kv_not_checked(req, res))
    if search is not None:
        out.append(_search_finding(req, search))
    out.extend(_concurrency(req, res, layout_fix))
    return out


def _tp_divides_heads(req: PlanRequest, shape: ModelShape | None) -> list[Finding]:
    """PLAN005: vLLM splits the attention heads evenly over TP."""
    out: list[Finding] = []
    if shape is not None and req.tp > 1 and shape.num_heads % req.tp:
        out.append(
            Finding(
                "PLAN005",
                Severity.FAIL,
                Category.PARALLEL_LAYOUT,
                f"TP {req.tp} does not divide the {shape.num_heads} attention heads",
                [f"num_attention_heads = {shape.num_heads}, --tensor-parallel-size {req.tp}"],
                ["Pick a TP size that divides the attention heads; use PP or DP for the remaining GPUs."],
            )
        )
    return out


def _recipe_baseline(
    req: PlanRequest, res: PlanResult, recipe: RecipeBaseline | None, layout_fix: list[str]
) -> list[Finding]:
    """PLAN004: the GPU count against the recipe's baseline for this GPU."""
    out: list[Finding] = []
    if res.recipe_min_gpus is not None:
        nodes_txt = f" / {res.recipe_min_nodes} nodes" if res.recipe_min_nodes else ""
        if res.recipe_baseline_met:
            out.append(
                Finding(
                    "PLAN004",
                    Severity.PASS,
                    Category.PARALLEL_LAYOUT,
                    f"{req.gpus} x {req.gpu.name} meets the recipe baseline ({res.recipe_min_gpus} GPUs{nodes_txt})",
                    [f"recipe minimum for {req.gpu.name}: {res.recipe_min_gpus} GPUs{nodes_txt}"],
                )
            )
        else:
            out.append(
                Finding(
                    "PLAN004",
                    Severity.FAIL,
                    Category.PARALLEL_LAYOUT,
                    f"{req.gpus} x {req.gpu.name} is below the recipe baseline of {res.recipe_min_gpus} GPUs{nodes_txt}",
                    [
                        f"planned: {_nodes(req.gpus, req.gpus_per_node)}; recipe minimum on {req.gpu.name}: {res.recipe_min_gpus} GPUs{nodes_txt}",
                        "the baseline comes from the model's recipe, not from a small model's single-GPU experience",
                    ],
                    [
                        f"Plan at least {_nodes(res.recipe_min_gpus, req.gpus_per_node)} of {req.gpu.name}, or a GPU whose recipe baseline you meet.",
                        *_baseline_layout(req, recipe),
                        *layout_fix,
                    ],
                )
            )
    return out


def _weights_fit(req: PlanRequest, res: PlanResult, layout: str, layout_fix: list[str]) -> list[Finding]:
    """PLAN001: the weights and the allowance fit in the per-GPU budget, leaving room for KV cache."""
    out: list[Finding] = []
    w_evidence = [
        f"weights total {_gib(res.weights_total_bytes)}; per GPU {_gib(res.weights_per_gpu_bytes)} ({layout})",
        f"per-GPU budget {_gib(res.usable_bytes_per_gpu)} (x {req.gpu_memory_utilization:g}); allowance {_gib(res.overhead_bytes)}",
    ]
    if res.weights_fit:
        out.append(
            Finding(
                "PLAN001",
                Severity.PASS,
                Category.OOM_STARTUP,
                f"Weights fit: {_gib(res.weights_per_gpu_bytes)} per GPU, {_gib(res.kv_cache_bytes_per_gpu)} left for KV cache",
                w_evidence,
            )
        )
    else:
        fix = list(layout_fix)
        fix.append(
            "Or a GPU with more memory, or a smaller-precision checkpoint (fp8 / fp4) if the recipe offers one."
        )
        fix.append("Raising --gpu-memory-utilization only helps at the margin and risks OOM during warmup.")
        out.append(
            Finding(
                "PLAN001",
                Severity.FAIL,
                Category.OOM_STARTUP,
                f"Weights do not fit: {_gib(res.weights_per_gpu_bytes)} per GPU, short by {_gib(-res.kv_cache_bytes_per_gpu if res.kv_cache_bytes_per_gpu is not None else None)}",
                w_evidence,
                fix,
                [DOCS_MEMORY],
            )
        )
    return out


def _one_request_fits(res: PlanResult, shape: ModelShape | None, layout_fix: list[str]) -> list[Finding]:
    """PLAN002: one --max-model-len request fits the KV cache (else vLLM refuses to start)."""
    out: list[Finding] = []
    if shape is not None and res.weights_fit and res.max_model_len:
        ev = [
            f"KV per token per GPU: {res.kv_bytes_per_token:,} bytes ({res.kv_dtype_bytes:g}-byte KV dtype)"
            + (
                f"; {res.state_bytes_per_sequence:,} bytes constant state per sequence"
                if res.state_bytes_per_sequence
                else ""
            ),
            f"KV cache per GPU {_gib(res.kv_cache_bytes_per_gpu)} -> {res.kv_tokens:,} tokens"
            if res.kv_tokens is not None
            else "KV tokens unknown",
        ]
        if res.kv_fits_one_request:
            out.append(
                Finding(
                    "PLAN002",
                    Severity.PASS,
                    Category.OOM_STARTUP,
                    f"One {res.max_model_len:,}-token request fits; margin {_gib(res.margin_bytes)} per GPU",
                    ev,
                )
            )
        else:
            fix = [
                f"Lower --max-model-len to {res.max_model_len_that_fits:,} or less (what this KV cache holds).",
                *layout_fix,
            ]
            if res.kv_dtype_bytes and res.kv_dtype_bytes > 1:
                fix.append("Use --kv-cache-dtype fp8: it halves the KV bytes per token of bf16.")
            fix.append(
                "Add GPUs (more TP shards the KV heads; with MLA the latent is not split, so add PP/DP or nodes instead)."
            )
            out.append(
                Finding(
                    "PLAN002",
                    Severity.FAIL,
                    Category.OOM_STARTUP,
                    f"A {res.max_model_len:,}-token request does not fit the KV cache (vLLM refuses to start)",
                    ev
                    + [
                        f"short by {_gib(-res.margin_bytes if res.margin_bytes is not None else None)} per GPU"
                    ],
                    fix,
                    [DOCS_MEMORY],
                )
            )
    return out


def _concurrency(req: PlanRequest, res: PlanResult, layout_fix: list[str]) -> list[Finding]:
    """PLAN003: how many requests of the context length fit at once, against --concurrency when given."""
    out: list[Finding] = []
    if res.max_concurrency is not None and res.context_len:
        conc = f"{res.max_concurrency:.2f}x"
        if req.concurrency is None:
            out.append(
                Finding(
                    "PLAN003",
                    Severity.INFO,
                    Category.OOM_RUNTIME,
                    f"Maximum concurrency for {res.context_len:,} tokens per request: {conc}"
                    + (
                        f" per DP replica ({res.max_concurrency * req.dp:.2f}x across {req.dp})"
                        if req.dp > 1
                        else ""
                    ),
                    [
                        f"{res.kv_tokens:,} KV tokens per replica"
                        if res.kv_tokens is not None
                        else "KV tokens unknown"
                    ],
                )
            )
        else:
            total = res.max_concurrency * req.dp
            ok = bool(res.concurrency_met)
            fix = (
                []
                if ok
                else [
                    f"Shorten the context per request below {res.context_len:,} tokens, or use --kv-cache-dtype fp8.",
                    *(
                        layout_fix
                        or [
                            "Add DP replicas (each brings its own KV cache) or GPUs; re-run `vllm-medic plan`."
                        ]
                    ),
                    "Then raise concurrency step by step in `vllm-medic accept`, recording where OOM and timeouts start.",
                ]
            )
            out.append(
                Finding(
                    "PLAN003",
                    Severity.PASS if ok else Severity.FAIL,
                    Category.OOM_RUNTIME,
                    f"{req.concurrency} concurrent {res.context_len:,}-token requests {'fit' if ok else 'do not fit'}: max {conc} per replica",
                    [f"max concurrency {conc} per replica x {req.dp} replica(s) = {total:.2f}"],
                    fix,
                )
            )
    return out


def _baseline_layout(req: PlanRequest, recipe: RecipeBaseline | None) -> list[str]:
    key = recipe.key_for(req.gpu.name) if recipe else None
    layout = recipe.layouts.get(key) if recipe and key else None
    if not layout:
        return []
    parts = [f"{k.upper()} {v}" for k, v in layout.items() if k != "ep" and v > 1]
    flags = {"tp": "--tensor-parallel-size", "pp": "--pipeline-parallel-size", "dp": "--data-parallel-size"}
    cmd = " ".join(f"{flags[k]} {v}" for k, v in layout.items() if k in flags and v > 1)
    return [
        f"The recipe baseline's layout on {req.gpu.name}: {' x '.join(parts) or 'TP 1'}"
        + (" + EP" if layout.get("ep") else "")
        + f" (`{cmd}`)."
    ]


def _kv_not_checked(req: PlanRequest, res: PlanResult) -> list[Finding]:
    """Without a config.json the KV bytes per token are unknown: the KV cache and the concurrency it
    allows are *not checked*, never passed (a weights-only plan must not read as "fits")."""
    length = f"{res.max_model_len:,}-token" if res.max_model_len else "--max-model-len"
    ev = [
        "KV bytes per token come from config.json (layers, num_key_value_heads x head_dim, or MLA "
        "kv_lora_rank + qk_rope_head_dim, linear-attention state): no --config was given",
        f"weights checked only: {_gib(res.weights_per_gpu_bytes)} per GPU, "
        f"{_gib(res.kv_cache_bytes_per_gpu)} would be left for the KV cache",
    ]
    fix = [
        "Pass --config MODEL_DIR (or its config.json) to compute KV bytes per token, KV tokens and concurrency.",
        "For a model whose config.json is not public yet (Kimi K3 before its weights are published), plan with "
        "the config once you have the checkpoint; until then start with the recipe's --max-model-len for your "
        "hardware and read vLLM's 'GPU KV cache size' / 'Maximum concurrency' log lines at startup.",
    ]
    out = [
        Finding(
            "PLAN002",
            Severity.NOT_CHECKED,
            Category.OOM_STARTUP,
            f"KV cache not checked: whether one {length} request fits is unknown without the model's config.json",
            ev,
            fix,
            [DOCS_MEMORY],
        )
    ]
    if req.concurrency is not None:
        ctx = f"{res.context_len:,}-token " if res.context_len else ""
        out.append(
            Finding(
                "PLAN003",
                Severity.NOT_CHECKED,
                Category.OOM_RUNTIME,
                f"Concurrency not checked: {req.concurrency} concurrent {ctx}requests need the KV bytes per token",
                [ev[0]],
                fix[:1],
            )
        )
    return out
