"""The sim's ``/metrics`` page: vLLM's metric names, types, ``engine``/``model_name`` labels and buckets.

``metric_names="current"`` follows vLLM 0.32 (``vllm:prefix_cache_hits_total``, ``vllm:kv_cache_usage_perc``,
``vllm:inter_token_latency_seconds``); ``"legacy"`` follows early V1 (``vllm:gpu_prefix_cache_hits_total``,
``vllm:gpu_cache_usage_perc``, ``vllm:time_per_output_token_seconds``). Buckets are the ones a real
vLLM 0.32 server exposes (tests/data/serve/vllm-0.32.0-cpu-metrics.txt).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)  # fmt: skip
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
               40.0, 80.0)  # fmt: skip
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                   240.0, 480.0, 960.0, 1920.0, 7680.0)  # fmt: skip


@dataclass
class PromHistogram:
    bounds: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, v: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, v)] += 1
        self.total += v
        self.n += 1


def _fmt(v: float) -> str:
    return repr(float(v))


def _labels(pairs: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs.items())
    return "{" + inner + "}"


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Exposition:
    """Builds the text page family by family, in the order prometheus_client would."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name: str, labels: dict[str, str], value: float) -> None:
        self.lines.append(f"{name}{_labels(labels)} {_fmt(value)}")

    def histogram(self, name: str, labels: dict[str, str], h: PromHistogram) -> None:
        cum = 0
        for bound, c in zip(h.bounds, h.counts, strict=False):
            cum += c
            self.sample(f"{name}_bucket", {**labels, "le": _fmt(bound)}, cum)
        self.sample(f"{name}_bucket", {**labels, "le": "+Inf"}, h.n)
        self.sample(f"{name}_sum", labels, h.total)
        self.sample(f"{name}_count", labels, h.n)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
