"""A minimal HTTP/1.1 client on asyncio protocols, for streamed responses only.

Why not aiohttp here: the load generator must out-run the server it measures on one client core,
and time every read *on the socket read*. aiohttp's per-chunk Python layers (StreamReader, payload
parser callbacks) cost more than everything else we do per SSE event. Here every read is stamped
first — plain HTTP on Linux: the kernel's receive time (``_KernelStampTransport``, ``recvmsg`` with
``SO_TIMESTAMPNS``); otherwise, on a ``serve.timedloop`` loop, the moment the poll that found the bytes
returned; else ``time.perf_counter()`` — then the body is de-chunked in place and handed, with that
stamp, to the caller's sink. Everything else (health, models, metrics, non-streaming calls) stays on aiohttp.

Scope: HTTP/1.1 (plain or TLS), ``Content-Length`` or ``chunked`` or read-until-close bodies,
keep-alive pooling per (host, port, tls). No proxies, no redirects, no compression (vLLM sends none
for SSE). A pooled connection that dies before answering is retried once on a fresh one.

Errors raised (the client maps them to ErrorKind): ``ConnectionRefusedError``, ``socket.gaierror``,
``ConnectTimeout``, ``TimeoutError`` (total), ``StallError`` (no bytes for ``stall_s`` mid-response),
``ResponseDisconnected`` (closed before the body was complete), ``ConnectionResetError``,
``BodyTooLarge`` (raised by the sink to stop reading a body past its cap; the connection is dropped).
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl as ssl_mod
import struct
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from vllm_medic.serve.timedloop import TimedSelector, selector_for

# Linux's SO_TIMESTAMPNS (not exported by Python's socket module): the kernel stamps every received
# packet (CLOCK_REALTIME) and recvmsg() hands the stamp back as ancillary data.
SO_TIMESTAMPNS: int | None = getattr(
    socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None
)
Sink = Callable[[bytes, float], None]
HeadersHook = Callable[[int, dict[str, str], float], None]
MAX_HEADER_BYTES = 64 * 1024
MAX_ERROR_BODY = 64 * 1024


class StallError(Exception):
    pass


class ResponseDisconnected(Exception):
    def __init__(self, message: str, got_bytes: bool) -> None:
        super().__init__(message)
        self.got_bytes = got_bytes


class ConnectTimeout(Exception):
    pass


class BodyTooLarge(Exception):
    """A response body past its cap: the sink raises it, the connection is aborted, the request fails."""


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]
    t_headers: float
    body: bytes = b""  # only for non-2xx answers (bounded); 2xx bodies go to the sink
    got_bytes: bool = True


@dataclass
class _Req:
    sink: Sink
    done: asyncio.Future[RawResponse]
    on_headers: HeadersHook | None = None
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    t_headers: float = 0.0
    chunked: bool = False
    remaining: int = -1  # content-length left; -1 = until close
    keep_alive: bool = True
    error_body: bytearray | None = None
    last_read: float = 0.0
    got_bytes: bool = False


class _Conn(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.req: _Req | None = None
        self.buf = b""
        self.in_body = False
        self.closed = False
        self.chunk_left = 0  # bytes left in the current chunk (+2 for its CRLF once > 0)
        self.selector: TimedSelector | None = None

    # -- asyncio.Protocol ------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a loop's Transport or our _KernelStampTransport
        self.selector = selector_for(asyncio.get_running_loop())

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        req = self.req
        if req is None or req.done.done():
            return
        if self.in_body and not req.chunked and req.remaining < 0 and exc is None:
            self._finish(keep_alive=False)  # body delimited by close
            return
        if isinstance(exc, ConnectionResetError):
            req.done.set_exception(exc)
        else:
            where = "in the body" if self.in_body else "before a complete response"
            req.done.set_exception(
                ResponseDisconnected(f"server closed the connection {where}", req.got_bytes)
            )

    def data_received(self, data: bytes, t: float | None = None) -> None:
        # t: the kernel's receive time when the transport has it (_KernelStampTransport); else, on a
        # timed loop, when the poll that found these bytes returned (serve/timedloop.py); else now.
        if t is None:
            t = self.selector.poll_time if self.selector is not None else time.perf_counter()
        req = self.req
        if req is None or req.done.done():
            self.buf = b""
            return
        req.last_read = t
        req.got_bytes = True
        if self.in_body:
            self._body(data, t)
            return
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > MAX_HEADER_BYTES:
                self._fail(ResponseDisconnected("response headers too large", True))
            return
        head, rest = self.buf[:end], self.buf[end + 4 :]
        self.buf = b""
        try:
            self._headers(req, head, t)
        except ValueError as exc:
            self._fail(ResponseDisconnected(f"malformed HTTP response: {exc}", True))
            return
        self.in_body = True
        if req.on_headers is not None and req.status != 100:
            req.on_headers(req.status, req.headers, t)
        if req.status == 100:  # a 100 Continue before the real answer
            self.in_body = False
            if rest:
                self.data_received(rest)
            return
        if not req.chunked and req.remaining == 0:
            self._finish(req.keep_alive)
            return
        if rest:
            self._body(rest, t)

    # -- parsing ---------------------------------------------------------------------------------
    @staticmethod
    def _headers(req: _Req, head: bytes, t: float) -> None:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/"):
            raise ValueError(f"bad status line {lines[0][:80]!r}")
        req.status = int(parts[1])
        req.t_headers = t
        for line in lines[1:]:
            k, sep, v = line.partition(":")
            if sep:
                req.headers[k.strip().lower()] = v.strip()
        te = req.headers.get("transfer-encoding", "").lower()
        req.chunked = "chunked" in te
        if not req.chunked:
            cl = req.headers.get("content-length")
            req.remaining = int(cl) if cl is not None else -1
        conn = req.headers.get("connection", "").lower()
        req.keep_alive = (
            parts[0] != "HTTP/1.0" and "close" not in conn and (req.chunked or req.remaining >= 0)
        )
        if not 200 <= req.status < 300:
            req.error_body = bytearray()

    def _deliver(self, req: _Req, data: bytes, t: float) -> None:
        if req.error_body is not None:
            if len(req.error_body) < MAX_ERROR_BODY:
                req.error_body += data[: MAX_ERROR_BODY - len(req.error_body)]
        elif data:
            try:
                req.sink(data, t)
            except BodyTooLarge as exc:  # no traceback kept: its frames hold the sink's buffers
                self._fail(exc.with_traceback(None))

    def _body(self, data: bytes, t: float) -> None:
        req = self.req
        assert req is not None
        if not req.chunked:
            if req.remaining >= 0:
                data = data[: req.remaining]
                req.remaining -= len(data)
            self._deliver(req, data, t)
            if req.remaining == 0:
                self._finish(req.keep_alive)
            return
        buf = self.buf + data if self.buf else data
        self.buf = b""
        out: list[bytes] = []
        pos, n = 0, len(buf)
        while pos < n:
            if self.chunk_left > 0:
                take = min(self.chunk_left, n - pos)
                # payload bytes, then the chunk's trailing CRLF (counted in chunk_left as 2 extra bytes)
                payload_left = self.chunk_left - 2
                if payload_left > 0:
                    out.append(buf[pos : pos + min(take, payload_left)])
                self.chunk_left -= take
                pos += take
                continue
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                self.buf = buf[pos:]
                break
            size_text = buf[pos:eol].split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                self._fail(ResponseDisconnected(f"bad chunk size {size_text[:20]!r}", True))
                return
            pos = eol + 2
            if size == 0:
                if out:
                    self._deliver(req, b"".join(out), t)
                self._finish(req.keep_alive)  # trailers (rare) are ignored
                return
            self.chunk_left = size + 2
        if out:
            self._deliver(req, out[0] if len(out) == 1 else b"".join(out), t)

    def _finish(self, keep_alive: bool) -> None:
        req = self.req
        assert req is not None
        self.in_body = False
        self.chunk_left = 0
        self.buf = b""
        if not keep_alive and self.transport is not None:
            self.transport.close()
            self.closed = True
        resp = RawResponse(
            req.status, req.headers, req.t_headers, bytes(req.error_body or b""), req.got_bytes
        )
        if not req.done.done():
            req.done.set_result(resp)

    def _fail(self, exc: Exception) -> None:
        if self.transport is not None:
            self.transport.abort()
        self.closed = True
        if self.req is not None and not self.req.done.done():
            self.req.done.set_exception(exc)

    # -- use -------------------------------------------------------------------------------------
    def reusable(self) -> bool:
        return not self.closed and self.transport is not None and not self.transport.is_closing()


class _KernelStampTransport:
    """A plain-TCP transport reading with recvmsg(), so each read carries the kernel's receive time.

    Why: however busy the client's event loop is (hundreds of streams answered in the same engine step,
    or a crowded machine), the time a chunk *arrived* is then known exactly; the client's own delay
    cannot leak into TTFT/ITL. The kernel stamp (wall clock) becomes an age, subtracted from
    ``perf_counter()`` at the read. Minimal: what _Conn uses (write, close, abort, is_closing).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, protocol: _Conn) -> None:
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._proto = protocol
        self._closing = False
        self._wbuf = bytearray()
        loop.add_reader(self._fd, self._on_readable)
        protocol.connection_made(self)  # type: ignore[arg-type]  # duck-typed: what _Conn uses of a transport

    def write(self, data: bytes) -> None:
        if self._closing:
            return
        if self._wbuf:
            self._wbuf += data
            return
        try:
            n = self._sock.send(data)
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as exc:
            self._close(exc)
            return
        if n < len(data):
            self._wbuf += data[n:]
            self._loop.add_writer(self._fd, self._on_writable)

    def _on_writable(self) -> None:
        try:
            n = self._sock.send(self._wbuf)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._close(exc)
            return
        del self._wbuf[:n]
        if not self._wbuf:
            self._loop.remove_writer(self._fd)

    def _on_readable(self) -> None:
        try:
            data, anc, _flags, _addr = self._sock.recvmsg(262144, 64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._close(exc)
            return
        if not data:
            self._close(None)  # EOF
            return
        t = None
        for level, kind, payload in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(payload) >= 16:
                sec, nsec = struct.unpack("qq", payload[:16])
                age = time.time() - (sec + nsec * 1e-9)
                if 0.0 <= age < 60.0:
                    t = time.perf_counter() - age
        self._proto.data_received(data, t)

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._close(None)

    def abort(self) -> None:
        self._close(None)

    def _close(self, exc: Exception | None) -> None:
        if self._closing:
            return
        self._closing = True
        self._loop.remove_reader(self._fd)
        self._loop.remove_writer(self._fd)
        self._sock.close()
        self._loop.call_soon(self._proto.connection_lost, exc)


class RawPool:
    """Keep-alive connections for one event loop. Not thread-safe."""

    def __init__(self, connect_timeout_s: float = 30.0, kernel_stamps: bool = True) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.kernel_stamps = kernel_stamps and SO_TIMESTAMPNS is not None
        self._idle: dict[tuple[str, int, bool], list[_Conn]] = {}
        self._heads: dict[
            tuple[str, str, tuple[tuple[str, str], ...]], tuple[tuple[str, int, bool], bytes]
        ] = {}
        self._ssl: ssl_mod.SSLContext | None = None
        self._addrs: dict[tuple[str, int], list[tuple[int, tuple[Any, ...]]]] = {}

    async def _connect(self, host: str, port: int, tls: bool) -> _Conn:
        loop = asyncio.get_running_loop()
        ssl_ctx = None
        if tls:
            if self._ssl is None:
                self._ssl = ssl_mod.create_default_context()
            ssl_ctx = self._ssl
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                if ssl_ctx is None and self.kernel_stamps:
                    return await self._connect_stamped(loop, host, port)
                _, conn = await loop.create_connection(_Conn, host, port, ssl=ssl_ctx)
        except TimeoutError:
            raise ConnectTimeout(
                f"connect to {host}:{port} took longer than {self.connect_timeout_s} s"
            ) from None
        return conn

    async def _connect_stamped(self, loop: asyncio.AbstractEventLoop, host: str, port: int) -> _Conn:
        addrs = self._addrs.get((host, port))
        if addrs is None:
            try:
                ipaddress.ip_address(host)
                infos: list[tuple[int, tuple[Any, ...]]] = [
                    (socket.AF_INET6 if ":" in host else socket.AF_INET, (host, port))
                ]
            except ValueError:
                found = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                infos = [(fam, addr) for fam, _, _, _, addr in found]
            addrs = self._addrs[(host, port)] = infos
        last_exc: OSError | None = None
        for family, addr in addrs:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # type: ignore[arg-type]  # not None: kernel_stamps
                await loop.sock_connect(sock, addr)
            except OSError as exc:
                sock.close()
                last_exc = exc
                continue
            except BaseException:
                sock.close()
                raise
            conn = _Conn()
            _KernelStampTransport(loop, sock, conn)
            return conn
        assert last_exc is not None
        raise last_exc

    async def stream(
        self,
        url: str,
        *,
        method: str = "POST",
        headers: dict[str, str],
        body: bytes,
        sink: Sink,
        total_s: float | None,
        stall_s: float | None,
        on_headers: HeadersHook | None = None,
    ) -> RawResponse:
        cache_key = (method, url, tuple(headers.items()))
        prepared = self._heads.get(cache_key)
        if prepared is None:  # parse the URL and build the header block once per (url, headers)
            parts = urlsplit(url)
            tls = parts.scheme == "https"
            host = parts.hostname or "127.0.0.1"
            port = parts.port or (443 if tls else 80)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            host_header = host if parts.port is None else f"{host}:{port}"
            head = [f"{method} {path or '/'} HTTP/1.1", f"Host: {host_header}"]
            head += [f"{k}: {v}" for k, v in headers.items()]
            prepared = ((host, port, tls), ("\r\n".join(head) + "\r\nContent-Length: ").encode("latin-1"))
            if len(self._heads) < 64:
                self._heads[cache_key] = prepared
        key, head_bytes = prepared
        host, port, tls = key
        request = head_bytes + b"%d\r\n\r\n" % len(body) + body
        for attempt in (0, 1):
            idle = self._idle.get(key) or []
            conn = None
            while idle:
                cand = idle.pop()
                if cand.reusable():
                    conn = cand
                    break
            reused = conn is not None
            async with asyncio.timeout(total_s):
                if conn is None:
                    conn = await self._connect(host, port, tls)
                try:
                    return await self._exchange(conn, key, request, sink, stall_s, on_headers)
                except ResponseDisconnected as exc:
                    if reused and attempt == 0 and not exc.got_bytes:
                        continue  # a stale keep-alive connection: once more on a fresh one
                    raise
        raise AssertionError("unreachable")

    async def _exchange(
        self,
        conn: _Conn,
        key: tuple[str, int, bool],
        request: bytes,
        sink: Sink,
        stall_s: float | None,
        on_headers: HeadersHook | None,
    ) -> RawResponse:
        loop = asyncio.get_running_loop()
        req = _Req(sink=sink, done=loop.create_future(), on_headers=on_headers, last_read=time.perf_counter())
        conn.req = req
        conn.in_body = False
        conn.buf = b""
        assert conn.transport is not None
        conn.transport.write(request)
        watchdog: asyncio.TimerHandle | None = None
        stall = stall_s or 0.0  # check_stall only runs when a stall limit is set

        def check_stall() -> None:
            nonlocal watchdog
            if req.done.done():
                return
            idle_for = time.perf_counter() - req.last_read
            if req.got_bytes and idle_for >= stall:
                conn._fail(StallError(f"no bytes for {stall_s} s mid-response"))
                return
            watchdog = loop.call_later(max(0.01, stall - idle_for), check_stall)

        if stall_s:
            watchdog = loop.call_later(stall_s, check_stall)
        try:
            resp = await req.done
        except BaseException:
            if conn.transport is not None:
                conn.transport.abort()
            conn.closed = True
            raise
        finally:
            if watchdog is not None:
                watchdog.cancel()
            conn.req = None
            # check_stall's closure holds itself (it reschedules itself) and ``req``, whose sink holds the
            # caller's buffers: emptying the cell frees them now, not at the next full GC pass.
            check_stall = None  # type: ignore[assignment]  # noqa: F841 - empties the closure cell, as said
        if conn.reusable():
            self._idle.setdefault(key, []).append(conn)
        return resp

    def close(self) -> None:
        for conns in self._idle.values():
            for c in conns:
                if c.transport is not None:
                    c.transport.close()
        self._idle.clear()
