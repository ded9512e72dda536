"""ServerClient against the sim over real loopback HTTP: endpoints, SSE conformance, and every fault kind."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import jsonschema
import pytest
from aiohttp import web

from vllm_medic.serve.client import EndpointError, ErrorKind, ServerClient
from vllm_medic.serve.metrics import PREFIX_CACHE_HITS, PREFIX_CACHE_QUERIES, diff

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city", "days"],
            "additionalProperties": False,
        },
    },
}
CHAT = {"messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 8}
STREAM_USAGE = {**CHAT, "stream_options": {"include_usage": True}}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_endpoints_and_readiness(make_sim) -> None:
    sim = make_sim(model="m1", max_model_len=2048)

    async def go() -> None:
        async with ServerClient(sim.url) as c:
            ready = await c.wait_ready(deadline_s=10)
            assert ready.ready and ready.models[0]["id"] == "m1"
            assert ready.models[0]["max_model_len"] == 2048
            h = await c.health()
            assert h.ok and h.status == 200 and h.error_kind is None
            assert (await c.version()).startswith("0.32.0")
            m = await c.metrics()
            assert m.cache_config_info()[0]["enable_prefix_caching"] == "True"
            t = await c.tokenize(messages=[{"role": "user", "content": "hello world"}])
            assert t is not None and t.count == len(t.tokens) > 2 and t.max_model_len == 2048
            t2 = await c.tokenize(prompt="hello world")
            assert t2 is not None and t2.count == 2

    run(go())


def test_nothing_listening_is_refused_and_wait_ready_is_bounded() -> None:
    url = f"http://127.0.0.1:{_free_port()}"

    async def go() -> None:
        async with ServerClient(url) as c:
            h = await c.health()
            assert not h.ok and h.error_kind is ErrorKind.REFUSED
            r = await c.wait_ready(deadline_s=1.0, interval_s=0.2)
            assert not r.ready and r.attempts >= 2 and r.waited_s < 5
            assert "Connect" in r.reason or "refused" in r.reason.lower()
            with pytest.raises(EndpointError) as exc:
                await c.models()
            assert exc.value.kind is ErrorKind.REFUSED
            s = await c.chat_stream(CHAT)
            assert not s.ok and s.error_kind is ErrorKind.REFUSED

    run(go())


async def _ok(request: web.Request) -> web.Response:
    return web.Response()


def test_tokenize_missing_endpoint_returns_none() -> None:
    async def go() -> None:
        app = web.Application()
        app.router.add_get("/health", _ok)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        try:
            async with ServerClient(f"http://127.0.0.1:{port}/v1") as c:
                assert await c.tokenize(prompt="x") is None
                assert await c.version() is None
        finally:
            await runner.cleanup()

    run(go())


def test_chat_nonstream_and_stream_conform(make_sim) -> None:
    sim = make_sim(itl_ms=3.0, ttft_ms=10.0, output_tokens=12)

    async def go() -> None:
        async with ServerClient(sim.url, model="sim-model") as c:
            r = await c.chat(CHAT)
            assert r.ok and r.finish_reason == "length" and r.completion_tokens == 8
            assert r.content and r.prompt_tokens and r.prompt_tokens > 0
            s = await c.chat_stream(STREAM_USAGE)
            assert s.ok, s.error
            assert s.problems == []
            assert s.saw_done and s.finish_reason == "length"
            assert s.completion_tokens == 8 and len(s.token_times) == 8
            assert s.ttft_s is not None and s.ttft_s >= 0.010
            assert s.e2e_s is not None and s.e2e_s >= s.ttft_s
            assert len(s.itl_s) == 7 and all(g >= 0.002 for g in s.itl_s)
            assert s.tpot_s is not None and s.tpot_s >= 0.002
            assert s.content == r.content
            # without include_usage: no usage chunk is expected, and token count falls back to chunks
            s2 = await c.chat_stream(CHAT)
            assert s2.ok and s2.problems == [] and s2.usage is None and s2.completion_tokens == 8

    run(go())


def test_intended_send_time_is_counted(make_sim) -> None:
    sim = make_sim()

    async def go() -> None:
        async with ServerClient(sim.url) as c:
            import time

            s = await c.chat_stream(CHAT, t_intended=time.perf_counter() - 1.0)
            assert s.ok and s.queue_delay_s >= 1.0 and s.ttft_s is not None and s.ttft_s >= 1.0

    run(go())


@pytest.mark.parametrize("status,kind", [(503, ErrorKind.HTTP_5XX), (429, ErrorKind.HTTP_4XX)])
def test_injected_http_errors(make_sim, status: int, kind: ErrorKind) -> None:
    sim = make_sim(error_rate=1.0, error_status=status)

    async def go() -> None:
        async with ServerClient(sim.url) as c:
            r = await c.chat(CHAT)
            assert not r.ok and r.status == status and r.error_kind is kind
            assert f"injected HTTP {status}" in (r.error or "")
            s = await c.chat_stream(CHAT)
            assert not s.ok and s.status == status and s.error_kind is kind

    run(go())


def test_mid_stream_disconnect_keeps_what_arrived(make_sim) -> None:
    sim = make_sim(disconnect_rate=1.0, disconnect_after=3)

    async def go() -> None:
        async with ServerClient(sim.url) as c:
            s = await c.chat_stream(STREAM_USAGE)
            assert not s.ok and s.error_kind is ErrorKind.DISCONNECT, (s.error_kind, s.error)
            assert len(s.token_times) >= 1 and not s.saw_done

    run(go())


def test_stall_is_detected_by_the_read_timeout(make_sim) -> None:
    sim = make_sim(stall_rate=1.0, stall_after=2, stall_s=20.0)

    async def go() -> None:
        async with ServerClient(sim.url, stall_timeout_s=0.5) as c:
            s = await c.chat_stream(CHAT)
            assert not s.ok and s.error_kind is ErrorKind.STALL, (s.error_kind, s.error)
            assert "mid-stream" in (s.error or "")

    run(go())


def test_total_timeout(make_sim) -> None:
    sim = make_sim(ttft_ms=3000.0)

    async def go() -> None:
        async with ServerClient(sim.url, timeout_s=0.5) as c:
            r = await c.chat(CHAT)
            assert not r.ok and r.error_kind is ErrorKind.TIMEOUT

    run(go())


def test_malformed_sse(make_sim) -> None:
    sim = make_sim(malformed_sse_rate=1.0, stall_after=2)

    async def go() -> None:
        async with ServerClient(sim.url) as c:
            s = await c.chat_stream(STREAM_USAGE)
            assert not s.ok and s.error_kind is ErrorKind.MALFORMED_SSE
            assert any("not JSON" in p for p in s.problems)

    run(go())


def test_tool_calls_need_a_parser_then_validate_against_the_schema(make_sim) -> None:
    body = {
        **CHAT,
        "tools": [WEATHER_TOOL],
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
    }
    schema = WEATHER_TOOL["function"]["parameters"]
    no_parser = make_sim()
    good = make_sim(tool_call_parser="hermes")
    bad = make_sim(tool_call_parser="hermes", bad_tool_args=True)

    async def go() -> None:
        async with ServerClient(no_parser.url) as c:
            r = await c.chat(body)
            assert r.status == 400 and "requires --tool-call-parser" in (r.error or "")
            s = await c.chat_stream(body)
            assert s.status == 400 and "requires --tool-call-parser" in (s.error or "")
        async with ServerClient(good.url) as c:
            r = await c.chat(body)
            args = json.loads(r.tool_calls[0]["function"]["arguments"])
            jsonschema.validate(args, schema)
            s = await c.chat_stream(STREAM_USAGE | {k: body[k] for k in ("tools", "tool_choice")})
            assert s.ok and s.problems == [], s.problems
            assert s.tool_calls[0]["function"]["name"] == "get_weather"
            jsonschema.validate(json.loads(s.tool_calls[0]["function"]["arguments"]), schema)
        async with ServerClient(bad.url) as c:
            r = await c.chat(body)
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(json.loads(r.tool_calls[0]["function"]["arguments"]), schema)

    run(go())


def test_api_key_is_sent_and_never_echoed(make_sim) -> None:
    key = "sk-test-SECRET-0123456789abcdef"
    sim = make_sim(api_key=key)

    async def go() -> None:
        async with ServerClient(sim.url) as c:
            with pytest.raises(EndpointError) as exc:
                await c.models()
            assert exc.value.status == 401
        async with ServerClient(sim.url, api_key=key) as c:
            assert (await c.models())[0]["id"] == "sim-model"
            assert (await c.chat(CHAT)).ok
            assert key not in c.redact(f"Authorization: Bearer {key} failed")
        refused = f"http://127.0.0.1:{_free_port()}"
        async with ServerClient(refused, api_key=key) as c:
            s = await c.chat_stream(CHAT)
            assert key not in (s.error or "") and key not in json.dumps(s.to_dict(), default=str)

    run(go())


def test_prefix_cache_deltas_and_cached_tokens(make_sim) -> None:
    sim = make_sim(block_size=16, enable_prompt_tokens_details=True)
    system = "You are a careful assistant. " * 30
    body = {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": "hi"}],
        "max_tokens": 4,
    }

    async def go() -> None:
        async with ServerClient(sim.url) as c:
            before = await c.metrics()
            first = await c.chat_stream(body | {"stream_options": {"include_usage": True}})
            second = await c.chat_stream(body | {"stream_options": {"include_usage": True}})
            d = diff(before, await c.metrics())
            assert first.cached_tokens is None  # vLLM omits details when nothing was cached
            assert second.cached_tokens and second.cached_tokens % 16 == 0
            assert second.cached_tokens >= second.prompt_tokens - 16
            assert d.counter(PREFIX_CACHE_QUERIES) == first.prompt_tokens + second.prompt_tokens
            assert d.counter(PREFIX_CACHE_HITS) == second.cached_tokens

    run(go())


def test_crash_at_concurrency_gives_503_then_refused(make_sim) -> None:
    sim = make_sim(crash_at_concurrency=3, itl_ms=20.0, output_tokens=50, crash_exit_after_s=0.5)

    async def go() -> None:
        async with ServerClient(sim.url, timeout_s=10) as c:
            results = await asyncio.gather(*(c.chat_stream(CHAT | {"max_tokens": 50}) for _ in range(3)))
            kinds = {r.error_kind for r in results}
            assert all(not r.ok for r in results)
            assert kinds <= {ErrorKind.DISCONNECT, ErrorKind.HTTP_5XX, ErrorKind.RESET}, kinds
            h = await c.health()
            assert h.status == 503 or h.error_kind is ErrorKind.REFUSED
            for _ in range(100):  # bounded: the port closes crash_exit_after_s after the crash
                h = await c.health(timeout_s=1)
                if h.error_kind is ErrorKind.REFUSED:
                    break
                await asyncio.sleep(0.1)
            assert h.error_kind is ErrorKind.REFUSED

    run(go())


def test_itl_is_per_token_when_chunks_carry_several_tokens() -> None:
    from vllm_medic.serve.client import StreamResult

    s = StreamResult(t_intended=0.0, t_send=0.0, ok=True, t_last=1.0)
    s.token_times = [0.1, 0.4, 0.5]  # 3 chunks carrying 7 tokens: 6 per-token samples over 2 gaps
    s.usage = {"completion_tokens": 7, "prompt_tokens": 3}
    assert s.itl_s == pytest.approx([0.1, 0.1, 0.1, 0.1 / 3, 0.1 / 3, 0.1 / 3])
    assert s.tpot_s == pytest.approx((1.0 - 0.1) / 6)
