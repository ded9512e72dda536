"""The streaming HTTP transport against a scripted loopback server: framing split anywhere, keep-alive."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_medic.serve.client import ErrorKind, ServerClient
from vllm_medic.serve.rawhttp import RawPool, ResponseDisconnected


def _chunked(payloads: list[bytes]) -> bytes:
    return b"".join(b"%x\r\n" % len(p) + p + b"\r\n" for p in payloads) + b"0\r\n\r\n"


def _sse(events: list[dict], sep: bytes = b"\n\n") -> list[bytes]:
    lines = [b"data: " + json.dumps(e).encode() + sep for e in events]
    return [*lines, b"data: [DONE]" + sep]


class Scripted:
    """A loopback server answering each request with the next scripted list of byte pieces."""

    def __init__(self, script: Callable[[int], tuple[list[bytes], bool]]) -> None:
        self.script = script
        self.connections = 0
        self.requests = 0
        self.server: asyncio.Server | None = None
        self.url = ""

    async def __aenter__(self) -> Scripted:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode().split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":")[1])
                await reader.readexactly(length)
                pieces, close = self.script(self.requests)
                self.requests += 1
                for p in pieces:
                    writer.write(p)
                    await writer.drain()
                    await asyncio.sleep(0)
                if close:
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


HEAD_CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
EVENTS = [
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]},
    *[{"choices": [{"index": 0, "delta": {"content": f" t{i}"}, "finish_reason": None}]} for i in range(5)],
    {"choices": [{"index": 0, "delta": {"content": " end"}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 6, "total_tokens": 9}},
]


def _split(blob: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(blob) + 1) for c in cuts} | {0, len(blob)})
    return [blob[a:b] for a, b in zip(points, points[1:], strict=False) if b > a]


@given(
    st.lists(st.integers(min_value=0, max_value=5000), max_size=25), st.sampled_from([b"\n\n", b"\r\n\r\n"])
)
@settings(max_examples=25, deadline=None)
def test_stream_survives_any_split_of_chunked_framing(cuts: list[int], sep: bytes) -> None:
    blob = HEAD_CHUNKED + _chunked(_sse(EVENTS, sep))

    async def go() -> None:
        async with Scripted(lambda i: (_split(blob, cuts), False)) as srv, ServerClient(srv.url) as c:
            s = await c.chat_stream({"messages": [], "stream_options": {"include_usage": True}})
            assert s.ok, (s.error_kind, s.error)
            assert s.problems == []
            assert s.content == " t0 t1 t2 t3 t4 end"
            assert s.completion_tokens == 6 and len(s.token_times) == 6
            assert s.finish_reason == "stop"

    asyncio.run(go())


def test_content_length_and_read_until_close_bodies() -> None:
    body = b"".join(_sse(EVENTS))
    with_length = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    until_close = b"HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + body

    async def go() -> None:
        for blob, close in ((with_length, False), (until_close, True)):
            async with (
                Scripted(lambda i, b=blob, c=close: ([b[:50], b[50:]], c)) as srv,
                ServerClient(srv.url) as c,
            ):
                s = await c.chat_stream({"messages": [], "stream_options": {"include_usage": True}})
                assert s.ok and s.completion_tokens == 6, (s.error_kind, s.error)

    asyncio.run(go())


def test_keep_alive_reuses_one_connection_and_retries_a_stale_one() -> None:
    blob = HEAD_CHUNKED + _chunked(_sse(EVENTS))

    async def go() -> None:
        async with Scripted(lambda i: ([blob], False)) as srv, ServerClient(srv.url) as c:
            for _ in range(3):
                assert (await c.chat_stream({"messages": []})).ok
            assert srv.connections == 1 and srv.requests == 3
        # The server closes after each answer: the pooled connection is stale on reuse.
        async with Scripted(
            lambda i: ([blob.replace(b"chunked\r\n", b"chunked\r\nConnection: keep-alive\r\n")], True)
        ) as srv:
            async with ServerClient(srv.url) as c:
                for _ in range(3):
                    s = await c.chat_stream({"messages": []})
                    assert s.ok, (s.error_kind, s.error)
            assert srv.requests == 3

    asyncio.run(go())


def test_broken_chunk_framing_and_truncated_body_are_disconnects() -> None:
    bad_size = HEAD_CHUNKED + b"zz\r\nhello\r\n"
    truncated = HEAD_CHUNKED + _chunked(_sse(EVENTS))[:400]

    async def go() -> None:
        async with Scripted(lambda i: ([bad_size], True)) as srv:
            pool = RawPool()
            with pytest.raises(ResponseDisconnected):
                await pool.stream(
                    srv.url + "/x", headers={}, body=b"{}", sink=lambda d, t: None, total_s=5, stall_s=None
                )
            pool.close()
        async with Scripted(lambda i: ([truncated], True)) as srv, ServerClient(srv.url) as c:
            s = await c.chat_stream({"messages": []})
            assert not s.ok and s.error_kind is ErrorKind.DISCONNECT and len(s.token_times) >= 1
            assert s.status == 200  # the answer had begun

    asyncio.run(go())


def test_non_200_body_is_kept_and_redacted() -> None:
    key = "sk-abcdefghijklmnopqrstuvwxyz012345"
    body = json.dumps({"error": {"message": f"bad key {key}", "code": 401}}).encode()
    blob = b"HTTP/1.1 401 Unauthorized\r\nContent-Length: %d\r\n\r\n" % len(body) + body

    async def go() -> None:
        async with Scripted(lambda i: ([blob], False)) as srv, ServerClient(srv.url, api_key=key) as c:
            s = await c.chat_stream({"messages": []})
            assert s.status == 401 and s.error_kind is ErrorKind.HTTP_4XX
            assert key not in (s.error or "") and key not in s.body_excerpt

    asyncio.run(go())


def test_stamps_do_not_include_other_streams_work() -> None:
    """Two streams readable in the same poll: slow processing of the first must not delay the second's
    stamp — with kernel stamps on any loop, with poll-time stamps on a timed loop; only a plain asyncio
    transport on a plain loop charges the first stream's 50 ms to the second."""
    import time

    from vllm_medic.serve import timedloop

    blob = HEAD_CHUNKED + _chunked(_sse(EVENTS))
    gate = asyncio.Event

    async def scenario(kernel_stamps: bool) -> float:
        release = gate()
        srv_ready: list[asyncio.StreamWriter] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            srv_ready.append(writer)
            await release.wait()
            writer.write(blob)  # both answers are written back to back, so one poll sees both
            await writer.drain()

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/x"
        stamps: dict[str, float] = {}

        def sink(name: str):
            def on_data(data: bytes, t: float) -> None:
                if name not in stamps:
                    stamps[name] = t
                    time.sleep(0.05)  # a slow consumer blocks the loop before the other callback runs

            return on_data

        pool = RawPool(kernel_stamps=kernel_stamps)
        tasks = [
            asyncio.create_task(
                pool.stream(url, headers={}, body=b"{}", sink=sink(n), total_s=10, stall_s=None)
            )
            for n in ("a", "b")
        ]
        while len(srv_ready) < 2:
            await asyncio.sleep(0.005)
        release.set()
        await asyncio.gather(*tasks)
        pool.close()
        server.close()
        return abs(stamps["a"] - stamps["b"])

    assert asyncio.run(scenario(kernel_stamps=True)) < 0.02
    assert timedloop.run(scenario(kernel_stamps=False)) < 0.02
    assert asyncio.run(scenario(kernel_stamps=False)) >= 0.045


def test_kernel_stamp_is_the_arrival_time_even_when_the_loop_is_blocked() -> None:
    import time

    from vllm_medic.serve.rawhttp import SO_TIMESTAMPNS

    if SO_TIMESTAMPNS is None:
        pytest.skip("kernel receive timestamps (SO_TIMESTAMPNS) are Linux-only")
    blob = HEAD_CHUNKED + _chunked(_sse(EVENTS))

    async def go() -> tuple[float, float]:
        written: list[float] = []

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(blob)
            written.append(time.perf_counter())
            time.sleep(0.2)  # block the whole loop right after the answer went out

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/x"
        stamps: list[float] = []
        pool = RawPool()
        await pool.stream(
            url, headers={}, body=b"{}", sink=lambda d, t: stamps.append(t), total_s=10, stall_s=None
        )
        pool.close()
        server.close()
        return written[0], stamps[0]

    # The read callback itself runs >= 200 ms after the bytes arrived; the stamp must not. On a loaded
    # 2-core machine one attempt can be descheduled between write() and the stamp, so take the best
    # of three: a fallback to loop time would be >= 0.2 s every time.
    # (the kernel has the bytes before writer.write() returns, hence the small negative tolerance)
    gaps = []
    for _ in range(3):
        t_written, t_stamp = asyncio.run(go())
        gaps.append(t_stamp - t_written)
        if -0.002 <= gaps[-1] < 0.05:
            break
    assert -0.002 <= min(gaps, key=abs) < 0.05, gaps
