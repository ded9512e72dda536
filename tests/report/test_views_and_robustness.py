"""The sheet reads what the writer recorded, tolerates aliases, and never crashes on odd data."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_medic.report.html import render_sheet
from vllm_medic.store import views
from vllm_medic.store.diffing import diff_runs


def _run(steps: list[dict[str, Any]], events: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "run_id": "20261130T000000000000-abcdef",
        "kind": "accept",
        "target": "http://h:8000",
        "status": "finished",
        "verdict": "pass",
        "started_at": "2026-11-30T00:00:00Z",
        "steps": steps,
        "events": events or [],
        "attachments": [],
    }


def test_levels_from_step_data_with_aliases_and_units() -> None:
    run = _run(
        [
            {
                "name": "ramp",
                "status": "pass",
                "data": {
                    "steps": [
                        {
                            "concurrency": 2,
                            "ttft_s": {"p50": 0.1, "p99": 0.3},
                            "rps": 3.0,
                            "errors": {"reset": 1, "http_5xx": 2},
                        },
                        {"concurrency": 1, "ttft_p99_ms": 120.0, "throughput_tok_s": 50, "status": "ok"},
                        "not a level",
                        {"no_concurrency": True},
                    ]
                },
            }
        ]
    )
    levels = views.ramp_levels(run)
    assert [lv.concurrency for lv in levels] == [1, 2]
    assert levels[0].latency_ms["ttft"] == {"p99": 120.0}
    assert levels[0].output_tokens_per_s == 50.0
    assert levels[1].latency_ms["ttft"] == {"p50": 100.0, "p99": 300.0}  # seconds → ms
    assert levels[1].errors == 3 and levels[1].requests_per_s == 3.0
    assert views.max_sustainable_concurrency(run) == 2


def test_levels_and_soak_from_events_when_step_has_none() -> None:
    events = [
        {"kind": "ramp_level", "payload": {"concurrency": 4, "status": "broken", "reason": "KV cache full"}},
        {"kind": "ramp_level", "payload": {"concurrency": 2, "status": "ok"}},
        {"kind": "soak_sample", "payload": {"t_s": 20, "kv_cache_usage_perc": 55.0}},
        {"kind": "soak_sample", "payload": {"t_s": 10, "kv_cache_usage": 0.5}},
    ]
    run = _run([{"name": "ramp", "status": "running", "data": {}}], events)
    assert [(lv.concurrency, lv.status) for lv in views.ramp_levels(run)] == [(2, "ok"), (4, "broken")]
    assert views.max_sustainable_concurrency(run) == 2
    assert [(s.t_s, s.kv_cache_usage) for s in views.soak_samples(run)] == [(10.0, 0.5), (20.0, 0.55)]


def test_prefix_ratio_sources() -> None:
    assert views.prefix_hit_ratio(_run([{"name": "prefix_reuse", "data": {"hit_ratio": 0.5}}])) == 0.5
    assert (
        views.prefix_hit_ratio(
            _run([{"name": "prefix_reuse", "data": {"hits_delta": 30, "queries_delta": 40}}])
        )
        == 0.75
    )
    assert (
        views.prefix_hit_ratio(
            _run([{"name": "prefix_reuse", "data": {"hits_delta": 0, "queries_delta": 0}}])
        )
        is None
    )
    assert views.prefix_hit_ratio(_run([])) is None


def test_environment_prefers_archive_data_over_snapshot() -> None:
    run = _run(
        [
            {
                "name": "archive",
                "data": {
                    "driver_version": "580.1",
                    "image": {"digest": "sha256:aa"},
                    "launch_args": "vllm serve m --tp 8",
                },
            }
        ]
    )
    snap = {
        "driver": {"version": "570.0", "cuda_version": "12.8"},
        "image": {"tag": "img:1", "digest": "sha256:bb"},
        "gpus": [{"name": "H200"}, {"name": "H200"}],
    }
    env = views.environment(run, snap)
    assert (env["driver"], env["cuda"], env["image"], env["image_digest"]) == (
        "580.1",
        "12.8",
        "img:1",
        "sha256:aa",
    )
    assert env["gpu_count"] == 2 and env["gpus"] == ["H200"]
    assert env["launch_args"] == ["vllm", "serve", "m", "--tp", "8"]


class _Strict(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "concurrency",
                    "t_s",
                    "ttft_ms",
                    "p99",
                    "levels",
                    "samples",
                    "status",
                    "gpus",
                    "image",
                    "topology",
                    "launch_args",
                    "key_log_lines",
                    "hits_delta",
                    "queries_delta",
                    "x",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.dictionaries(
        st.sampled_from(["ramp", "soak", "prefix_reuse", "archive", "basic"]), json_values, max_size=5
    ),
    payloads=st.lists(json_values, max_size=6),
    snapshot=st.dictionaries(
        st.sampled_from(["driver", "image", "vllm", "gpus", "topology", "launch", "host", "node"]),
        json_values,
        max_size=6,
    ),
)
def test_any_recorded_data_renders_and_diffs(
    data: dict[str, Any], payloads: list[Any], snapshot: dict[str, Any]
) -> None:
    steps = [
        {"name": n, "status": "pass", "findings": [], "data": d if isinstance(d, dict) else {"v": d}}
        for n, d in data.items()
    ]
    events = [
        {"kind": k, "payload": p}
        for p in payloads
        if isinstance(p, dict)
        for k in ("ramp_level", "soak_sample")
    ]
    run = _run(steps, events)
    html = render_sheet(run, snapshot)
    parser = _Strict()
    parser.feed(html)
    assert "script" not in parser.tags and "Verdict" in html
    diff_runs(run, snapshot, _run([]), None)


def test_non_finite_and_huge_numbers_are_not_measurements() -> None:
    run = _run(
        [
            {
                "name": "ramp",
                "data": {
                    "levels": [
                        {"concurrency": float("inf")},
                        {"concurrency": "3", "ttft_ms": {"p99": float("nan")}},
                        {"concurrency": 1e300, "ttft_ms": {"p99": 1e300}},
                    ]
                },
            },
            {
                "name": "soak",
                "data": {"samples": [{"t_s": float("nan")}, {"t_s": 1e308, "kv_cache_usage": 5e300}]},
            },
        ]
    )
    levels = views.ramp_levels(run)
    assert levels[0].concurrency == 3 and levels[0].latency_ms == {}
    assert "Verdict" in render_sheet(run)
