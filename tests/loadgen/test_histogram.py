"""The mergeable log-linear histogram: exact merge, bounded percentile error, serialisation."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_medic.accept.histogram import LatencyHistogram, bucket_bounds, bucket_index

latencies = st.lists(st.floats(min_value=0.0, max_value=3600.0, allow_nan=False), max_size=200)


def _hist(values: list[float]) -> LatencyHistogram:
    h = LatencyHistogram()
    h.record_many(values)
    return h


@given(latencies, latencies)
@settings(max_examples=60, deadline=None)
def test_merge_is_exactly_the_histogram_of_both_sample_sets(a: list[float], b: list[float]) -> None:
    merged = _hist(a).merge(_hist(b))
    both = _hist(a + b)
    assert merged.counts == both.counts and merged.n == both.n
    assert math.isclose(merged.total_s, both.total_s, rel_tol=1e-9, abs_tol=1e-9)
    for q in (50, 90, 99, 100):
        assert merged.percentile(q) == both.percentile(q)
    again = LatencyHistogram.from_dict(merged.to_dict())
    assert again.counts == merged.counts and again.percentile(99) == merged.percentile(99)


@given(st.lists(st.floats(min_value=1e-4, max_value=600.0, allow_nan=False), min_size=1, max_size=300))
@settings(max_examples=60, deadline=None)
def test_percentiles_are_within_one_bucket_of_the_exact_nearest_rank(values: list[float]) -> None:
    h = _hist(values)
    ordered = sorted(values)
    for q in (50, 90, 95, 99):
        exact = ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]
        got = h.percentile(q)
        assert got is not None
        assert abs(got - exact) <= exact * (1 / 128) + 1e-6, (q, got, exact)


def test_bucket_layout_is_contiguous_and_inverse() -> None:
    prev_hi = -1
    for idx in range(0, 6000):
        lo, hi = bucket_bounds(idx)
        assert lo == prev_hi + 1 and hi >= lo
        assert bucket_index(lo) == idx and bucket_index(hi) == idx
        prev_hi = hi


def test_empty_and_summary() -> None:
    h = LatencyHistogram()
    assert h.percentile(99) is None and h.summary()["count"] == 0
    h.record(0.25)
    s = h.summary()
    assert s["p50"] == s["p99"] == 0.25 and s["max"] == 0.25


@given(st.lists(st.floats(min_value=-1.0, max_value=7200.0) | st.just(math.nan), max_size=100))
@settings(max_examples=60, deadline=None)
def test_record_many_equals_recording_one_by_one(values: list[float]) -> None:
    one = LatencyHistogram()
    for v in values:
        one.record(v)
    many = LatencyHistogram()
    many.record_many(values)
    assert many.to_dict() == one.to_dict()
