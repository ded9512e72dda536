"""Search the parallel layouts that fit (pure): when the asked-for layout does not, which one does?

"Use at least 16 GPUs" is no answer for a 16-GPU layout that does not fit. This module plans every
TP x PP x DP (+ EP) combination of the GPU counts vLLM can lay out, keeps those the model and the
recipe allow, and ranks the ones that fit: fewest GPUs first, then layouts of a standard strategy shape
(``recipes.strategy``: TP within a node, PP or DP across nodes, ...) before odd ones such as a 24-stage
pipeline of TP 1, then the largest margin, then TP kept within a node (cross-node TP is the slow path),
then fewer pipeline stages.

What "allowed" means:

* the model: TP divides the attention heads; PP no deeper than the layers; EP only for MoE models;
* the recipe (when it lists strategies): the layout is one of its strategies (``recipes.strategy``),
  offered on this GPU (``compatible_strategies`` / ``strategy_hardware``) and at or above that
  strategy's ``strategy_min_gpus``;
* expert parallelism with DP > 1 spreads only the experts over the DP ranks; without a config.json the
  expert share is unknown, so such layouts are not ranked (a note says so) rather than judged on an
  optimistic guess.

With an official recipe the per-layout launch values are the recipe's resolved profile for that
strategy and GPU generation (``--gpu-memory-utilization``, ``--max-model-len``), unless the user set
them: the Hopper TP8 x PP2 profile plans at 0.97 and 32,768 tokens, not at vLLM's defaults.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from vllm_medic.plan.capacity import PlanRequest, PlanResult, plan
from vllm_medic.plan.gpus import GIB
from vllm_medic.plan.recipe_input import RecipeBaseline
from vllm_medic.plan.shape import ModelShape
from vllm_medic.recipes.strategy import Topology, strategy_for

MAX_NODES = 16  # the recipes site's MAX_NODES: the largest deployment it renders


@dataclass(frozen=True)
class Candidate:
    tp: int
    pp: int
    dp: int
    ep: bool
    gpus: int
    nodes: int
    strategy: str | None
    result: PlanResult
    gpu_memory_utilization: float
    max_model_len: int | None
    settings_source: str = ""  # where the per-layout launch values came from

    @property
    def margin(self) -> int:
        r = self.result
        return r.margin_bytes if r.margin_bytes is not None else (r.kv_cache_bytes_per_gpu or 0)

    def label(self) -> str:
        parts = [f"TP {self.tp}"]
        if self.pp > 1:
            parts.append(f"PP {self.pp}")
        if self.dp > 1:
            parts.append(f"DP {self.dp}")
        return " x ".join(parts) + (" + EP" if self.ep else "")

    def flags(self) -> str:
        out = [f"--tensor-parallel-size {self.tp}"]
        if self.pp > 1:
            out.append(f"--pipeline-parallel-size {self.pp}")
        if self.dp > 1:
            out.append(f"--data-parallel-size {self.dp}")
        if self.ep:
            out.append("--enable-expert-parallel")
        if self.settings_source:  # the recipe profile's values this layout was planned with
            out.append(f"--gpu-memory-utilization {self.gpu_memory_utilization:g}")
            if self.max_model_len:
                out.append(f"--max-model-len {self.max_model_len}")
        return " ".join(out)

    def summary(self, gpu: str) -> str:
        r = self.result
        where = f"{self.gpus} x {gpu}, {self.nodes} node{'s' if self.nodes != 1 else ''}"
        if self.strategy:
            where += f", strategy {self.strategy}"
        text = f"{self.label()} ({where})"
        if r.weights_per_gpu_bytes is not None:
            text += f": weights {r.weights_per_gpu_bytes / GIB:.1f} GiB per GPU"
        if r.kv_bytes_per_token is not None and r.max_model_len:
            text += f", one {r.max_model_len:,}-token request fits with {self.margin / GIB:.1f} GiB to spare"
            if r.max_concurrency is not None and r.context_len:
                text += f", {r.max_concurrency * self.dp:.1f}x concurrency at {r.context_len:,} tokens"
        else:
            text += f", {self.margin / GIB:.1f} GiB per GPU left for the KV cache (KV bytes not checked)"
        if self.settings_source:
            text += f" [{self.settings_source}]"
        return text

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp,
            "ep": self.ep,
            "gpus": self.gpus,
            "nodes": self.nodes,
            "strategy": self.strategy,
            "flags": self.flags(),
            "gpu_memory_utilization": self.gpu_memory_utilization,
            "max_model_len": self.max_model_len,
            "settings_source": self.settings_source,
            "weights_per_gpu_gib": None
            if r.weights_per_gpu_bytes is None
            else round(r.weights_per_gpu_bytes / GIB, 2),
            "margin_gib": round(self.margin / GIB, 2),
            "kv_tokens": r.kv_tokens,
            "max_concurrency": None if r.max_concurrency is None else round(r.max_concurrency * self.dp, 2),
        }


@dataclass
class LayoutSearch:
    candidates: list[Candidate]  # fitting layouts, best first
    within_given: bool  # True: they use at most the GPUs given; False: more GPUs were needed
    gpus_given: int
    evaluated: int
    notes: list[str] = field(default_factory=list)

    @property
    def best(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    def to_dict(self, top: int = 5) -> dict[str, Any]:
        return {
            "within_given_gpus": self.within_given,
            "gpus_given": self.gpus_given,
            "evaluated": self.evaluated,
            "best": [c.to_dict() for c in self.candidates[:top]],
            "notes": self.notes,
        }


def layout_counts(limit: int, per_node: int, start: int = 1) -> list[int]:
    """GPU counts vLLM lays out: powers of two within a node, then whole nodes."""
    out = []
    n = 1
    while n < per_node:
        out.append(n)
        n *= 2
    out += [per_node * k for k in range(1, MAX_NODES + 1)]
    return [n for n in sorted(set(out)) if start <= n <= limit]


def _powers_of_two(n: int) -> list[int]:
    return [1 << i for i in range(n.bit_length()) if n % (1 << i) == 0]


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def enumerate_layouts(n: int, shape: ModelShape | None, moe: bool) -> list[tuple[int, int, int, bool]]:
    """(tp, pp, dp, ep) over ``n`` GPUs that the model allows."""
    out = []
    for tp in _powers_of_two(n):
        if shape is not None and tp > 1 and shape.num_heads % tp:
            continue
        rest = n // tp
        for pp in _divisors(rest):
            if shape is not None and pp > shape.num_layers:
                continue
            dp = rest // pp
            out.append((tp, pp, dp, False))
            if moe and dp > 1:
                out.append((tp, pp, dp, True))
            elif moe and dp == 1 and pp == 1 and tp > 1:
                out.append((tp, pp, dp, True))  # TEP: the recipe's own strategy, same memory as TP
    return out


def _is_moe(shape: ModelShape | None, recipe: RecipeBaseline | None) -> bool:
    if shape is not None:
        return shape.param_estimate.expert > 0
    rec = recipe.recipe if recipe else None
    if rec is not None and rec.compatible_strategies is not None:
        return any("ep" in s.split("_")[-1] for s in rec.compatible_strategies.value)
    return False


def search_layouts(
    req: PlanRequest,
    shape: ModelShape | None,
    recipe: RecipeBaseline | None,
    *,
    gmu_given: bool = True,
    max_model_len_given: bool = True,
    hardware_key: str | None = None,
) -> LayoutSearch:
    per_node = req.gpus_per_node
    moe = _is_moe(shape, recipe)
    notes: list[str] = []
    evaluated = 0
    expert_share_known = shape is not None and shape.param_estimate.expert > 0

    def evaluate(counts: list[int]) -> list[Candidate]:
        nonlocal evaluated
        found: list[Candidate] = []
        skipped_ep = False
        for n in counts:
            for tp, pp, dp, ep in enumerate_layouts(n, shape, moe):
                topo = Topology(tp=tp, pp=pp, dp=dp, ep=ep, gpus_per_node=per_node)
                strategy, _ = strategy_for(topo)
                if not _recipe_allows(recipe, strategy, n, hardware_key, req.gpu.family):
                    continue
                if ep and dp > 1 and not expert_share_known:
                    skipped_ep = True
                    continue
                gmu, mml, src = profile_values(recipe, strategy, hardware_key, req.gpu.family)
                trial = replace(
                    req,
                    gpus=n,
                    tp=tp,
                    pp=pp,
                    dp=dp,
                    ep=ep,
                    gpu_memory_utilization=req.gpu_memory_utilization if gmu_given or gmu is None else gmu,
                    max_model_len=req.max_model_len if max_model_len_given or mml is None else mml,
                )
                evaluated += 1
                res = plan(trial, shape, recipe)
                if res.fits:
                    nodes, _ = topo.node_count()
                    found.append(
                        Candidate(
                            tp, pp, dp, ep, n, nodes or 1, strategy, res,
                            trial.gpu_memory_utilization, trial.max_model_len,
                            src if (not gmu_given or not max_model_len_given) and src else "",
                        )
                    )  # fmt: skip
        if skipped_ep:
            notes.append(
                "expert-parallel layouts with DP > 1 were not ranked: without config.json the share of the "
                "weights that EP spreads over the DP ranks is unknown (pass --config)"
            )
        return found

    found = evaluate(layout_counts(req.gpus, per_node))
    within = bool(found)
    if not found:
        found = evaluate(layout_counts(per_node * MAX_NODES, per_node, start=req.gpus + 1))
    found.sort(key=lambda c: (c.gpus, c.strategy is None, -c.margin, c.tp > per_node, c.pp, c.dp, c.ep))
    # one entry per (gpus, label): the same layout under two strategies adds nothing
    seen: set[tuple[int, str]] = set()
    unique = []
    for c in found:
        if (c.gpus, c.label()) not in seen:
            seen.add((c.gpus, c.label()))
            unique.append(c)
    return LayoutSearch(unique, within, req.gpus, evaluated, notes)


def _recipe_allows(
    recipe: RecipeBaseline | None, strategy: str | None, n: int, hardware: str | None, family: str
) -> bool:
    rec = recipe.recipe if recipe else None
    if rec is None or (rec.compatible_strategies is None and not rec.strategy_hardware):
        return True
    if strategy is None:
        return False
    ok, _ = rec.strategy_allowed(strategy, hardware, family or None)
    if not ok:
        return False
    floors = rec.strategy_min_gpus.value if rec.strategy_min_gpus else {}
    return n >= floors.get(strategy, 0)


def profile_values(
    recipe: RecipeBaseline | None, strategy: str | None, hardware: str | None, family: str
) -> tuple[float | None, int | None, str]:
    rec = recipe.recipe if recipe else None
    if rec is None or rec.official is None or strategy is None:
        return None, None, ""
    from vllm_medic.recipes.profile import resolve_profile

    prof = resolve_profile(rec.official, strategy, hardware, family or None)
    gmu_s, mml_s = prof.args.get("gpu_memory_utilization"), prof.args.get("max_model_len")
    gmu = _last_float(gmu_s.value) if gmu_s else None
    mml = _last_int(mml_s.value) if mml_s else None
    src = "; ".join(
        f"--{s.key.replace('_', '-')} {s.value} ({s.layer})" for s in (gmu_s, mml_s) if s is not None
    )
    return gmu, mml, f"recipe profile {strategy}/{family}: {src}" if src else ""


def _last_float(v: Any) -> float | None:
    v = v[-1] if isinstance(v, list) and v else v
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def _last_int(v: Any) -> int | None:
    f = _last_float(v)
    return None if f is None or not math.isfinite(f) else int(f)
