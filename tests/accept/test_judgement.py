"""The pure judgement functions of the ramp and soak, on hand-built measurements (synthetic inputs)."""

from __future__ import annotations

from vllm_medic.accept.step_ramp import break_reason, ramp_findings
from vllm_medic.accept.step_soak import judge_soak, least_squares_slope


def _level(c: int, **over):
    lv = {
        "concurrency": c, "status": "ok", "requests": 32, "ok": 32, "errors": {}, "error_count": 0,
        "timeouts": 0, "health_failures": [], "self_check": {"valid": True}, "kv_cache_usage_max": 0.1,
        "preemptions": 0, "queue_max": 0, "ttft_ms": None, "e2e_ms": None, "throughput": {},
        "error_examples": [],
    }  # fmt: skip
    lv.update(over)
    return lv


def test_health_flaps_in_held_levels_are_a_warning():
    levels = [
        _level(1),
        _level(2, health_failures=[{"t_s": 1.0, "status": None, "error_kind": "unreachable"}]),
    ]
    ids = [(f.id, f.severity.value) for f in ramp_findings(levels, 2, None, None)]
    assert ids == [("ACC-RAMP-000", "pass"), ("ACC-RAMP-007", "warn")]


def test_kv_cache_full_and_queueing_are_told_apart():
    kv = _level(16, errors={"http_5xx": 5}, error_count=5, kv_cache_usage_max=1.0, preemptions=12)
    assert break_reason(kv, 0.01, {})[0] == "kv_full"
    queued = _level(16, errors={"timeout": 6}, error_count=6, timeouts=6, queue_max=40)
    kind, why = break_reason(queued, 0.01, {})
    assert kind == "queueing" and "40 requests waiting" in why
    assert break_reason(_level(4, errors={"http_5xx": 1}, error_count=1, requests=200), 0.01, {}) is None


def test_p99_drift_needs_a_long_enough_soak():
    rising = [
        {"t_s": 30.0 * i, "requests": 100, "errors": 0, "e2e_p99_ms": 100.0 + 40.0 * i} for i in range(1, 11)
    ]
    assert least_squares_slope([(s["t_s"], s["e2e_p99_ms"]) for s in rising]) == 40.0 / 30.0
    ids = [f.id for f in judge_soak(rising, 300.0, 0.01, [])]
    assert "ACC-SOAK-003" in ids
    ids_short = [f.id for f in judge_soak(rising[:2], 20.0, 0.01, [])]
    assert "ACC-SOAK-003" not in ids_short and "ACC-SOAK-006" in ids_short
