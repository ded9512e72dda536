"""What one ``vllm-medic sim`` server does: model, timing, cache model, and the faults to inject.

Every fault rate is a probability per request, drawn from a seeded RNG so a test run is repeatable.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

SIM_VERSION = "0.32.0+vllm-medic-sim"

# The smallest value a numeric option may take (a negative context length or a NaN delay is a usage
# error, not a server that misbehaves later); floats must also be finite.
_MINIMUM = {
    "max_model_len": 1,
    "output_tokens": 0,
    "ttft_ms": 0.0,
    "prefill_ms_per_token": 0.0,
    "itl_ms": 0.0,
    "disconnect_after": 0,
    "stall_after": 0,
    "stall_s": 0.0,
    "crash_exit_after_s": 0.0,
    "retention_interval": 0,
    "crash_at_concurrency": 1,
}


@dataclass
class SimConfig:
    host: str = "127.0.0.1"
    port: int = 0
    model: str = "sim-model"
    max_model_len: int = 4096
    api_key: str | None = None  # require "Authorization: Bearer" on /v1/* (vLLM: --api-key / VLLM_API_KEY)
    seed: int = 0

    # timing (deterministic): TTFT = ttft_ms + prefill_ms_per_token * uncached prompt tokens; then itl_ms per token
    ttft_ms: float = 5.0
    prefill_ms_per_token: float = 0.02
    itl_ms: float = 2.0
    output_tokens: int = 16  # natural answer length; max_tokens below it ends with finish_reason "length"

    # engine and cache model
    engines: int = 1  # data-parallel engines, each with its own cache and "engine" label
    routing: str = "round_robin"  # or "hash": the first prompt block picks the engine (prefix-aware)
    block_size: int = 16
    num_gpu_blocks: int = 4096  # KV capacity per engine; running sequences hold blocks; full -> wait/preempt
    max_num_seqs: int = 256  # running requests per engine; the rest wait (vllm:num_requests_waiting)
    enable_prefix_caching: bool = True
    enable_prompt_tokens_details: bool = False
    hybrid: bool = False  # mamba_cache_mode "align": only checkpoints (prompt ends, every interval) can hit
    retention_interval: int | None = None  # tokens; 0 = prompt-end checkpoints only (hybrid mode)
    metric_names: str = "current"  # or "legacy": vllm:gpu_prefix_cache_*, gpu_cache_usage_perc, old ITL name

    # tools
    tool_call_parser: str | None = None
    enable_auto_tool_choice: bool = False

    # faults
    error_rate: float = 0.0
    error_status: int = 500
    disconnect_rate: float = 0.0
    disconnect_after: int = 3  # chunks sent before the connection is cut
    stall_rate: float = 0.0
    stall_after: int = 3
    stall_s: float = 30.0
    malformed_sse_rate: float = 0.0
    bad_tool_args: bool = False  # tool-call arguments that do not match the declared schema
    crash_at_concurrency: int | None = None  # engine dies when this many requests are in flight
    crash_kind: str = "engine_dead"  # or "oom": which log lines the crash writes
    crash_exit_after_s: float = 1.0  # /health answers 503 this long, then the port closes
    log_file: str | None = None  # vLLM-format log lines (startup, stats on crash) for `accept --logs`

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d.get("api_key"):
            d["api_key"] = "***REDACTED***"
        return d

    def validate(self) -> list[str]:
        problems = []
        if self.engines < 1:
            problems.append("--engines must be >= 1")
        if self.block_size < 1:
            problems.append("--block-size must be >= 1")
        if self.routing not in ("round_robin", "hash"):
            problems.append("--routing must be round_robin or hash")
        if self.metric_names not in ("current", "legacy"):
            problems.append("--metric-names must be current or legacy")
        if self.crash_kind not in ("engine_dead", "oom"):
            problems.append("--crash-kind must be engine_dead or oom")
        for name in ("error_rate", "disconnect_rate", "stall_rate", "malformed_sse_rate"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                problems.append(f"--{name.replace('_', '-')} must be between 0 and 1 (got {v})")
        if self.max_num_seqs < 1 or self.num_gpu_blocks < 1:
            problems.append("--max-num-seqs and --num-gpu-blocks must be >= 1")
        for name, low in _MINIMUM.items():
            v = getattr(self, name)
            if v is not None and (not math.isfinite(v) or v < low):
                problems.append(f"--{name.replace('_', '-')} must be a number >= {low} (got {v})")
        if not 100 <= self.error_status <= 599:
            problems.append(f"--error-status must be an HTTP status 100..599 (got {self.error_status})")
        return problems
