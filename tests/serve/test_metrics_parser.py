"""The /metrics parser on real captures of three vLLM generations, plus edge cases (synthetic, labelled)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vllm_medic.serve.metrics import (
    KV_CACHE_USAGE,
    NUM_PREEMPTIONS,
    PREFIX_CACHE_HITS,
    PREFIX_CACHE_QUERIES,
    REQUESTS_WAITING,
    TTFT_SECONDS,
    diff,
    parse_prometheus,
    prefix_cache_hit_rate,
)

DATA = Path(__file__).parent.parent / "data" / "serve"


def _load(name: str) -> str:
    return (DATA / name).read_text()


def test_real_vllm_0_32_capture_reads_counters_gauges_histograms_and_cache_config() -> None:
    m = parse_prometheus(_load("vllm-0.32.0-cpu-metrics.txt"))
    assert m.problems == []
    assert m.counter(PREFIX_CACHE_QUERIES) == 640.0
    assert m.counter(PREFIX_CACHE_HITS) == 384.0
    assert m.first_present(PREFIX_CACHE_HITS) == "vllm:prefix_cache_hits_total"
    assert prefix_cache_hit_rate(m) == pytest.approx(0.6)
    assert m.gauge(KV_CACHE_USAGE) == 0.0
    assert m.counter(NUM_PREEMPTIONS) == 0.0
    assert m.gauge(REQUESTS_WAITING) == 0.0
    assert m.per_engine(PREFIX_CACHE_HITS) == {"0": 384.0}
    assert m.engines() == ["0"]
    h = m.histogram(TTFT_SECONDS)
    assert h is not None and h.count == 6.0
    assert h.sum == pytest.approx(0.06937003135681152)
    # 1 sample <= 5 ms, 4 <= 10 ms, 5 <= 20 ms, 6 <= 40 ms: the median lies in (5 ms, 10 ms].
    p50 = h.quantile(0.5)
    assert p50 is not None and 0.005 < p50 <= 0.01
    assert h.quantile(1.0) == pytest.approx(0.04)
    info = m.cache_config_info()
    assert len(info) == 1
    assert info[0]["enable_prefix_caching"] == "True"
    assert info[0]["block_size"] == "128"
    assert info[0]["prefix_cache_retention_interval"] == "0"
    assert info[0]["mamba_cache_mode"] == "none"
    assert info[0]["num_gpu_blocks"] == "16384"
    assert m.types["vllm:time_to_first_token_seconds"] == "histogram"


def test_vllm_0_10_capture_with_both_generations_prefers_the_new_names() -> None:
    m = parse_prometheus(_load("vllm-0.10.0-glm45-metrics-excerpt.txt"))
    assert m.problems == []
    assert m.counter(PREFIX_CACHE_QUERIES) == 32.0  # new name present
    assert m.first_present(PREFIX_CACHE_HITS) == "vllm:gpu_prefix_cache_hits_total"  # only the old one here
    assert m.counter(PREFIX_CACHE_HITS) == 0.0
    assert m.gauge(KV_CACHE_USAGE) == pytest.approx(9.75010481363281e-06)


def test_early_v1_capture_without_engine_label_uses_gpu_cache_usage() -> None:
    m = parse_prometheus(_load("vllm-early-v1-qwen-metrics-excerpt.txt"))
    assert m.first_present(KV_CACHE_USAGE) == "vllm:gpu_cache_usage_perc"
    assert m.gauge(KV_CACHE_USAGE) == 0.0
    assert m.per_engine(KV_CACHE_USAGE) == {"0": 0.0}  # no engine label: engine "0"
    assert m.counter(PREFIX_CACHE_HITS) is None
    assert prefix_cache_hit_rate(m) is None


# Synthetic exposition (hand-written to exercise two DP engines, escapes, resets).
TWO_ENGINES_BEFORE = """\
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 100.0
vllm:prefix_cache_hits_total{engine="1",model_name="m"} 50.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 400.0
vllm:prefix_cache_queries_total{engine="1",model_name="m"} 400.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.5",model_name="m"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 1.5
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 2.0
"""
TWO_ENGINES_AFTER = """\
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 356.0
vllm:prefix_cache_hits_total{engine="1",model_name="m"} 10.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 800.0
vllm:prefix_cache_queries_total{engine="1",model_name="m"} 20.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.75
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.125
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.5",model_name="m"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 5.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 4.5
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 5.0
"""


def test_diff_gives_per_engine_increments_and_flags_a_restarted_engine() -> None:
    d = diff(parse_prometheus(TWO_ENGINES_BEFORE), parse_prometheus(TWO_ENGINES_AFTER))
    # Engine 1 went down (50 -> 10): a restart, its increment is its new value.
    assert d.per_engine(PREFIX_CACHE_HITS) == {"0": 256.0, "1": 10.0}
    assert d.counter(PREFIX_CACHE_QUERIES) == 400.0 + 20.0
    assert any("engine=1" in r for r in d.resets)
    assert d.gauge(KV_CACHE_USAGE, agg="max") == 0.75  # gauges keep the after value
    h = d.histogram("vllm:e2e_request_latency_seconds")
    assert h is not None and h.count == 3.0 and h.sum == pytest.approx(3.0)
    assert h.buckets == [(0.5, 0.0), (math.inf, 3.0)]


def test_labels_with_escapes_and_bad_lines_are_reported_not_raised() -> None:
    text = (
        'vllm:cache_config_info{engine="0",note="a \\"quoted\\" \\\\ path\\nnext",block_size="16"} 1.0\n'
        "garbage line here\n"
        'vllm:x{unterminated="oops} 1\n'
        "vllm:y NaNish\n"
        "vllm:z 3 1700000000000\n"
    )
    m = parse_prometheus(text)
    assert m.cache_config_info()[0]["note"] == 'a "quoted" \\ path\nnext'
    assert m.cache_config_info()[0]["block_size"] == "16"
    assert len(m.problems) == 3
    assert m.gauge("vllm:z") == 3.0


@given(st.text(max_size=400))
def test_parser_never_raises_on_arbitrary_text(text: str) -> None:
    m = parse_prometheus(text)
    assert isinstance(m.problems, list)
