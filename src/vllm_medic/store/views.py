"""What the acceptance sheet and `diff` read out of a stored run (pure functions over ``Store.get_run``).

The writer (``accept``) owns the measurements; these functions read the canonical shapes below and
tolerate a few aliases, so a missing or renamed field leaves a blank on the sheet, never a crash.

ramp — step ``data`` (or events of kind ``ramp_level``, one payload per concurrency level)::

    {"levels": [{"concurrency": 4, "status": "ok|broken|invalid", "reason": "...",
                 "requests": 32, "errors": 0 | {"http_5xx": 1, ...}, "timeouts": 0,
                 "ttft_ms": {"p50": .., "p90": .., "p99": ..}, "tpot_ms": {...}, "itl_ms": {...},
                 "e2e_ms": {...},
                 "throughput": {"requests_per_s": .., "output_tokens_per_s": ..},
                 "kv_cache_usage_max": 0.42, "preemptions": 0, "gpu_memory_peak_mib": ..}],
     "max_sustainable_concurrency": 8, "stop_reason": "KV cache full at concurrency 16"}

soak — step ``data["samples"]`` (or events of kind ``soak_sample``)::

    {"t_s": 12.0, "kv_cache_usage": 0.31, "e2e_p99_ms": 812.0, "errors": 0, "gpu_memory_mib": 70123}

prefix_reuse — step ``data``: ``hit_ratio`` (0..1), or ``hits_delta`` and ``queries_delta``.

archive — attachment ``snapshot.json`` (``Snapshot.to_dict()``) and/or step ``data`` with
``driver_version``, ``cuda_version``, ``image`` {``tag``, ``digest``}, ``vllm_version``, ``gpus``
(names), ``topology`` (``nvidia-smi topo -m`` text), ``launch_args`` (argv list), ``key_log_lines``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")
PERCENTILES = ("p50", "p90", "p95", "p99")
OK_LEVEL_STATUSES = ("ok", "pass", "passed", "warn")
SHEET_EVENT_KINDS = ("ramp_level", "ramp_step", "soak_sample")  # the event kinds these views read


@dataclass
class Level:
    concurrency: int
    status: str = "ok"
    reason: str = ""
    requests: int | None = None
    errors: int | None = None
    timeouts: int | None = None
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)  # metric -> p50/p90/p95/p99
    requests_per_s: float | None = None
    output_tokens_per_s: float | None = None
    kv_cache_usage_max: float | None = None
    preemptions: int | None = None
    queue_max: int | None = None
    gpu_memory_peak_mib: float | None = None
    restarts: int | None = None


@dataclass
class SoakSample:
    t_s: float
    kv_cache_usage: float | None = None
    e2e_p99_ms: float | None = None


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float | str):
        try:
            f = float(v)
        except (ValueError, OverflowError):
            return None
        return f if math.isfinite(f) else None  # NaN / inf are not measurements
    return None


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _first(d: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return None


def step(run: dict[str, Any], name: str) -> dict[str, Any] | None:
    for s in run.get("steps") or []:
        if s.get("name") == name:
            return s
    return None


def _step_data(run: dict[str, Any], name: str) -> dict[str, Any]:
    s = step(run, name)
    data = s.get("data") if s else None
    return data if isinstance(data, dict) else {}


def _event_payloads(run: dict[str, Any], *kinds: str) -> list[dict[str, Any]]:
    return [
        e["payload"]
        for e in run.get("events") or []
        if e.get("kind") in kinds and isinstance(e.get("payload"), dict)
    ]


def _percentiles(level: dict[str, Any], metric: str) -> dict[str, float]:
    scale = 1.0
    raw = _first(level, f"{metric}_ms", metric)
    if raw is None and isinstance(level.get("latency_ms"), dict):
        raw = level["latency_ms"].get(metric)
    if raw is None and isinstance(level.get(f"{metric}_s"), dict):
        raw, scale = level[f"{metric}_s"], 1000.0
    out: dict[str, float] = {}
    if isinstance(raw, dict):
        for p in PERCENTILES:
            v = _num(_first(raw, p, p[1:], f"{p}_ms"))
            if v is None and p == "p50":
                v = _num(raw.get("median"))
            if v is not None:
                out[p] = v * scale
    for p in PERCENTILES:  # flat keys: ttft_p99_ms
        v = _num(level.get(f"{metric}_{p}_ms"))
        if v is not None and p not in out:
            out[p] = v
    return out


def _count(v: Any) -> int | None:
    if isinstance(v, dict):
        nums = [_num(x) for x in v.values()]
        return int(sum(n for n in nums if n is not None))
    n = _num(v)
    return int(n) if n is not None else None


def _fraction(v: Any) -> float | None:
    n = _num(v)
    if n is None:
        return None
    return n / 100.0 if n > 1.0 else n


def _level(raw: dict[str, Any]) -> Level | None:
    c = _num(_first(raw, "concurrency", "c", "level"))
    if c is None:
        return None
    tp = _dict(raw.get("throughput"))
    return Level(
        concurrency=int(c),
        status=str(_first(raw, "status", "verdict") or "ok"),
        reason=str(_first(raw, "reason", "stop_reason") or ""),
        requests=_count(_first(raw, "requests", "n_requests", "completed")),
        errors=_count(_first(raw, "errors", "errors_by_kind", "error_count")),
        timeouts=_count(raw.get("timeouts")),
        latency_ms={m: p for m in LATENCY_METRICS if (p := _percentiles(raw, m))},
        requests_per_s=_num(
            _first(tp, "requests_per_s", "req_s", "rps") or _first(raw, "requests_per_s", "rps")
        ),
        output_tokens_per_s=_num(
            _first(tp, "output_tokens_per_s", "output_tok_s", "tokens_per_s")
            or _first(raw, "output_tokens_per_s", "throughput_tok_s", "tokens_per_s")
        ),
        kv_cache_usage_max=_fraction(
            _first(raw, "kv_cache_usage_max", "kv_cache_usage_peak", "kv_cache_usage")
        ),
        preemptions=_count(raw.get("preemptions")),
        queue_max=_count(_first(raw, "queue_max", "waiting_max")),
        gpu_memory_peak_mib=_num(raw.get("gpu_memory_peak_mib")),
        restarts=_count(_first(raw, "engine_restarts", "worker_restarts", "restarts")),
    )


def ramp_levels(run: dict[str, Any]) -> list[Level]:
    data = _step_data(run, "ramp")
    raw = _first(data, "levels", "steps", "results", "concurrency_steps")
    if not isinstance(raw, list):
        raw = _event_payloads(run, "ramp_level", "ramp_step")
    by_c: dict[int, Level] = {}
    for item in raw:
        if isinstance(item, dict) and (lv := _level(item)) is not None:
            by_c[lv.concurrency] = lv  # a level re-recorded later wins
    return [by_c[c] for c in sorted(by_c)]


def max_sustainable_concurrency(run: dict[str, Any]) -> int | None:
    data = _step_data(run, "ramp")
    v = _num(_first(data, "max_sustainable_concurrency", "max_ok_concurrency"))
    if v is not None:
        return int(v)
    ok = [lv.concurrency for lv in ramp_levels(run) if lv.status.lower() in OK_LEVEL_STATUSES]
    return max(ok) if ok else None


def concurrency_text(run: dict[str, Any]) -> str:
    """ "8" when the ramp found a limit; "≥ 4 (highest tried)" when every level held (no limit found)."""
    data = _step_data(run, "ramp")
    msc = max_sustainable_concurrency(run)
    if data.get("limit_found") is False:
        top = _num(data.get("highest_tried"))
        top = int(top) if top is not None else msc
        return f"≥ {top} (highest tried)" if top is not None else "–"
    return str(msc) if msc is not None else "–"


def environment_verdict(run: dict[str, Any]) -> dict[str, Any]:
    """The archive step's environment verdict (preflight + live cross-checks), or not_verified."""
    env = _step_data(run, "archive").get("environment")
    if isinstance(env, dict) and env.get("status"):
        return env
    return {"status": "not_verified", "reason": "no environment was archived and checked", "findings": []}


def ramp_stop_reason(run: dict[str, Any]) -> str:
    return str(_first(_step_data(run, "ramp"), "stop_reason", "reason") or "")


def soak_samples(run: dict[str, Any]) -> list[SoakSample]:
    data = _step_data(run, "soak")
    raw = data.get("samples")
    if not isinstance(raw, list):
        raw = _event_payloads(run, "soak_sample")
    out = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        t = _num(_first(item, "t_s", "t", "elapsed_s"))
        if t is None:
            continue
        out.append(
            SoakSample(
                t_s=t,
                kv_cache_usage=_fraction(_first(item, "kv_cache_usage", "kv_cache_usage_perc", "kv_usage")),
                e2e_p99_ms=_num(_first(item, "e2e_p99_ms", "p99_ms")),
            )
        )
    return sorted(out, key=lambda s: s.t_s)


def prefix_hit_ratio(run: dict[str, Any]) -> float | None:
    data = _step_data(run, "prefix_reuse")
    v = _num(_first(data, "hit_ratio", "prefix_cache_hit_ratio", "hit_rate"))
    if v is not None:
        return v
    hits = _num(_first(data, "hits_delta", "hits"))
    queries = _num(_first(data, "queries_delta", "queries"))
    if hits is not None and queries:
        return hits / queries
    return None


def _topology_text(topo: Any) -> str:
    if isinstance(topo, str):
        return topo
    matrix = _dict(_dict(topo).get("matrix"))
    if not matrix:
        return ""
    devices = _dict(topo).get("devices")
    devices = [str(d) for d in devices] if isinstance(devices, list) and devices else [str(k) for k in matrix]
    rows = ["\t".join(["", *devices])]
    for r in devices:
        row = _dict(matrix.get(r))
        rows.append("\t".join([r, *(str(row.get(c, "")) for c in devices)]))
    return "\n".join(rows)


def environment(run: dict[str, Any], snapshot: dict[str, Any] | None) -> dict[str, Any]:
    """One flat record of what the run ran on; archive step data wins over the snapshot (it is the
    server's own view), the snapshot fills the rest. Values: str, int, list[str] or None."""
    snap = _dict(snapshot)
    arch = _step_data(run, "archive")
    meta = _dict(run.get("meta"))
    drv, img, vl = _dict(snap.get("driver")), _dict(snap.get("image")), _dict(snap.get("vllm"))
    arch_img = _dict(arch.get("image"))
    snap_gpus = snap.get("gpus")
    gpus_snap = (
        [g.get("name") or "?" for g in snap_gpus if isinstance(g, dict)]
        if isinstance(snap_gpus, list)
        else []
    )
    arch_gpus = arch.get("gpus")
    listed: list[object] = arch_gpus if isinstance(arch_gpus, list) else gpus_snap
    gpus = [str(g.get("name", g)) if isinstance(g, dict) else str(g) for g in listed]
    declared = _num(arch.get("gpu_count"))
    gpu_count = int(declared) if declared else (len(gpus) if gpus else None)
    launch = (
        _first(arch, "launch_args", "argv")
        or _dict(snap.get("launch")).get("argv")
        or meta.get("launch_args")
    )
    if isinstance(launch, str):
        launch = launch.split()
    logs = arch.get("key_log_lines") or meta.get("key_log_lines") or []
    return {
        "driver": _first(arch, "driver_version") or drv.get("version"),
        "cuda": _first(arch, "cuda_version") or drv.get("cuda_version"),
        "image": _first(arch_img, "tag") or arch.get("image_tag") or img.get("tag"),
        "image_digest": _first(arch_img, "digest") or arch.get("image_digest") or img.get("digest"),
        "vllm": _first(arch, "vllm_version", "server_version") or vl.get("raw") or vl.get("version"),
        "gpu_count": gpu_count,
        "gpus": sorted(set(gpus)) if gpus else [],
        "topology": _topology_text(arch.get("topology")) or _topology_text(snap.get("topology")),
        "launch_args": [str(a) for a in launch] if isinstance(launch, list) else [],
        "host": _dict(snap.get("host")).get("hostname") or snap.get("node") or run.get("host"),
        "key_log_lines": [str(x) for x in logs] if isinstance(logs, list) else [str(logs)],
    }


def load_snapshot(raw: bytes | None) -> dict[str, Any] | None:
    if not raw:
        return None
    try:
        data = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None
