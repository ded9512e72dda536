"""The environment verdict of an acceptance sheet: the preflight (`check` rules) over the archived
snapshot, and the archive cross-checked against what the live server says about itself.

Pure functions: the archive step gathers the snapshot and the server's answers, these judge them.
A mismatch between archive and server means the sheet would record an environment other than the one
measured, so it is a fail with the fix "archive the server you measured".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vllm_medic.model import Category, Finding, Severity, worst_severity
from vllm_medic.snapshot import Snapshot

if TYPE_CHECKING:
    from vllm_medic.collect.source_entry import SourceEntry

FIX_REARCHIVE = (
    "run `vllm-medic collect` on the host (or in the container) of the server you measured and pass that "
    "bundle with --bundle, or rerun accept there"
)


def preflight(
    snapshot: Snapshot,
    recipe_name: str,
    strategy: str | None,
    raw: dict[str, bytes] | None,
    sources: dict[str, SourceEntry] | None,
) -> tuple[list[Finding], str]:
    """`check`'s rules over the archived snapshot, with the recipe/strategy given to accept."""
    from vllm_medic.checks.api import run_checks
    from vllm_medic.recipes import load_recipe

    recipe = load_recipe(recipe_name)
    model_config = None
    extra_model = snapshot.extra.get("model")
    if isinstance(extra_model, dict) and extra_model.get("architectures"):
        model_config = extra_model
    findings = run_checks(
        snapshot, recipe, model_config=model_config, strategy=strategy, raw=raw, sources=sources
    )
    return findings, f"{recipe.name} ({recipe.source})"


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", "none"):
        return False
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, list | tuple) and value:
        value = value[-1]
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _mismatch(fid: str, title: str, evidence: list[str], fix: list[str]) -> Finding:
    return Finding(fid, Severity.FAIL, Category.OTHER, title, evidence, fix)


def cross_check(snapshot: Snapshot, server: dict[str, Any]) -> list[Finding]:
    """Archive vs live server: vLLM version, prefix caching, served model, max_model_len, GPU count."""
    found: list[Finding] = []
    args = snapshot.launch.args or {}
    live_version = str(server.get("vllm_version") or "") or None
    archived_version = snapshot.vllm.version or snapshot.vllm.raw
    if live_version and archived_version:
        base = live_version.split("+")[0]
        if base != str(archived_version).split("+")[0]:
            found.append(
                _mismatch(
                    "ACC-ENV-010", f"the archive says vLLM {archived_version}, the server says {live_version}",
                    [f"snapshot vllm.version: {archived_version}", f"GET /version: {live_version}"],
                    ["the bundle is not of the server measured: " + FIX_REARCHIVE],
                )
            )  # fmt: skip
    cache_rows = server.get("cache_config_info") or []
    live_pc = next(
        (_as_bool(r.get("enable_prefix_caching")) for r in cache_rows if "enable_prefix_caching" in r), None
    )
    launch_pc = _as_bool(args["enable_prefix_caching"]) if "enable_prefix_caching" in args else None
    if live_pc is not None and launch_pc is not None and live_pc != launch_pc:
        flag = "--enable-prefix-caching" if launch_pc else "--no-enable-prefix-caching"
        found.append(
            _mismatch(
                "ACC-ENV-011", f"the archived launch says {flag}, the server reports prefix caching "
                f"{'on' if live_pc else 'off'}",
                [f"launch ({snapshot.launch.source or 'snapshot'}): {flag}",
                 f"vllm:cache_config_info enable_prefix_caching={'True' if live_pc else 'False'}"],
                ["the archived launch is not the running one: " + FIX_REARCHIVE],
            )
        )  # fmt: skip
    live_models = [str(m.get("id")) for m in server.get("models") or [] if m.get("id")]
    served = args.get("served_model_name")
    launch_names = (
        [str(v) for v in served] if isinstance(served, list | tuple) else ([str(served)] if served else [])
    )
    if snapshot.launch.model and not launch_names:
        launch_names = [snapshot.launch.model]
    if live_models and launch_names and not set(live_models) & set(launch_names):
        found.append(
            _mismatch(
                "ACC-ENV-012", f"the archived launch serves {launch_names[0]}, the server lists {live_models[0]}",
                [f"launch model: {', '.join(launch_names)}", f"GET /v1/models: {', '.join(live_models)}"],
                ["the archived launch is not the running one: " + FIX_REARCHIVE],
            )
        )  # fmt: skip
    live_len = next(
        (_int(m.get("max_model_len")) for m in server.get("models") or [] if m.get("max_model_len")), None
    )
    launch_len = _int(args.get("max_model_len"))
    if live_len is not None and launch_len is not None and live_len != launch_len:
        found.append(
            _mismatch(
                "ACC-ENV-013", f"the archived launch says --max-model-len {launch_len}, the server {live_len}",
                [f"launch --max-model-len {launch_len}", f"GET /v1/models max_model_len: {live_len}"],
                ["the archived launch is not the running one: " + FIX_REARCHIVE],
            )
        )  # fmt: skip
    gpus = [g for g in snapshot.gpus if (g.vendor or "nvidia").lower() != "cpu"]
    tp = _int(args.get("tensor_parallel_size")) or 1
    pp = _int(args.get("pipeline_parallel_size")) or 1
    dp_local = _int(args.get("data_parallel_size_local")) or _int(args.get("data_parallel_size")) or 1
    ranks = tp * pp * dp_local
    nodes = _int(args.get("nnodes")) or 1
    if gpus and snapshot.launch.argv and nodes == 1 and pp == 1 and len(gpus) < ranks:
        found.append(
            _mismatch(
                "ACC-ENV-014", f"the launch needs {ranks} GPUs (TP {tp} x PP {pp} x DP {dp_local}), "
                f"the snapshot shows {len(gpus)}",
                [f"snapshot GPUs: {len(gpus)} ({', '.join(sorted({g.name for g in gpus}))})",
                 f"launch: tensor_parallel_size={tp} pipeline_parallel_size={pp} data_parallel_size={dp_local}"],
                ["archive the node(s) the server runs on (a multi-node server: one bundle per node), or fix the "
                 "launch's parallel sizes to the GPUs present"],
            )
        )  # fmt: skip
    return found


def summarise(checks: list[Finding], cross: list[Finding], recipe: str, origin: str) -> dict[str, Any]:
    """The environment section: status (pass / warn / fail) and the findings worth showing."""
    every = [*cross, *checks]
    worst = worst_severity(every) if every else Severity.PASS
    status = {"fail": "fail", "warn": "warn"}.get(worst.value, "pass")
    counts = {sev.value: 0 for sev in Severity}
    for f in every:
        counts[f.severity.value] += 1
    order = {Severity.FAIL: 0, Severity.WARN: 1, Severity.NOT_CHECKED: 2}
    shown = sorted((f for f in every if f.severity in order), key=lambda f: order[f.severity])
    return {
        "status": status,
        "recipe": recipe,
        "evidence_from": origin,
        "counts": counts,
        "cross_checks": [f.to_dict() for f in cross],
        "findings": [f.to_dict() for f in shown],
    }


def not_verified(reason: str) -> dict[str, Any]:
    return {"status": "not_verified", "reason": reason, "findings": [], "cross_checks": []}


def headline(env: dict[str, Any]) -> Finding:
    """One finding on the archive step for the environment verdict (its fails make the step fail)."""
    status = env.get("status")
    if status == "not_verified":
        return Finding(
            "ACC-ENV-000", Severity.NOT_CHECKED, Category.OTHER,
            "environment not verified: nothing was archived and checked",
            [str(env.get("reason") or "")],
            ["run `vllm-medic collect` on the server host and pass --bundle (with --recipe), or rerun accept there"],
        )  # fmt: skip
    bad = [Finding.from_dict(f) for f in env.get("findings") or []]
    fails = [f for f in bad if f.severity is Severity.FAIL]
    warns = [f for f in bad if f.severity is Severity.WARN]
    evidence = [f"{f.id} {f.severity.value}: {f.title}" for f in [*fails, *warns]][:20]
    fix = [x for f in fails for x in f.fix][:10]
    if status == "fail":
        return Finding(
            "ACC-ENV-001", Severity.FAIL, Category.OTHER,
            f"the environment fails: {len(fails)} failing check(s) (recipe {env.get('recipe')})", evidence, fix,
        )  # fmt: skip
    sev = Severity.WARN if status == "warn" else Severity.PASS
    c = env.get("counts") or {}
    return Finding(
        "ACC-ENV-002", sev, Category.OTHER,
        f"environment checked (recipe {env.get('recipe')}): {c.get('pass', 0)} pass, {c.get('warn', 0)} warn, "
        f"{c.get('not_checked', 0)} not checked, no fail",
        evidence or [f"evidence: {env.get('evidence_from')}"],
    )  # fmt: skip
