"""other: the launch against an official recipe's profile for this strategy and hardware."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from vllm_medic.checks.facts import Facts
from vllm_medic.checks.launch_topology import StrategyChoice, choose_strategy
from vllm_medic.checks.registry import Rule, rule
from vllm_medic.model import Finding
from vllm_medic.recipes.model import Recipe
from vllm_medic.recipes.profile import Setting, resolve_profile
from vllm_medic.recipes.strategy import Topology

if TYPE_CHECKING:
    from vllm_medic.plan.gpus import GpuSpec


def _norm(value: Any) -> Any:
    """Compare JSON-valued flags by content: '{"a":1}' equals {"a": 1}."""
    if isinstance(value, list) and value:
        return _norm(value[-1])  # a repeated flag: vLLM's argparse keeps the last
    if isinstance(value, str):
        try:
            return _norm(json.loads(value))
        except ValueError:
            return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _flag(dest: str, value: Any) -> str:
    name = dest.replace("_", "-")
    if isinstance(value, list) and value:
        value = value[-1]
    if value is True:
        return f"--{name}"
    if value is False:
        return f"--no-{name}"
    if isinstance(value, dict | list):
        value = json.dumps(value, separators=(",", ":"))
    return f"--{name} {value}"


@rule(
    "REC001",
    "other",
    "Launch follows the official recipe's profile for this strategy and hardware",
    "The recipe's profile (base_args + strategy + hardware overrides, the last layer winning) is what was "
    "verified; a flag or env it sets that the launch lacks (or sets differently) is an unverified deviation. "
    "The strategy is the one the launch's topology is (nodes x TP x PP x DP x EP), unless --strategy says.",
    [
        "Add the missing flags/env, or note why the deployment deviates.",
        "Pass --strategy/--hardware to pick the profile.",
    ],
    ["https://recipes.vllm.ai/"],
    by_hand="render the command on recipes.vllm.ai for your hardware and strategy and diff it with yours",
)
def follows_profile(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    off = recipe.official
    if off is None:
        return [
            r.not_applicable(
                f"Recipe {recipe.name} has no official launch profile to compare",
                ["load an official vllm-project/recipes model file with --recipe PATH to compare"],
            )
        ]
    if not facts.launch_known:
        return [
            r.not_checked(
                "Launch not known: recipe profile not compared", [facts.unread("launch") or "no launch"]
            )
        ]
    choice = choose_strategy(facts, recipe)
    strategy = choice.name
    hw, family = facts.hardware(), facts.family()
    ev = [f"recipe {off.path}", choice.evidence(), f"hardware {hw or '?'} ({family or '?'})"]
    if strategy:
        ok, why = recipe.strategy_allowed(strategy, hw, family)
        if not ok:
            return [
                r.finding(
                    "warn",
                    f"Strategy {strategy} is not supported by the recipe on {hw or 'this hardware'}",
                    ev + [why],
                )
            ]
    topo = choice.topology
    prof = resolve_profile(
        off, strategy, hw, family, topo.pd_role if topo and strategy == "pd_cluster" else None
    )
    ev.append("profile layers: " + ", ".join(prof.layers))
    diffs = []
    for dest, setting in prof.args.items():
        have = facts.arg(dest)
        if have is None:
            diffs.append(f"missing {_flag(dest, setting.value)} ({setting.provenance()})")
        elif _norm(have) != _norm(setting.value):
            diffs.append(
                f"{_flag(dest, have)} (recipe: {_flag(dest, setting.value)}, {setting.provenance()})"
            )
    for k, setting in prof.env.items():
        v = str(setting.value)
        if v.startswith("$"):
            continue
        have, _ = facts.env(k)
        if have is None:
            diffs.append(f"missing env {k}={v} ({setting.provenance()})")
        elif have != v:
            diffs.append(f"env {k}={have} (recipe: {v}, {setting.provenance()})")
    label = f"{strategy or 'no strategy'} on {hw or '?'}"
    if diffs:
        return [
            r.finding(
                "info",
                f"Launch deviates from the recipe profile ({label}) in {len(diffs)} setting(s)",
                ev + diffs,
                [f"Align or document: {d}" for d in diffs[:6]],
            )
        ]
    return [r.finding("pass", f"Launch matches the recipe profile ({label})", ev)]


def _model_context(facts: Facts, recipe: Recipe) -> tuple[int | None, str]:
    """vLLM's --max-model-len default: the model's context length (config.json, else the recipe's)."""
    cfg = facts.model_config or {}
    from vllm_medic.plan.shape import text_config

    value = text_config(cfg).get("max_position_embeddings") if isinstance(cfg, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value, "the model's max_position_embeddings (config.json), vLLM's default --max-model-len"
    if recipe.context_length is not None:
        return int(recipe.context_length.value), (
            f"the model's context length, vLLM's default --max-model-len ({recipe.context_length.source})"
        )
    return None, "the model's context length is unknown"


def _gpu_spec(facts: Facts, hw: str) -> GpuSpec | None:
    """The GPU as the driver reports it (nvidia-smi's MiB total) when collected, else the plan's table."""
    from vllm_medic.errors import UsageError
    from vllm_medic.plan.gpus import GB, GpuSpec, lookup_gpu

    try:
        spec = lookup_gpu(hw)
    except UsageError:
        spec = None
    mib = next((g.memory_total_mib for g in facts.snapshot.gpus if g.memory_total_mib), None)
    if mib:
        return GpuSpec(
            name=hw.upper(),
            memory_gb=mib * 2**20 / GB,
            reported_mib=mib,
            family=spec.family if spec else "",
            source=f"{facts.where('nvidia-smi', 'MiB')} {mib} MiB",
        )
    return spec


@rule(
    "REC002",
    "oom_startup",
    "--max-model-len fits the KV budget of the hardware profile",
    "vLLM refuses to start when one --max-model-len request does not fit the KV cache, and without the flag "
    "it takes the model's full context (1M tokens for Kimi K3). The recipe sizes --max-model-len per GPU "
    "generation (Hopper 32,768; Blackwell 1,048,576 with fp8 KV) for that hardware's KV budget.",
    [
        "Pass the --max-model-len of the recipe's profile for this hardware (or what `vllm-medic plan` says fits).",
        "Pass --model with the model's config.json to compute the exact limit for this layout.",
    ],
    ["https://docs.vllm.ai/en/latest/configuration/conserving_memory/"],
    by_hand="read 'GPU KV cache size' and 'Maximum concurrency' in the server log at startup",
)
def max_model_len_budget(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    if not facts.launch_known:
        return [
            r.finding(
                "not_checked",
                "Launch not known: --max-model-len not compared with the KV budget",
                ["no launch"],
                ["Pass --launch (the serve command) to compare it."],
            )
        ]
    hw, family = facts.hardware(), facts.family()
    choice = choose_strategy(facts, recipe)
    topo = choice.topology
    effective, src = _effective_max_model_len(facts, recipe)
    ev = [src, choice.evidence(), f"hardware {hw or '?'} ({family or '?'})"]
    if effective is None:
        return [
            r.finding(
                "not_checked",
                "--max-model-len not set and the model's context length is unknown",
                ev,
                ["Pass --model (config.json) or set --max-model-len in the launch."],
            )
        ]
    profile = _profile_max_model_len(recipe, choice, hw, family)
    prof_len = profile[0] if profile else None
    if profile is not None:
        ev.append(
            f"recipe profile for {family or hw}: --max-model-len {profile[0]} ({profile[1].provenance()})"
        )
    computed = _kv_limit(facts, recipe, hw, topo, effective) if hw and topo else None
    if computed is not None:
        fits, limit, kv_ev = computed
        return [_against_kv_cache(r, ev + kv_ev, effective, fits, limit, prof_len, hw)]
    ev.append("KV bytes per token not computed: no config.json (pass --model MODEL_DIR)")
    if profile is None:
        return [
            r.finding(
                "not_checked",
                f"KV budget for --max-model-len {effective:,} not checked",
                ev,
                [
                    "Pass --model with the model's config.json (KV bytes per token), or an official recipe file "
                    "(--recipe PATH) whose hardware profile sets --max-model-len."
                ],
            )
        ]
    return [_against_profile(r, ev, effective, profile, hw, family, topo)]


def _effective_max_model_len(facts: Facts, recipe: Recipe) -> tuple[int | None, str]:
    """The launch's --max-model-len, else the model's context length vLLM takes without it."""
    from vllm_medic.checks.launch_topology import _last

    launch_len = _last(facts.arg("max_model_len"))
    if launch_len is None:
        model_len, model_src = _model_context(facts, recipe)
        return model_len, f"--max-model-len not set: {model_src}"
    try:
        return int(launch_len), f"{facts.launch_where('--max-model-len')}: --max-model-len {launch_len}"
    except (TypeError, ValueError):
        return None, f"--max-model-len {launch_len!r} is not a number"


def _profile_max_model_len(
    recipe: Recipe, choice: StrategyChoice, hw: str | None, family: str | None
) -> tuple[int, Setting] | None:
    """(the --max-model-len the recipe's profile for this hardware sets, its setting), when it sets a number."""
    from vllm_medic.checks.launch_topology import _last

    if recipe.official is None or not hw:
        return None
    topo = choice.topology
    prof = resolve_profile(recipe.official, choice.name, hw, family, topo.pd_role if topo else None)
    setting = prof.args.get("max_model_len")
    if setting is None:
        return None
    try:
        return int(_last(setting.value)), setting
    except (TypeError, ValueError):
        return None


def _against_kv_cache(
    r: Rule, ev: list[str], effective: int, fits: bool, limit: int, prof_len: int | None, hw: str | None
) -> Finding:
    """The plan's arithmetic (config.json given): does one request of this length fit the KV cache?"""
    if fits:
        return r.finding("pass", f"One {effective:,}-token request fits the KV cache ({limit:,} tokens)", ev)
    want = prof_len if prof_len is not None and prof_len <= limit else limit
    return r.finding(
        "fail",
        f"--max-model-len {effective:,} does not fit the KV cache on {hw}: at most {limit:,} tokens",
        ev,
        [
            f"Pass --max-model-len {want}"
            + (
                " (the recipe's profile for this hardware)"
                if want == prof_len
                else " (what this KV cache holds)"
            )
            + ".",
            "Or use --kv-cache-dtype fp8, or more GPUs (`vllm-medic plan` searches the layouts that fit).",
        ],
    )


def _against_profile(
    r: Rule,
    ev: list[str],
    effective: int,
    profile: tuple[int, Setting],
    hw: str | None,
    family: str | None,
    topo: Topology | None,
) -> Finding:
    """No config.json: the recipe's hardware profile is the budget."""
    prof_len, prof_setting = profile
    if effective > prof_len:
        return r.finding(
            "fail",
            f"--max-model-len {effective:,} exceeds the {prof_len:,} the recipe's {family or hw} profile "
            "sets for this hardware's KV budget",
            ev,
            [
                f"Pass --max-model-len {prof_len} (the recipe's {family or hw} profile: {prof_setting.layer}).",
                "To go longer, compute the limit: `vllm-medic plan --config MODEL_DIR --gpu "
                f"{(hw or 'GPU').upper()} --tp {topo.tp if topo else 1} --pp {topo.pp if topo else 1}"
                f"{f' --dp {topo.dp}' if topo and topo.dp > 1 else ''} --max-model-len {effective}`.",
            ],
        )
    return r.finding(
        "pass",
        f"--max-model-len {effective:,} is within the {prof_len:,} of the recipe's {family or hw} profile",
        ev,
    )


def _kv_limit(
    facts: Facts, recipe: Recipe, hw: str, topo: Topology, effective: int
) -> tuple[bool, int, list[str]] | None:
    """(fits, longest request that fits, evidence) from the plan's arithmetic, or None without a config."""
    if not facts.model_config:
        return None
    from dataclasses import replace

    from vllm_medic.checks.launch_topology import _last
    from vllm_medic.plan.capacity import DEFAULT_GPU_MEMORY_UTILIZATION, PlanRequest, plan
    from vllm_medic.plan.gpus import GB, GIB
    from vllm_medic.plan.shape import DTYPE_BYTES, parse_model_config

    try:
        shape = parse_model_config(facts.model_config)
    except ValueError:
        return None
    gpu = _gpu_spec(facts, hw)
    if gpu is None:
        return None
    gmu_raw = _last(facts.arg("gpu_memory_utilization"))
    try:
        gmu = float(gmu_raw) if gmu_raw is not None else DEFAULT_GPU_MEMORY_UTILIZATION
    except (TypeError, ValueError):
        gmu = DEFAULT_GPU_MEMORY_UTILIZATION
    kv_dtype = str(_last(facts.arg("kv_cache_dtype")) or "auto").lower()
    if kv_dtype != "auto" and kv_dtype not in DTYPE_BYTES:
        return None
    req = PlanRequest(
        gpu=gpu,
        gpus=topo.world,
        gpus_per_node=topo.per_node() or 8,
        tp=topo.tp,
        pp=topo.pp,
        dp=topo.dp,
        ep=topo.ep,
        gpu_memory_utilization=gmu,
        max_model_len=effective,
        kv_cache_dtype=kv_dtype,
        dtype=str(_last(facts.arg("dtype")) or "auto").lower(),
        block_size=facts.int_arg("block_size", 16) or 16,
        weights_bytes=int(recipe.weights.value * GB) if recipe.weights else None,
        weights_basis=f"recipe weight footprint {recipe.weights.value:g} GB" if recipe.weights else "",
    )
    try:
        res = plan(replace(req), shape, None)
    except ValueError:
        return None
    if not res.weights_fit or res.kv_bytes_per_token is None or res.kv_cache_bytes_per_gpu is None:
        return None
    ev = [
        f"{gpu.source or gpu.name} x --gpu-memory-utilization {gmu:g}: KV cache {res.kv_cache_bytes_per_gpu / GIB:.2f} "
        f"GiB per GPU, {res.kv_bytes_per_token:,} KV bytes per token ({res.kv_cache_dtype}), TP {topo.tp} x PP {topo.pp}",
        f"longest request that fits: {res.max_model_len_that_fits:,} tokens (vllm-medic plan arithmetic)",
    ]
    return bool(res.kv_fits_one_request), int(res.max_model_len_that_fits or 0), ev
