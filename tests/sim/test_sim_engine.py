"""The sim's engine model, observed only through its HTTP endpoints (metrics, usage), like a user would."""

from __future__ import annotations

import asyncio
from typing import Any

from vllm_medic.serve.client import ServerClient
from vllm_medic.serve.metrics import (
    KV_CACHE_USAGE,
    NUM_PREEMPTIONS,
    PREFIX_CACHE_HITS,
    PREFIX_CACHE_QUERIES,
    QUEUE_SECONDS,
    diff,
    parse_prometheus,
)


def prompt_body(text: str, max_tokens: int = 4) -> dict[str, Any]:
    return {"prompt": text, "max_tokens": max_tokens}


async def _send_completions(url: str, prompts: list[str], **kw: Any) -> tuple[list[Any], Any]:
    async with ServerClient(url) as c:
        before = await c.metrics()
        results = [await c.completion(prompt_body(p, **kw)) for p in prompts]
        return results, diff(before, await c.metrics())


def words(n: int, tag: str = "w") -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def test_prefix_cache_counts_tokens_and_never_hits_the_last_token(make_sim) -> None:
    sim = make_sim(block_size=16)
    p = words(64)  # exactly 4 blocks: the 4th cannot hit (one prompt token is always computed)
    _, d = asyncio.run(_send_completions(sim.url, [p, p]))
    assert d.counter(PREFIX_CACHE_QUERIES) == 128
    assert d.counter(PREFIX_CACHE_HITS) == 48


def test_prefix_caching_off_has_no_hits_and_says_so(make_sim) -> None:
    sim = make_sim(enable_prefix_caching=False)
    p = words(100)
    _, d = asyncio.run(_send_completions(sim.url, [p, p, p]))
    assert d.counter(PREFIX_CACHE_HITS) == 0
    assert d.cache_config_info()[0]["enable_prefix_caching"] == "False"


def test_legacy_metric_names_are_read_through_the_same_helpers(make_sim) -> None:
    sim = make_sim(metric_names="legacy", block_size=16)
    p = words(40)
    _, d = asyncio.run(_send_completions(sim.url, [p, p]))
    assert d.first_present(PREFIX_CACHE_HITS) == "vllm:gpu_prefix_cache_hits_total"
    assert d.first_present(KV_CACHE_USAGE) == "vllm:gpu_cache_usage_perc"
    assert d.counter(PREFIX_CACHE_HITS) == 32
    assert d.histogram(("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")).count > 0


def test_round_robin_across_dp_engines_splits_the_cache_hash_routing_does_not(make_sim) -> None:
    rr = make_sim(engines=2, routing="round_robin", block_size=16)
    hashed = make_sim(engines=2, routing="hash", block_size=16)
    p = words(49)
    _, d_rr = asyncio.run(_send_completions(rr.url, [p, p]))
    _, d_hash = asyncio.run(_send_completions(hashed.url, [p, p]))
    assert d_rr.counter(PREFIX_CACHE_HITS) == 0  # 2nd request went to the other engine
    assert set(d_rr.per_engine(PREFIX_CACHE_QUERIES)) == {"0", "1"}
    assert d_hash.counter(PREFIX_CACHE_HITS) == 48
    assert sorted(e["engine"] for e in d_rr.cache_config_info()) == ["0", "1"]


def test_hybrid_only_checkpoints_hit(make_sim) -> None:
    # Prompt-end checkpoints only (retention interval 0): the earlier prompt's end (rounded down to
    # a block) is reusable by a longer prompt; the blocks in between are not stored at all.
    sim = make_sim(hybrid=True, retention_interval=0, block_size=16)
    short, longer = words(40), words(40) + " " + words(60, "x")
    _, d = asyncio.run(_send_completions(sim.url, [short, longer]))
    assert d.counter(PREFIX_CACHE_HITS) == 32  # the checkpoint at token 32 (end of `short`, rounded down)
    info = d.cache_config_info()[0]
    assert info["mamba_cache_mode"] == "align" and info["prefix_cache_retention_interval"] == "0"
    # An exact block multiple sent twice: its only checkpoint is at its last token, which cannot hit.
    sim2 = make_sim(hybrid=True, retention_interval=0, block_size=16)
    exact = words(64)
    _, d2 = asyncio.run(_send_completions(sim2.url, [exact, exact]))
    assert d2.counter(PREFIX_CACHE_HITS) == 0
    # With an interval of 32 tokens the same repeat hits at the interval checkpoint.
    sim3 = make_sim(hybrid=True, retention_interval=32, block_size=16)
    _, d3 = asyncio.run(_send_completions(sim3.url, [exact, exact]))
    assert d3.counter(PREFIX_CACHE_HITS) == 32


def test_seat_limit_queues_and_full_kv_cache_preempts(make_sim) -> None:
    sim = make_sim(max_num_seqs=1, ttft_ms=30.0, itl_ms=1.0, output_tokens=4)

    async def burst(url: str, n: int, max_tokens: int) -> Any:
        async with ServerClient(url) as c:
            before = await c.metrics()
            await asyncio.gather(
                *(c.completion(prompt_body(words(10, f"p{i}"), max_tokens)) for i in range(n))
            )
            return diff(before, await c.metrics())

    d = asyncio.run(burst(sim.url, 4, 4))
    q = d.histogram(QUEUE_SECONDS)
    assert q.count == 4 and q.sum >= 0.05  # three waited behind the single seat

    small = make_sim(num_gpu_blocks=4, block_size=16, itl_ms=1.0, output_tokens=60)
    d2 = asyncio.run(burst(small.url, 3, 60))
    assert d2.counter(NUM_PREEMPTIONS) >= 1


def test_kv_usage_gauge_moves_while_requests_run(make_sim) -> None:
    sim = make_sim(num_gpu_blocks=64, block_size=16, itl_ms=20.0, output_tokens=40)

    async def go() -> float:
        async with ServerClient(sim.url) as c:
            task = asyncio.gather(*(c.completion(prompt_body(words(100, f"k{i}"), 40)) for i in range(3)))
            peak = 0.0
            for _ in range(100):
                m = await c.metrics()
                peak = max(peak, m.gauge(KV_CACHE_USAGE) or 0.0)
                if peak > 0:
                    break
                await asyncio.sleep(0.01)
            await task
            return peak

    assert asyncio.run(go()) > 0.0


def test_metrics_page_parses_cleanly(make_sim) -> None:
    sim = make_sim(engines=3)

    async def go() -> str:
        async with ServerClient(sim.url) as c:
            return await c.metrics_text()

    m = parse_prometheus(asyncio.run(go()))
    assert m.problems == []
    assert m.engines() == ["0", "1", "2"]
    assert m.types["vllm:prefix_cache_hits_total"] == "counter"
