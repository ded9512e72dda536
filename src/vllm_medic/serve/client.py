"""Async client for a live vLLM (or any OpenAI-compatible) server: the one place that talks HTTP to it.

Usage (one aiohttp session per client; create the client inside the event loop that uses it)::

    async with ServerClient("http://127.0.0.1:8000", api_key=os.environ.get(name)) as c:
        ready = await c.wait_ready(deadline_s=120)     # ReadyResult: /health then /v1/models, bounded
        h = await c.health()                           # HealthResult(ok, status, latency_s, error_kind, error)
        models = await c.models()                      # list of ModelCard dicts (with max_model_len)
        v = await c.version()                          # "0.32.0" or None where /version is missing
        m = await c.metrics()                          # serve.metrics.Metrics (parsed /metrics)
        t = await c.tokenize(messages=[...])           # TokenizeResult, or None where /tokenize is missing
        r = await c.chat({...})                        # ChatResult (non-streaming)
        s = await c.chat_stream({...})                 # StreamResult (SSE, timestamps on socket read)

Conventions:
- Nothing here raises for what the *server* did: results carry ``ok``, ``status``, ``error_kind``
  (one of ``ErrorKind``) and a redacted ``error``. ``models()``/``metrics()``/``version()`` raise
  ``EndpointError`` (a ``ToolError``, exit 3 when uncaught) because they have no result object.
- The API key comes from the caller (read it from an environment variable, never argv); it is sent as
  ``Authorization: Bearer`` and scrubbed from every error message and body excerpt we keep.
- Times are ``time.perf_counter()`` seconds. ``chat_stream`` stamps every read from the socket before
  parsing it (with the kernel's receive time for plain HTTP on Linux, see ``serve.rawhttp``); every
  SSE event completed by that read carries that stamp. Pass ``t_intended`` (the
  time the request *should* have been sent, from an open-loop schedule) to measure latency from it
  rather than from the actual send, so client-side queueing is counted.
- Every body read is capped (``MAX_BODY_BYTES`` whole, ``MAX_STREAM_BYTES`` and ``MAX_KEPT_CHUNKS``
  streamed): past the cap the connection is dropped and the result says so (``ErrorKind.TOO_LARGE``,
  "cut at N MiB"), so a server answering 200 MB costs the cap, never the body.
- Metric definitions (TTFT, TPOT, ITL, E2E) are in ``docs/metrics.md``; ``StreamResult`` implements
  them: tokens are counted from ``usage``, not from chunks.
- Streams (``chat_stream``) go over ``serve.rawhttp`` — a minimal HTTP/1.1 transport that stamps each
  socket read — and always connect directly; the other calls use aiohttp, which honours environment
  proxies only with ``trust_env=True``. An acceptance run talks to the server directly.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from vllm_medic.errors import ToolError
from vllm_medic.redact import redact_text
from vllm_medic.serve.metrics import Metrics, parse_prometheus
from vllm_medic.serve.rawhttp import BodyTooLarge, ConnectTimeout, RawPool, ResponseDisconnected, StallError
from vllm_medic.serve.sse import MAX_PROBLEMS, SSEParser, check_chat_stream

BODY_EXCERPT_CHARS = 2000
MAX_BODY_BYTES = 16 * 1024 * 1024  # a whole response (/metrics, /v1/models, a non-streamed completion)
MAX_STREAM_BYTES = 4 * 1024 * 1024  # one streamed (SSE) response (a 64-token answer is ~20 KB)
MAX_KEPT_CHUNKS = 20_000  # SSE chunks kept for the conformance checks (a 64-token answer has ~70)
MAX_EVENT_BYTES = 1024 * 1024  # one SSE event still without its end (vLLM's are a few hundred bytes)
_HEALTH_BODY_BYTES = 64 * 1024  # /health's body is never used

_loads: Callable[[bytes | str], Any]

try:  # orjson parses SSE chunks several times faster; the stdlib is the fallback
    import orjson

    _loads = orjson.loads

    def _dumps(obj: Any) -> bytes:
        return orjson.dumps(obj)
except ImportError:  # pragma: no cover - orjson is a declared dependency
    _loads = json.loads

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj).encode()


class ErrorKind(StrEnum):
    REFUSED = "refused"  # nothing listening
    DNS = "dns"
    CONNECT_TIMEOUT = "connect_timeout"
    TIMEOUT = "timeout"  # the whole request took longer than its timeout
    STALL = "stall"  # no bytes for stall_timeout_s in the middle of a response
    RESET = "reset"  # connection reset by peer
    DISCONNECT = "disconnect"  # server closed the connection before the response/stream was complete
    HTTP_4XX = "http_4xx"
    HTTP_5XX = "http_5xx"
    MALFORMED_SSE = "malformed_sse"  # a data line that is not JSON, or broken framing
    STREAM_ERROR = "stream_error"  # the server sent an error object inside the stream
    BAD_JSON = "bad_json"  # non-streaming response that is not JSON
    TOO_LARGE = "too_large"  # the body passed its cap (MAX_BODY_BYTES / MAX_STREAM_BYTES): cut, not parsed
    OTHER = "other"


class EndpointError(ToolError):
    def __init__(self, message: str, kind: ErrorKind, status: int | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status


@dataclass
class HealthResult:
    ok: bool
    status: int | None
    latency_s: float
    error_kind: ErrorKind | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "status": self.status,
            "latency_s": self.latency_s,
            "error_kind": self.error_kind,
            "error": self.error,
        }


@dataclass
class ReadyResult:
    ready: bool
    waited_s: float
    attempts: int
    last_health: HealthResult | None
    models: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "waited_s": self.waited_s,
            "attempts": self.attempts,
            "last_health": self.last_health.to_dict() if self.last_health else None,
            "models": [m.get("id") for m in self.models],
            "reason": self.reason,
        }


@dataclass
class TokenizeResult:
    count: int
    tokens: list[int]
    max_model_len: int | None
    token_strs: list[str] | None = None


def _usage_int(usage: dict[str, Any] | None, key: str) -> int | None:
    if not usage:
        return None
    v = usage.get(key)
    return int(v) if isinstance(v, int | float) else None


def _cached_tokens(usage: dict[str, Any] | None) -> int | None:
    """``usage.prompt_tokens_details.cached_tokens``; vLLM omits the details when 0 tokens were cached."""
    if not usage:
        return None
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
        return details["cached_tokens"]
    return None


@dataclass
class ChatResult:
    ok: bool
    status: int | None
    latency_s: float
    json: dict[str, Any] | None = None
    error_kind: ErrorKind | None = None
    error: str | None = None
    body_excerpt: str = ""

    @property
    def usage(self) -> dict[str, Any] | None:
        return (self.json or {}).get("usage") or None

    @property
    def message(self) -> dict[str, Any]:
        choices = (self.json or {}).get("choices") or [{}]
        return (choices[0] or {}).get("message") or {}

    @property
    def content(self) -> str | None:
        return self.message.get("content")

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        return self.message.get("tool_calls") or []

    @property
    def finish_reason(self) -> str | None:
        choices = (self.json or {}).get("choices") or [{}]
        return (choices[0] or {}).get("finish_reason")

    @property
    def prompt_tokens(self) -> int | None:
        return _usage_int(self.usage, "prompt_tokens")

    @property
    def completion_tokens(self) -> int | None:
        return _usage_int(self.usage, "completion_tokens")

    @property
    def cached_tokens(self) -> int | None:
        return _cached_tokens(self.usage)


@dataclass
class StreamResult:
    """One streamed request. Times are perf_counter seconds; see docs/metrics.md for the definitions."""

    t_intended: float
    t_send: float
    ok: bool = False
    status: int | None = None
    error_kind: ErrorKind | None = None
    error: str | None = None
    t_headers: float | None = None
    t_first_event: float | None = None
    t_last: float | None = None
    token_times: list[float] = field(default_factory=list)
    n_events: int = 0
    saw_done: bool = False
    chunks: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    content: str = ""
    reasoning: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    body_excerpt: str = ""

    @property
    def ttft_s(self) -> float | None:
        return self.token_times[0] - self.t_intended if self.token_times else None

    @property
    def e2e_s(self) -> float | None:
        return self.t_last - self.t_intended if self.t_last is not None and self.ok else None

    @property
    def queue_delay_s(self) -> float:
        return max(0.0, self.t_send - self.t_intended)

    @property
    def prompt_tokens(self) -> int | None:
        return _usage_int(self.usage, "prompt_tokens")

    @property
    def completion_tokens(self) -> int | None:
        """From ``usage``; falls back to the number of token-bearing chunks when the server sent no usage."""
        n = _usage_int(self.usage, "completion_tokens")
        return n if n is not None else (len(self.token_times) or None)

    @property
    def cached_tokens(self) -> int | None:
        return _cached_tokens(self.usage)

    @property
    def tpot_s(self) -> float | None:
        """(E2E − TTFT) / (completion_tokens − 1): decode time per output token after the first."""
        n, e2e, ttft = self.completion_tokens, self.e2e_s, self.ttft_s
        if n is None or n < 2 or e2e is None or ttft is None or not self.token_times:
            return None
        return (e2e - ttft) / (n - 1)

    @property
    def itl_s(self) -> list[float]:
        """Per-token inter-token latencies from the gaps between consecutive token-bearing chunks.

        When ``usage`` says more tokens than chunks came (vLLM coalesces tokens into one chunk when its
        output loop falls behind), each gap stands for the mean number of tokens per chunk: it is divided
        by that number and counted that many times, so there are ``completion_tokens - 1`` samples.
        """
        times = self.token_times
        if len(times) < 2:
            return []
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        n = _usage_int(self.usage, "completion_tokens")
        if n is None or n <= len(times):
            return gaps
        m = len(gaps)
        per_gap = (n - 1) / m
        base, extra = divmod(n - 1, m)
        out: list[float] = []
        for j, g in enumerate(gaps):
            out.extend([g / per_gap] * (base + (1 if j < extra else 0)))
        return out

    def to_dict(self, with_chunks: bool = False) -> dict[str, Any]:
        d = {
            "ok": self.ok,
            "status": self.status,
            "error_kind": self.error_kind,
            "error": self.error,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "e2e_s": self.e2e_s,
            "queue_delay_s": self.queue_delay_s,
            "n_events": self.n_events,
            "n_token_chunks": len(self.token_times),
            "saw_done": self.saw_done,
            "problems": list(self.problems),
            "finish_reason": self.finish_reason,
            "usage": self.usage,
            "content": self.content,
            "tool_calls": self.tool_calls,
        }
        if with_chunks:
            d["chunks"] = self.chunks
        return d


def _mib(n: int) -> str:
    return f"{n / 2**20:g} MiB"


def too_large(what: str, cap: int) -> str:
    return f"{what} is larger than {_mib(cap)}: cut at {_mib(cap)}, not parsed"


async def read_capped(resp: Any, cap: int = MAX_BODY_BYTES) -> tuple[bytes, bool]:  # noqa: ANN401 - aiohttp
    """Up to ``cap`` bytes of an aiohttp response body, and whether it was cut. Past the cap the
    connection is closed instead of drained: the rest of a 200 MB answer is never read."""
    chunks: list[bytes] = []
    total = 0
    while total <= cap:
        chunk = await resp.content.read(min(1 << 20, cap + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    data = b"".join(chunks)
    if total > cap:
        resp.close()
        return data[:cap], True
    return data, False


def classify_exception(exc: BaseException, *, mid_response: bool = False) -> ErrorKind:
    """Map a client-side exception to an ErrorKind (pure; used by the client and the load generator)."""
    if isinstance(exc, BodyTooLarge):
        return ErrorKind.TOO_LARGE
    if isinstance(exc, StallError):
        return ErrorKind.STALL
    if isinstance(exc, ConnectTimeout):
        return ErrorKind.CONNECT_TIMEOUT
    if isinstance(exc, ResponseDisconnected):
        return ErrorKind.DISCONNECT
    if isinstance(exc, ConnectionRefusedError) or (
        isinstance(exc, OSError) and not isinstance(exc, TimeoutError) and "refused" in str(exc).lower()
    ):
        return ErrorKind.REFUSED
    import aiohttp

    dns_error = getattr(aiohttp, "ClientConnectorDNSError", socket.gaierror)
    connect_timeout = getattr(aiohttp, "ConnectionTimeoutError", ())
    sock_read_timeout = getattr(aiohttp, "SocketTimeoutError", aiohttp.ServerTimeoutError)
    if isinstance(exc, dns_error | socket.gaierror):
        return ErrorKind.DNS
    if connect_timeout and isinstance(exc, connect_timeout):
        return ErrorKind.CONNECT_TIMEOUT
    if isinstance(exc, sock_read_timeout):
        return ErrorKind.STALL if mid_response else ErrorKind.TIMEOUT
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return ErrorKind.TIMEOUT
    if isinstance(exc, aiohttp.ClientConnectorError):
        cause = exc.os_error
        if isinstance(cause, ConnectionRefusedError):
            return ErrorKind.REFUSED
        if isinstance(cause, TimeoutError):
            return ErrorKind.CONNECT_TIMEOUT
        return ErrorKind.REFUSED if "refused" in str(exc).lower() else ErrorKind.OTHER
    if isinstance(exc, ConnectionResetError) or (
        isinstance(exc, aiohttp.ClientOSError) and "reset" in str(exc).lower()
    ):
        return ErrorKind.RESET
    if isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        return ErrorKind.DISCONNECT
    if isinstance(exc, aiohttp.ClientOSError | ConnectionError):
        return ErrorKind.RESET
    return ErrorKind.OTHER


def http_kind(status: int) -> ErrorKind:
    return ErrorKind.HTTP_5XX if status >= 500 else ErrorKind.HTTP_4XX


class ServerClient:
    """See the module docstring. Not thread-safe; one per event loop."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        model: str | None = None,
        stall_timeout_s: float | None = None,
        trust_env: bool = False,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        if self.base_url.endswith("/v1"):
            self.base_url = self.base_url[: -len("/v1")]
        self.api_key = api_key or None
        self.timeout_s = timeout_s
        self.stall_timeout_s = stall_timeout_s
        self.model = model
        self.trust_env = trust_env
        self._session: Any = None
        self._raw: RawPool | None = None
        self._stream_headers: dict[str, str] | None = None

    # -- session -------------------------------------------------------------------------------
    async def __aenter__(self) -> ServerClient:
        self._ensure_session()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _ensure_session(self) -> Any:
        if self._session is None or self._session.closed:
            import aiohttp

            headers = {"User-Agent": "vllm-medic"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            # limit=0: no connection-pool cap (aiohttp's default of 100 silently queues requests).
            plain = self.base_url.startswith("http://")  # no TLS context to build for plain HTTP
            connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, ssl=not plain)
            self._session = aiohttp.ClientSession(
                headers=headers,
                connector=connector,
                trust_env=self.trust_env,
                read_bufsize=1 << 20,
                max_line_size=1 << 20,
                max_field_size=1 << 16,
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None
        if self._raw is not None:
            self._raw.close()
            self._raw = None

    def redact(self, text: str) -> str:
        if self.api_key:
            text = text.replace(self.api_key, "***REDACTED***")
        return redact_text(text)

    def _timeout(self, total: float | None, stall: float | None = None) -> Any:
        import aiohttp

        return aiohttp.ClientTimeout(
            total=total or self.timeout_s, sock_read=stall, sock_connect=total or self.timeout_s
        )

    def _with_model(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.model and "model" not in body:
            return {"model": self.model, **body}
        return body

    # -- simple endpoints ------------------------------------------------------------------------
    async def health(self, timeout_s: float | None = None) -> HealthResult:
        session = self._ensure_session()
        t0 = time.perf_counter()
        try:
            async with session.get(
                self.base_url + "/health", timeout=self._timeout(timeout_s or 10.0)
            ) as resp:
                await read_capped(resp, _HEALTH_BODY_BYTES)
                status = resp.status
        except Exception as exc:  # noqa: BLE001 - classified into an ErrorKind, never raised
            return HealthResult(
                False, None, time.perf_counter() - t0, classify_exception(exc), self._exc_text(exc)
            )
        latency = time.perf_counter() - t0
        if status == 200:
            return HealthResult(True, status, latency)
        return HealthResult(False, status, latency, http_kind(status), f"/health answered HTTP {status}")

    async def _get(self, path: str, timeout_s: float | None = None) -> tuple[int, bytes]:
        """Status and body; a body past ``MAX_BODY_BYTES`` is an EndpointError (TOO_LARGE) saying so."""
        session = self._ensure_session()
        try:
            async with session.get(self.base_url + path, timeout=self._timeout(timeout_s)) as resp:
                status = resp.status
                body, cut = await read_capped(resp)
        except Exception as exc:  # noqa: BLE001
            kind = classify_exception(exc)
            raise EndpointError(
                f"GET {self.base_url}{path} failed ({kind}): {self._exc_text(exc)}", kind
            ) from None
        if cut:
            raise EndpointError(
                f"GET {self.base_url}{path}: {too_large(f'the answer (HTTP {status})', MAX_BODY_BYTES)}",
                ErrorKind.TOO_LARGE,
                status,
            )
        return status, body

    def _status_error(self, method: str, path: str, status: int, body: bytes) -> EndpointError:
        excerpt = self.redact(body[:400].decode("utf-8", errors="replace"))
        return EndpointError(
            f"{method} {self.base_url}{path} answered HTTP {status}: {excerpt}", http_kind(status), status
        )

    async def models(self) -> list[dict[str, Any]]:
        status, body = await self._get("/v1/models")
        if status != 200:
            raise self._status_error("GET", "/v1/models", status, body)
        try:
            data = json.loads(body)
            return [m for m in data.get("data", []) if isinstance(m, dict)]
        except (ValueError, AttributeError):
            raise EndpointError(
                f"GET {self.base_url}/v1/models: not a model list: {self.redact(body[:200].decode(errors='replace'))}",
                ErrorKind.BAD_JSON,
                status,
            ) from None

    async def version(self) -> str | None:
        status, body = await self._get("/version")
        if status == 404:
            return None
        if status != 200:
            raise self._status_error("GET", "/version", status, body)
        try:
            v = json.loads(body).get("version")
        except (ValueError, AttributeError):
            return None
        return str(v) if v is not None else None

    async def metrics_text(self) -> str:
        status, body = await self._get("/metrics")
        if status != 200:
            raise self._status_error("GET", "/metrics", status, body)
        return body.decode("utf-8", errors="replace")

    async def metrics(self) -> Metrics:
        return parse_prometheus(await self.metrics_text())

    async def tokenize(
        self,
        messages: list[dict[str, Any]] | None = None,
        prompt: str | None = None,
        tools: list[dict[str, Any]] | None = None,
        add_generation_prompt: bool = True,
    ) -> TokenizeResult | None:
        """Token count of a chat (template applied, like the server does) or a plain prompt.

        Returns None where the server has no ``/tokenize`` (HTTP 404/405); raises EndpointError otherwise.
        """
        if (messages is None) == (prompt is None):
            raise ValueError("tokenize needs exactly one of messages= or prompt=")
        body: dict[str, Any]
        if messages is not None:
            body = {"messages": messages, "add_generation_prompt": add_generation_prompt}
            if tools:
                body["tools"] = tools
        else:
            body = {"prompt": prompt}
        body = self._with_model(body)
        session = self._ensure_session()
        try:
            async with session.post(
                self.base_url + "/tokenize", json=body, timeout=self._timeout(None)
            ) as resp:
                status = resp.status
                raw, cut = await read_capped(resp)
        except Exception as exc:  # noqa: BLE001
            kind = classify_exception(exc)
            raise EndpointError(
                f"POST {self.base_url}/tokenize failed ({kind}): {self._exc_text(exc)}", kind
            ) from None
        if cut:
            raise EndpointError(
                f"POST {self.base_url}/tokenize: {too_large(f'the answer (HTTP {status})', MAX_BODY_BYTES)}",
                ErrorKind.TOO_LARGE,
                status,
            )
        if status in (404, 405):
            return None
        if status != 200:
            raise self._status_error("POST", "/tokenize", status, raw)
        try:
            data = json.loads(raw)
            return TokenizeResult(
                count=int(data["count"]),
                tokens=list(data.get("tokens") or []),
                max_model_len=data.get("max_model_len"),
                token_strs=data.get("token_strs"),
            )
        except (ValueError, KeyError, TypeError):
            raise EndpointError(
                f"POST {self.base_url}/tokenize: unexpected answer {self.redact(raw[:200].decode(errors='replace'))}",
                ErrorKind.BAD_JSON,
                status,
            ) from None

    async def wait_ready(self, deadline_s: float, interval_s: float = 0.5) -> ReadyResult:
        """Poll /health, then /v1/models, until both answer or ``deadline_s`` passes (bounded)."""
        t0 = time.perf_counter()
        attempts = 0
        last: HealthResult | None = None
        reason = ""
        while True:
            attempts += 1
            remaining = deadline_s - (time.perf_counter() - t0)
            last = await self.health(timeout_s=max(0.5, min(10.0, remaining)))
            if last.ok:
                try:
                    models = await self.models()
                except EndpointError as exc:
                    reason = str(exc)
                else:
                    if models:
                        return ReadyResult(True, time.perf_counter() - t0, attempts, last, models)
                    reason = "/v1/models lists no model yet"
            else:
                reason = last.error or f"/health answered HTTP {last.status}"
            if time.perf_counter() - t0 + interval_s > deadline_s:
                return ReadyResult(False, time.perf_counter() - t0, attempts, last, [], reason)
            await asyncio.sleep(interval_s)

    # -- generation ------------------------------------------------------------------------------
    async def chat(self, body: dict[str, Any], timeout_s: float | None = None) -> ChatResult:
        return await self._post_json("/v1/chat/completions", body, timeout_s)

    async def completion(self, body: dict[str, Any], timeout_s: float | None = None) -> ChatResult:
        return await self._post_json("/v1/completions", body, timeout_s)

    async def _post_json(self, path: str, body: dict[str, Any], timeout_s: float | None) -> ChatResult:
        session = self._ensure_session()
        payload = json.dumps(self._with_model({**body, "stream": False})).encode()
        t0 = time.perf_counter()
        try:
            async with session.post(
                self.base_url + path,
                data=payload,
                headers={"Content-Type": "application/json"},
                timeout=self._timeout(timeout_s, self.stall_timeout_s),
            ) as resp:
                status = resp.status
                raw, cut = await read_capped(resp)
        except Exception as exc:  # noqa: BLE001
            return ChatResult(
                False, None, time.perf_counter() - t0, None, classify_exception(exc), self._exc_text(exc)
            )
        latency = time.perf_counter() - t0
        excerpt = self.redact(raw[:BODY_EXCERPT_CHARS].decode("utf-8", errors="replace"))
        if cut:
            return ChatResult(
                False, status, latency, None, ErrorKind.TOO_LARGE,
                too_large(f"the answer (HTTP {status})", MAX_BODY_BYTES), excerpt,
            )  # fmt: skip
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
        if status != 200:
            return ChatResult(
                False, status, latency, data if isinstance(data, dict) else None, http_kind(status),
                self.redact(f"HTTP {status}: {_error_message(data) or excerpt[:400]}"), excerpt,
            )  # fmt: skip
        if not isinstance(data, dict):
            return ChatResult(
                False, status, latency, None, ErrorKind.BAD_JSON, "response is not a JSON object", excerpt
            )
        return ChatResult(True, status, latency, data, body_excerpt=excerpt)

    async def chat_stream(
        self,
        body: dict[str, Any],
        *,
        t_intended: float | None = None,
        timeout_s: float | None = None,
        stall_timeout_s: float | None = None,
        keep_chunks: bool = True,
        path: str = "/v1/chat/completions",
    ) -> StreamResult:
        """Stream one request. Never raises for network/server trouble; see StreamResult.error_kind.

        ``keep_chunks=False`` (the load generator) skips storing chunks and the conformance checks.
        """
        body = self._with_model({**body, "stream": True})
        want_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        payload = _dumps(body)
        stall = stall_timeout_s if stall_timeout_s is not None else self.stall_timeout_s
        if self._raw is None:
            self._raw = RawPool(connect_timeout_s=self.timeout_s)
        t_send = time.perf_counter()
        res = StreamResult(t_intended=t_intended if t_intended is not None else t_send, t_send=t_send)
        state = _StreamState(res, keep_chunks, self.redact)
        try:
            raw = await self._raw.stream(
                self.base_url + path,
                headers=self._raw_headers,
                body=payload,
                sink=state.on_data,
                total_s=timeout_s or self.timeout_s,
                stall_s=stall,
                on_headers=state.on_headers,
            )
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
            # The traceback holds the transport's frames (and through them this stream's buffers) in a
            # cycle with the request's future: dropped here, they are freed now rather than at a GC pass.
            exc.__traceback__ = None
            res.t_last = time.perf_counter()
            state.finish_text()
            res.error_kind = classify_exception(exc, mid_response=state.res.n_events > 0)
            res.error = self._exc_text(exc)
            if res.error_kind is ErrorKind.STALL:
                res.error = f"no bytes for {stall} s mid-stream ({res.n_events} events received)"
            return res
        res.status = raw.status
        res.t_headers = raw.t_headers
        if raw.status != 200:
            res.t_last = time.perf_counter()
            res.body_excerpt = self.redact(raw.body[:BODY_EXCERPT_CHARS].decode("utf-8", errors="replace"))
            try:
                msg = _error_message(_loads(raw.body))
            except ValueError:
                msg = None
            res.error_kind = http_kind(raw.status)
            res.error = self.redact(f"HTTP {raw.status}: {msg or res.body_excerpt[:400]}")
            return res
        parser = state.parser
        if not res.saw_done:
            tail = parser.close()
            if tail:
                state.consume(tail)
        state.finish_text()
        res.t_last = res.t_last or time.perf_counter()
        res.problems.extend(parser.problems)
        if res.error_kind is None and not res.saw_done:
            res.error_kind = ErrorKind.DISCONNECT
            res.error = f"stream ended after {res.n_events} events without [DONE]"
        if res.error_kind is None and parser.problems:
            res.error_kind = ErrorKind.MALFORMED_SSE
            res.error = parser.problems[0]
        if keep_chunks and path.endswith("chat/completions"):
            res.problems.extend(check_chat_stream(res.chunks, res.saw_done, want_usage))
        res.ok = res.error_kind is None
        return res

    @property
    def _raw_headers(self) -> dict[str, str]:
        if self._stream_headers is None:
            h = {
                "User-Agent": "vllm-medic",
                "Content-Type": "application/json",
                "Accept": "text/event-stream",
            }
            if self.api_key:
                h["Authorization"] = f"Bearer {self.api_key}"
            self._stream_headers = h
        return self._stream_headers

    def _exc_text(self, exc: BaseException) -> str:
        text = str(exc) or type(exc).__name__
        return self.redact(f"{type(exc).__name__}: {text}")[:500]


class _StreamState:
    """Consumes SSE bytes as they are read (inside the protocol callback) into a StreamResult."""

    __slots__ = ("res", "keep", "redact", "parser", "content", "reasoning", "n_bytes")

    def __init__(self, res: StreamResult, keep: bool, redact: Callable[[str], str]) -> None:
        self.res = res
        self.keep = keep
        self.redact = redact
        self.parser = SSEParser()
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.n_bytes = 0

    def on_headers(self, status: int, headers: dict[str, str], t: float) -> None:
        self.res.status = status
        self.res.t_headers = t

    def on_data(self, data: bytes, t: float) -> None:
        self.n_bytes += len(data)
        if self.n_bytes > MAX_STREAM_BYTES:
            raise BodyTooLarge(too_large("the stream", MAX_STREAM_BYTES))
        events = self.parser.feed(data, t)
        if events:
            self.consume(events)
            if self.keep and len(self.res.chunks) > MAX_KEPT_CHUNKS:
                raise BodyTooLarge(f"the stream has more than {MAX_KEPT_CHUNKS} chunks: cut there")
        if self.parser.pending > MAX_EVENT_BYTES:
            self.parser = SSEParser()  # the held bytes are dropped at once, not with the result
            raise BodyTooLarge(
                f"an SSE event is larger than {_mib(MAX_EVENT_BYTES)} without its end: cut there"
            )

    def finish_text(self) -> None:
        self.res.content = "".join(self.content)
        self.res.reasoning = "".join(self.reasoning)

    def consume(self, events: list[Any]) -> None:
        res = self.res
        for ev in events:
            res.n_events += 1
            if res.t_first_event is None:
                res.t_first_event = ev.t
            data = ev.data
            if data == b"[DONE]":
                res.saw_done = True
                res.t_last = ev.t
                continue
            try:
                chunk = _loads(data)
            except ValueError:
                shown = self.redact(data[:160].decode("utf-8", errors="replace"))
                if res.error_kind is None:
                    res.error_kind = ErrorKind.MALFORMED_SSE
                    res.error = f"data line is not JSON: {shown!r}"
                if len(res.problems) < MAX_PROBLEMS:
                    res.problems.append(f"malformed: data line is not JSON: {shown!r}")
                continue
            if type(chunk) is not dict:
                if len(res.problems) < MAX_PROBLEMS:
                    res.problems.append(f"malformed: data is not a JSON object: {data[:80]!r}")
                continue
            if self.keep:
                res.chunks.append(chunk)
            choices = chunk.get("choices")
            if not choices:
                usage = chunk.get("usage")
                if usage:
                    res.usage = usage
                elif "error" in chunk:
                    res.error_kind = res.error_kind or ErrorKind.STREAM_ERROR
                    res.error = (
                        res.error or f"error in stream: {self.redact(str(_error_message(chunk)))[:400]}"
                    )
                continue
            if chunk.get("usage"):
                res.usage = chunk["usage"]
            token = False
            for choice in choices:
                if type(choice) is not dict:
                    continue
                if choice.get("finish_reason"):
                    res.finish_reason = choice["finish_reason"]
                text = choice.get("text")
                if text:
                    self.content.append(text)
                    token = True
                delta = choice.get("delta")
                if not delta or type(delta) is not dict:
                    continue
                piece = delta.get("content")
                if piece:
                    self.content.append(piece)
                    token = True
                r = delta.get("reasoning_content") or delta.get("reasoning")
                if r:
                    self.reasoning.append(r)
                    token = True
                calls = delta.get("tool_calls")
                if calls:
                    token = True
                    for tc in calls:
                        _merge_tool_call(res.tool_calls, tc)
            if token:
                res.token_times.append(ev.t)


def _merge_tool_call(calls: list[dict[str, Any]], delta: dict[str, Any]) -> None:
    """Assemble streamed tool-call deltas (by ``index``) into whole calls with concatenated arguments."""
    idx = delta.get("index", len(calls))
    while len(calls) <= idx:
        calls.append({"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
    call = calls[idx]
    if delta.get("id"):
        call["id"] = delta["id"]
    fn = delta.get("function") or {}
    if fn.get("name"):
        call["function"]["name"] = fn["name"]
    if fn.get("arguments"):
        call["function"]["arguments"] += fn["arguments"]


def _error_message(data: Any) -> str | None:
    """The message of an OpenAI/vLLM error body: {"error": {"message": ...}} or {"message": ...}."""
    if not isinstance(data, dict):
        return None
    err = data.get("error", data)
    if isinstance(err, dict):
        msg = err.get("message") or err.get("detail")
        return str(msg) if msg is not None else None
    if isinstance(err, str):
        return err
    return None
