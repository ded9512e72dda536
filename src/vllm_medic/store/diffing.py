"""What changed between two stored runs: environment first (the usual culprit), then results."""

from __future__ import annotations

from typing import Any

from vllm_medic.redact import redact_argv
from vllm_medic.store import views

ENV_FIELDS = ("driver", "cuda", "image", "image_digest", "vllm", "gpu_count", "gpus", "topology", "host")
LEVEL_METRICS: tuple[tuple[str, str | None, str], ...] = (
    ("ttft", "p50", "ttft_p50_ms"),
    ("ttft", "p99", "ttft_p99_ms"),
    ("tpot", "p50", "tpot_p50_ms"),
    ("tpot", "p99", "tpot_p99_ms"),
    ("itl", "p99", "itl_p99_ms"),
    ("e2e", "p50", "e2e_p50_ms"),
    ("e2e", "p99", "e2e_p99_ms"),
    ("output_tokens_per_s", None, "output_tokens_per_s"),
    ("requests_per_s", None, "requests_per_s"),
    ("errors", None, "errors"),
)
# For these a higher value is better; for latencies and errors lower is better.
HIGHER_IS_BETTER = {
    "output_tokens_per_s",
    "requests_per_s",
    "max_sustainable_concurrency",
    "prefix_hit_ratio",
}


def _change(a: float | None, b: float | None, name: str) -> dict[str, Any]:
    row: dict[str, Any] = {"a": a, "b": b, "change_pct": None, "worse": None}
    if a is not None and b is not None:
        if a:
            row["change_pct"] = round((b - a) / abs(a) * 100.0, 1)
        if a != b:
            row["worse"] = (b < a) if name in HIGHER_IS_BETTER else (b > a)
        else:
            row["worse"] = False
    return row


def _level_value(lv: views.Level, metric: str, pct: str | None) -> float | None:
    if pct is not None:
        return lv.latency_ms.get(metric, {}).get(pct)
    v = getattr(lv, metric)
    return float(v) if v is not None else None


def _run_head(run: dict[str, Any]) -> dict[str, Any]:
    return {k: run.get(k) for k in ("run_id", "kind", "target", "status", "verdict", "started_at")}


def diff_runs(
    a: dict[str, Any], a_snapshot: dict[str, Any] | None, b: dict[str, Any], b_snapshot: dict[str, Any] | None
) -> dict[str, Any]:
    env_a, env_b = views.environment(a, a_snapshot), views.environment(b, b_snapshot)
    env_changed, env_same = [], []
    for f in ENV_FIELDS:
        if env_a[f] != env_b[f]:
            env_changed.append({"field": f, "a": env_a[f], "b": env_b[f]})
        elif env_a[f] not in (None, "", []):
            env_same.append(f)
    args_a, args_b = redact_argv(env_a["launch_args"]), redact_argv(env_b["launch_args"])
    launch = {
        "changed": args_a != args_b,
        "removed": [x for x in args_a if x not in args_b],
        "added": [x for x in args_b if x not in args_a],
    }

    names = [s["name"] for s in a.get("steps") or []]
    names += [s["name"] for s in b.get("steps") or [] if s["name"] not in names]
    steps = []
    for n in names:
        sa, sb = views.step(a, n), views.step(b, n)
        st_a, st_b = (sa or {}).get("status"), (sb or {}).get("status")
        steps.append({"name": n, "a": st_a, "b": st_b, "changed": st_a != st_b})

    levels_a = {lv.concurrency: lv for lv in views.ramp_levels(a)}
    levels_b = {lv.concurrency: lv for lv in views.ramp_levels(b)}
    per_level = []
    for c in sorted(set(levels_a) | set(levels_b)):
        la, lb = levels_a.get(c), levels_b.get(c)
        metrics = {}
        for metric, pct, key in LEVEL_METRICS:
            va = _level_value(la, metric, pct) if la else None
            vb = _level_value(lb, metric, pct) if lb else None
            if va is not None or vb is not None:
                metrics[key] = _change(va, vb, metric)
        per_level.append(
            {
                "concurrency": c,
                "status": {"a": la.status if la else None, "b": lb.status if lb else None},
                "metrics": metrics,
            }
        )

    msc_a, msc_b = views.max_sustainable_concurrency(a), views.max_sustainable_concurrency(b)
    hr_a, hr_b = views.prefix_hit_ratio(a), views.prefix_hit_ratio(b)
    return {
        "a": _run_head(a),
        "b": _run_head(b),
        "environment": {"changed": env_changed, "unchanged": env_same, "launch_args": launch},
        "steps": steps,
        "results": {
            "verdict": {"a": a.get("verdict"), "b": b.get("verdict")},
            "max_sustainable_concurrency": _change(
                float(msc_a) if msc_a is not None else None,
                float(msc_b) if msc_b is not None else None,
                "max_sustainable_concurrency",
            ),
            "prefix_hit_ratio": _change(hr_a, hr_b, "prefix_hit_ratio"),
            "levels": per_level,
        },
    }
