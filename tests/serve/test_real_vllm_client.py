"""The client, metrics parser and load generator against a real vLLM CPU server (tests/vllm_tier.py)."""

from __future__ import annotations

import asyncio

import pytest

from vllm_medic.accept.loadgen import run_step
from vllm_medic.serve.client import ServerClient
from vllm_medic.serve.metrics import PREFIX_CACHE_HITS, PREFIX_CACHE_QUERIES, TTFT_SECONDS, diff

pytestmark = pytest.mark.real_vllm

LONG_SYSTEM = "You are a helpful assistant. Answer the question about the weather in Paris. " * 40


def test_real_server_endpoints_stream_conformance_and_prefix_cache(vllm_server_cached) -> None:
    srv = vllm_server_cached

    async def go() -> None:
        async with ServerClient(srv.url, model=srv.served_model_name, timeout_s=120) as c:
            ready = await c.wait_ready(deadline_s=60)
            assert ready.ready and ready.models[0]["max_model_len"] == 2048
            assert (await c.version()) == "0.32.0"
            m = await c.metrics()
            assert m.problems == []
            info = m.cache_config_info()[0]
            assert info["enable_prefix_caching"] == "True" and int(info["block_size"]) == srv.block_size
            tok = await c.tokenize(messages=[{"role": "user", "content": "hello there"}])
            assert tok is not None and tok.count == len(tok.tokens) > 2

            body = {
                "messages": [
                    {"role": "system", "content": LONG_SYSTEM},
                    {"role": "user", "content": "Weather?"},
                ],
                "max_tokens": 8,
                "ignore_eos": True,
                "stream_options": {"include_usage": True},
            }
            before = await c.metrics()
            first = await c.chat_stream(body)
            second = await c.chat_stream(body)
            after = await c.metrics()
            for s in (first, second):
                assert s.ok, (s.error_kind, s.error)
                assert s.problems == [], s.problems
                assert s.completion_tokens == 8 and s.ttft_s is not None and s.e2e_s >= s.ttft_s
            d = diff(before, after)
            assert d.counter(PREFIX_CACHE_QUERIES) == first.prompt_tokens + second.prompt_tokens
            hits = d.counter(PREFIX_CACHE_HITS)
            assert hits is not None and hits >= srv.block_size
            assert second.cached_tokens == hits  # --enable-prompt-tokens-details
            assert d.histogram(TTFT_SECONDS).count == 2

    asyncio.run(go())


def test_real_server_load_step(vllm_server_cached) -> None:
    srv = vllm_server_cached

    async def go():
        return await run_step(
            lambda: ServerClient(srv.url, model=srv.served_model_name, timeout_s=120),
            concurrency=2,
            requests=6,
            body_factory=lambda i: {
                "messages": [{"role": "user", "content": f"q{i}"}],
                "max_tokens": 5,
                "ignore_eos": True,
            },  # fmt: skip
            metrics_interval_s=0.5,
        )

    r = asyncio.run(go())
    assert r.ok == 6 and r.completion_tokens == 30
    # vLLM may put several tokens in one chunk (seen here on CPU); ITL still has one sample per token
    # after the first, for every request that came in at least two chunks.
    assert all(1 <= rec.n_chunks <= rec.completion_tokens == 5 for rec in r.records)
    assert r.hists["ttft"].n == 6
    assert r.hists["itl"].n == sum(rec.completion_tokens - 1 for rec in r.records if rec.n_chunks >= 2)
    assert r.server_peaks()["samples"] >= 1
