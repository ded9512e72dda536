"""The sim's ``/metrics`` page, rendered from its engines' state with vLLM's names (see exposition.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vllm_medic.sim.exposition import Exposition

if TYPE_CHECKING:
    from vllm_medic.sim.state import SimState


def render_metrics(state: SimState) -> str:
    cfg = state.cfg
    legacy = cfg.metric_names == "legacy"
    ex = Exposition()
    base = [{"engine": str(e.index), "model_name": cfg.model} for e in state.engines]

    def gauge(name: str, help_text: str, values: list[float]) -> None:
        ex.family(name, "gauge", help_text)
        for labels, v in zip(base, values, strict=True):
            ex.sample(name, labels, v)

    def counter(name: str, help_text: str, values: list[float]) -> None:
        ex.family(f"{name}_total", "counter", help_text)
        for labels, v in zip(base, values, strict=True):
            ex.sample(f"{name}_total", labels, v)

    engines = state.engines
    gauge(
        "vllm:num_requests_running",
        "Number of requests in model execution batches.",
        [e.running for e in engines],
    )
    gauge(
        "vllm:num_requests_waiting",
        "Number of requests waiting to be processed.",
        [e.waiting for e in engines],
    )
    kv_name = "vllm:gpu_cache_usage_perc" if legacy else "vllm:kv_cache_usage_perc"
    gauge(kv_name, "KV-cache usage. 1 means 100 percent usage.", [e.kv_usage for e in engines])
    pfx = "vllm:gpu_prefix_cache" if legacy else "vllm:prefix_cache"
    counter(f"{pfx}_queries", "Prefix cache queries, in terms of number of queried tokens.",
            [e.stats.queries for e in engines])  # fmt: skip
    counter(
        f"{pfx}_hits",
        "Prefix cache hits, in terms of number of cached tokens.",
        [e.stats.hits for e in engines],
    )
    counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.",
            [e.stats.preemptions for e in engines])  # fmt: skip
    counter(
        "vllm:prompt_tokens", "Number of prefill tokens processed.", [e.stats.prompt_tokens for e in engines]
    )
    counter("vllm:generation_tokens", "Number of generation tokens processed.",
            [e.stats.generation_tokens for e in engines])  # fmt: skip
    ex.family("vllm:request_success_total", "counter", "Count of successfully processed requests.")
    for labels, e in zip(base, engines, strict=True):
        for reason in ("stop", "length", "abort", "tool_calls"):
            ex.sample(
                "vllm:request_success_total",
                {**labels, "finished_reason": reason},
                e.stats.success.get(reason, 0),
            )
    itl_name = "vllm:time_per_output_token_seconds" if legacy else "vllm:inter_token_latency_seconds"
    families = [
        ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", "ttft"),
        (itl_name, "Histogram of inter-token latency in seconds.", "itl"),
        (
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            "tpot",
        ),
        ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", "e2e"),
        ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", "queue"),
    ]
    for name, help_text, attr in families:
        ex.family(name, "histogram", help_text)
        for labels, h in zip(base, state.hists, strict=True):
            ex.histogram(name, labels, getattr(h, attr))
    ex.family("vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig")
    for e in engines:
        info = {
            "block_size": str(cfg.block_size),
            "cache_dtype": "auto",
            "enable_prefix_caching": str(cfg.enable_prefix_caching),
            "engine": str(e.index),
            "gpu_memory_utilization": "0.92",
            "hash_block_size": "None",
            "mamba_cache_mode": ("align" if cfg.hybrid else "none") if cfg.enable_prefix_caching else "none",
            "num_gpu_blocks": str(cfg.num_gpu_blocks),
            "prefix_cache_retention_interval": str(cfg.retention_interval) if cfg.hybrid else "None",
            "prefix_caching_hash_algo": "sha256",
        }
        ex.sample("vllm:cache_config_info", info, 1.0)
    return ex.text()
