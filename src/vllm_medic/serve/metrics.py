"""Parse a vLLM ``/metrics`` page (Prometheus text format) and read it across metric-name generations.

Pure functions only; no I/O. Public API (kept stable for ``accept``, ``cache`` and ``cluster``):

- ``parse_prometheus(text) -> Metrics``: every sample with its labels, the ``# TYPE`` of each family,
  and the lines that could not be read (``Metrics.problems``). Never raises on odd input.
- ``Metrics.counter(names, labels=None)``: the sum over engines (and any other label) of the first
  name in ``names`` that is present. ``names`` is one of the ``*`` tuples below, so the newest
  name is tried first and the older generations after it (``vllm:gpu_prefix_cache_hits`` …).
- ``Metrics.per_engine(names, labels=None) -> {engine: value}``, ``Metrics.gauge(names, labels=None,
  agg="sum"|"max"|"min")``, ``Metrics.histogram(names, labels=None) -> Histogram`` (cumulative buckets,
  ``sum``, ``count``, ``quantile(q)``, summed over engines), ``Metrics.cache_config_info() ->
  [{label: value}]`` one dict per engine (``enable_prefix_caching``, ``block_size``,
  ``prefix_cache_retention_interval``, ``mamba_cache_mode``, ``hash_block_size``, ``num_gpu_blocks``…).
- ``diff(before, after) -> Metrics``: counters and histogram series become increments (a counter that
  went down is a restart: its increment is its new value and the series is listed in ``resets``);
  gauges keep their ``after`` value. All the helpers above work on the result.

Why both generations: vLLM renamed ``gpu_prefix_cache_*`` → ``prefix_cache_*`` and
``gpu_cache_usage_perc`` → ``kv_cache_usage_perc`` in 0.9.2 and dropped the old names in 0.12;
``time_per_output_token_seconds`` became ``inter_token_latency_seconds`` in 0.11. prometheus_client
adds ``_total`` to counters when exposing them, but early V1 created some with the suffix already in the
name, so both spellings occur in the wild.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

PREFIX_CACHE_HITS = (
    "vllm:prefix_cache_hits_total",
    "vllm:prefix_cache_hits",
    "vllm:gpu_prefix_cache_hits_total",
    "vllm:gpu_prefix_cache_hits",
)
PREFIX_CACHE_QUERIES = (
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_queries",
    "vllm:gpu_prefix_cache_queries_total",
    "vllm:gpu_prefix_cache_queries",
)
PREFIX_CACHE_HIT_RATE_V0 = ("vllm:gpu_prefix_cache_hit_rate",)
KV_CACHE_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
NUM_PREEMPTIONS = ("vllm:num_preemptions_total", "vllm:num_preemptions")
REQUESTS_RUNNING = ("vllm:num_requests_running",)
REQUESTS_WAITING = ("vllm:num_requests_waiting",)
PROMPT_TOKENS = ("vllm:prompt_tokens_total", "vllm:prompt_tokens")
GENERATION_TOKENS = ("vllm:generation_tokens_total", "vllm:generation_tokens")
REQUEST_SUCCESS = ("vllm:request_success_total", "vllm:request_success")
TTFT_SECONDS = ("vllm:time_to_first_token_seconds",)
ITL_SECONDS = ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")
TPOT_SECONDS = ("vllm:request_time_per_output_token_seconds", "vllm:time_per_output_token_seconds")
E2E_SECONDS = ("vllm:e2e_request_latency_seconds",)
QUEUE_SECONDS = ("vllm:request_queue_time_seconds",)
CACHE_CONFIG_INFO = ("vllm:cache_config_info",)

_HIST_SUFFIXES = ("_bucket", "_sum", "_count", "_created")
_COUNTER_SUFFIXES = ("_total", "_created")


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float

    @property
    def label_dict(self) -> dict[str, str]:
        return dict(self.labels)

    def label(self, key: str, default: str = "") -> str:
        for k, v in self.labels:
            if k == key:
                return v
        return default


@dataclass
class Histogram:
    """A Prometheus histogram summed over the selected series: ``buckets`` are (le, cumulative count)."""

    name: str
    buckets: list[tuple[float, float]]
    sum: float
    count: float

    def quantile(self, q: float) -> float | None:
        """Estimate like PromQL ``histogram_quantile``: linear interpolation inside the bucket."""
        if self.count <= 0 or not self.buckets:
            return None
        rank = q * self.count
        prev_le, prev_cum = 0.0, 0.0
        for le, cum in self.buckets:
            if cum >= rank:
                if math.isinf(le):
                    return prev_le
                if cum == prev_cum:
                    return le
                return prev_le + (le - prev_le) * (rank - prev_cum) / (cum - prev_cum)
            prev_le, prev_cum = le, cum
        return prev_le

    @property
    def mean(self) -> float | None:
        return self.sum / self.count if self.count > 0 else None

    def to_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "count": self.count,
            "sum": self.sum,
            "buckets": [["+Inf" if math.isinf(le) else le, c] for le, c in self.buckets],
        }


def _labels_match(sample: Sample, wanted: dict[str, str] | None) -> bool:
    if not wanted:
        return True
    have = sample.label_dict
    return all(have.get(k) == v for k, v in wanted.items())


@dataclass
class Metrics:
    samples: list[Sample] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)
    helps: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    resets: list[str] = field(default_factory=list)

    def names(self) -> set[str]:
        return {s.name for s in self.samples}

    def series(self, name: str, labels: dict[str, str] | None = None) -> list[Sample]:
        return [s for s in self.samples if s.name == name and _labels_match(s, labels)]

    def first_present(self, names: tuple[str, ...] | str) -> str | None:
        """The first of ``names`` with at least one sample (for histograms: with a ``_count`` sample)."""
        present = self.names()
        for n in (names,) if isinstance(names, str) else names:
            if n in present or f"{n}_count" in present:
                return n
        return None

    def counter(self, names: tuple[str, ...] | str, labels: dict[str, str] | None = None) -> float | None:
        name = self.first_present(names)
        if name is None:
            return None
        return sum(s.value for s in self.series(name, labels))

    def gauge(
        self, names: tuple[str, ...] | str, labels: dict[str, str] | None = None, agg: str = "sum"
    ) -> float | None:
        name = self.first_present(names)
        if name is None:
            return None
        values = [s.value for s in self.series(name, labels)]
        if not values:
            return None
        if agg == "max":
            return max(values)
        if agg == "min":
            return min(values)
        return sum(values)

    def per_engine(
        self, names: tuple[str, ...] | str, labels: dict[str, str] | None = None
    ) -> dict[str, float]:
        name = self.first_present(names)
        out: dict[str, float] = {}
        if name is None:
            return out
        for s in self.series(name, labels):
            key = s.label("engine", "0")
            out[key] = out.get(key, 0.0) + s.value
        return out

    def histogram(
        self, names: tuple[str, ...] | str, labels: dict[str, str] | None = None
    ) -> Histogram | None:
        name = self.first_present(names)
        if name is None:
            return None
        by_le: dict[float, float] = {}
        for s in self.series(f"{name}_bucket", None):
            rest = {k: v for k, v in s.labels if k != "le"}
            if labels and any(rest.get(k) != v for k, v in labels.items()):
                continue
            le = _parse_value(s.label("le", "+Inf"))
            if le is None:
                continue
            by_le[le] = by_le.get(le, 0.0) + s.value
        total = sum(s.value for s in self.series(f"{name}_sum", labels))
        count = sum(s.value for s in self.series(f"{name}_count", labels))
        return Histogram(name=name, buckets=sorted(by_le.items()), sum=total, count=count)

    def cache_config_info(self) -> list[dict[str, str]]:
        """One dict of labels per engine, sorted by engine index (``engine`` label kept)."""
        rows = [s.label_dict for s in self.series(CACHE_CONFIG_INFO[0])]
        return sorted(rows, key=lambda d: _engine_sort_key(d.get("engine", "")))

    def engines(self) -> list[str]:
        found = {s.label("engine") for s in self.samples if s.name.startswith("vllm:")}
        found.discard("")
        return sorted(found, key=_engine_sort_key)


def _engine_sort_key(engine: str) -> tuple[int, str]:
    return (int(engine), "") if engine.isdecimal() else (1 << 30, engine)


def prefix_cache_hit_rate(m: Metrics) -> float | None:
    """Hits / queries (token-based) from the counters, or the V0 gauge when only that exists."""
    hits, queries = m.counter(PREFIX_CACHE_HITS), m.counter(PREFIX_CACHE_QUERIES)
    if hits is not None and queries:
        return hits / queries
    if queries == 0:
        return None
    return m.gauge(PREFIX_CACHE_HIT_RATE_V0, agg="max")


# --- parsing -----------------------------------------------------------------------------------


def _parse_value(text: str) -> float | None:
    t = text.strip()
    if t in ("+Inf", "Inf", "inf", "+inf"):
        return math.inf
    if t in ("-Inf", "-inf"):
        return -math.inf
    try:
        return float(t)
    except ValueError:
        return None


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    out, i = [], 0
    while i < len(value):
        c = value[i]
        if c == "\\" and i + 1 < len(value):
            nxt = value[i + 1]
            out.append({"n": "\n", "\\": "\\", '"': '"'}.get(nxt, "\\" + nxt))
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _parse_labels(text: str, start: int) -> tuple[tuple[tuple[str, str], ...], int]:
    """Parse ``{k="v",...}`` starting at ``text[start] == '{'``; return labels and index after ``}``."""
    labels: list[tuple[str, str]] = []
    i = start + 1
    n = len(text)
    while i < n:
        while i < n and text[i] in " ,":
            i += 1
        if i < n and text[i] == "}":
            return tuple(labels), i + 1
        eq = text.find("=", i)
        if eq < 0:
            raise ValueError("label without '='")
        key = text[i:eq].strip()
        i = eq + 1
        while i < n and text[i] == " ":
            i += 1
        if i >= n or text[i] != '"':
            raise ValueError("label value not quoted")
        j = i + 1
        while j < n:
            if text[j] == "\\":
                j += 2
                continue
            if text[j] == '"':
                break
            j += 1
        if j >= n:
            raise ValueError("unterminated label value")
        labels.append((key, _unescape(text[i + 1 : j])))
        i = j + 1
    raise ValueError("unterminated label set")


def parse_prometheus(text: str) -> Metrics:
    """Parse Prometheus/OpenMetrics text. Lines it cannot read are kept in ``problems``, never raised."""
    m = Metrics()
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] == "TYPE":
                m.types[parts[2]] = parts[3].strip() if len(parts) > 3 else "untyped"
            elif len(parts) >= 3 and parts[1] == "HELP":
                m.helps[parts[2]] = parts[3] if len(parts) > 3 else ""
            continue
        try:
            brace = line.find("{")
            space = line.find(" ")
            if brace >= 0 and (space < 0 or brace < space):
                name = line[:brace]
                labels, end = _parse_labels(line, brace)
                rest = line[end:].split()
            else:
                name, *rest = line.split()
                labels = ()
            if not name or not rest:
                raise ValueError("no value")
            value = _parse_value(rest[0])
            if value is None:
                raise ValueError(f"bad value {rest[0]!r}")
            m.samples.append(Sample(name=name, labels=labels, value=value))
        except ValueError as exc:
            m.problems.append(f"line {lineno}: {exc}: {raw[:200]}")
    return m


def family_type(m: Metrics, sample_name: str) -> str:
    """The declared type of the family a sample belongs to (``counter``, ``gauge``, ``histogram``…)."""
    if sample_name in m.types:
        return m.types[sample_name]
    for suffix in _HIST_SUFFIXES + _COUNTER_SUFFIXES:
        if sample_name.endswith(suffix):
            base = sample_name[: -len(suffix)]
            if base in m.types:
                return m.types[base]
    if sample_name.endswith("_total"):
        return "counter"
    return "untyped"


def _is_cumulative(m: Metrics, sample_name: str) -> bool:
    if sample_name.endswith("_created"):
        return False
    kind = family_type(m, sample_name)
    if kind == "counter":
        return True
    return kind in ("histogram", "summary") and sample_name.endswith(("_bucket", "_sum", "_count"))


def diff(before: Metrics, after: Metrics) -> Metrics:
    """Increments of counters/histograms between two scrapes; gauges keep their ``after`` value."""
    old = {(s.name, s.labels): s.value for s in before.samples}
    out = Metrics(types=dict(after.types), helps=dict(after.helps), problems=list(after.problems))
    for s in after.samples:
        if not _is_cumulative(after, s.name):
            out.samples.append(s)
            continue
        prev = old.get((s.name, s.labels), 0.0)
        if s.value < prev:
            out.resets.append(
                s.name + ("{" + ",".join(f"{k}={v}" for k, v in s.labels) + "}" if s.labels else "")
            )
            out.samples.append(s)
        else:
            out.samples.append(Sample(s.name, s.labels, s.value - prev))
    return out
