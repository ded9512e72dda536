"""A mergeable latency histogram with fixed log-linear buckets (HDR-histogram style).

Why fixed buckets: histograms from several load-generator processes (Ray actors, hosts) must merge
*exactly* — ``a.merge(b)`` equals the histogram of both sample sets — which percentile lists or
t-digests cannot promise. Values are seconds, recorded as whole microseconds:

- 0 … 255 µs: one bucket per microsecond (exact);
- above: each power of two is split into 128 linear sub-buckets, so a bucket is at most 1/128
  (0.8 %) of its value wide; 1 hour needs ~3,500 buckets, stored sparsely.

Percentiles use the nearest-rank rule (the smallest value with at least q·n samples at or below it)
and report the bucket's midpoint, clamped to the exact recorded min and max.
``to_dict()``/``from_dict()`` make it JSON- and pickle-friendly for shipping between processes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

SUB_BUCKET_BITS = 8
_SUB = 1 << SUB_BUCKET_BITS  # 256: values below this are exact
_HALF = _SUB >> 1
UNIT_S = 1e-6


def bucket_index(v: int) -> int:
    if v < _SUB:
        return max(0, v)
    shift = v.bit_length() - SUB_BUCKET_BITS
    return shift * _HALF + (v >> shift)


def bucket_bounds(index: int) -> tuple[int, int]:
    """Inclusive [lo, hi] in microseconds of a bucket."""
    if index < _SUB:
        return index, index
    shift = index // _HALF - 1
    sub = index - shift * _HALF
    return sub << shift, ((sub + 1) << shift) - 1


@dataclass
class LatencyHistogram:
    counts: dict[int, int] = field(default_factory=dict)
    n: int = 0
    total_s: float = 0.0
    min_s: float = math.inf
    max_s: float = -math.inf

    def record(self, value_s: float) -> None:
        if value_s != value_s:  # NaN
            return
        value_s = max(0.0, value_s)
        idx = bucket_index(int(value_s / UNIT_S + 0.5))
        self.counts[idx] = self.counts.get(idx, 0) + 1
        self.n += 1
        self.total_s += value_s
        if value_s < self.min_s:
            self.min_s = value_s
        if value_s > self.max_s:
            self.max_s = value_s

    def record_many(self, values: list[float]) -> None:
        """``record`` for each value, inlined: the load generator records one ITL sample per token."""
        counts = self.counts
        lo, hi, total, n = self.min_s, self.max_s, self.total_s, self.n
        for v in values:
            if v != v:
                continue
            if v < 0.0:
                v = 0.0
            us = int(v / UNIT_S + 0.5)
            idx = (
                us
                if us < _SUB
                else (us.bit_length() - SUB_BUCKET_BITS) * _HALF + (us >> (us.bit_length() - SUB_BUCKET_BITS))
            )
            counts[idx] = counts.get(idx, 0) + 1
            n += 1
            total += v
            if v < lo:
                lo = v
            if v > hi:
                hi = v
        self.min_s, self.max_s, self.total_s, self.n = lo, hi, total, n

    def merge(self, other: LatencyHistogram) -> LatencyHistogram:
        """Add ``other`` into this histogram (in place) and return self."""
        for idx, c in other.counts.items():
            self.counts[idx] = self.counts.get(idx, 0) + c
        self.n += other.n
        self.total_s += other.total_s
        self.min_s = min(self.min_s, other.min_s)
        self.max_s = max(self.max_s, other.max_s)
        return self

    def percentile(self, q: float) -> float | None:
        """q in [0, 100]."""
        if self.n == 0:
            return None
        rank = max(1, math.ceil(q / 100.0 * self.n))
        seen = 0
        for idx in sorted(self.counts):
            seen += self.counts[idx]
            if seen >= rank:
                lo, hi = bucket_bounds(idx)
                mid = (lo + hi) / 2.0 * UNIT_S
                return min(max(mid, self.min_s), self.max_s)
        return self.max_s

    @property
    def mean(self) -> float | None:
        return self.total_s / self.n if self.n else None

    def summary(self, quantiles: tuple[float, ...] = (50, 90, 95, 99)) -> dict[str, float | int | None]:
        out: dict[str, float | int | None] = {"count": self.n, "mean": self.mean}
        for q in quantiles:
            out[f"p{q:g}"] = self.percentile(q)
        out["min"] = self.min_s if self.n else None
        out["max"] = self.max_s if self.n else None
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "sub_bucket_bits": SUB_BUCKET_BITS,
            "unit_s": UNIT_S,
            "counts": {str(k): v for k, v in sorted(self.counts.items())},
            "n": self.n,
            "total_s": self.total_s,
            "min_s": self.min_s if self.n else None,
            "max_s": self.max_s if self.n else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> LatencyHistogram:
        if d.get("sub_bucket_bits", SUB_BUCKET_BITS) != SUB_BUCKET_BITS or d.get("unit_s", UNIT_S) != UNIT_S:
            raise ValueError("histogram layouts differ; cannot merge exactly")
        h = cls(
            counts={int(k): int(v) for k, v in (d.get("counts") or {}).items()},
            n=int(d.get("n", 0)),
            total_s=float(d.get("total_s", 0.0)),
        )
        h.min_s = d["min_s"] if d.get("min_s") is not None else math.inf
        h.max_s = d["max_s"] if d.get("max_s") is not None else -math.inf
        return h
