"""``vllm-medic sim``: a vLLM-compatible OpenAI server with fault injection (aiohttp).

Endpoints as a real vLLM 0.32 serves them: ``GET /health`` (200 empty; 503 once the engine died),
``GET /version``, ``GET /v1/models`` (ModelCard with ``max_model_len``), ``GET /metrics`` (see
``exposition.py``), ``POST /tokenize`` (chat and prompt forms), ``POST /v1/chat/completions`` and
``POST /v1/completions`` (non-streaming and SSE with ``stream_options.include_usage``).

Start it:
- in the foreground: ``vllm-medic sim --port 8000 [fault flags]`` (``serve_forever``);
- in-process for tests: ``handle = start_sim(SimConfig(...))`` → ``handle.url``, ``handle.stop()``
  (the server runs on its own event loop in a daemon thread, on an ephemeral port by default);
- as a subprocess: ``vllm-medic sim --port 0`` prints ``vllm-medic sim listening on URL`` first.

Faults: see ``SimConfig``. A crash (``crash_at_concurrency``) cuts every open stream, answers
``/health`` with 503 for ``crash_exit_after_s``, then stops listening (connection refused); the
foreground process then exits with status 1, like a dead ``vllm serve``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from aiohttp import web

from vllm_medic.sim.config import SIM_VERSION, SimConfig
from vllm_medic.sim.generate import Job, run_nonstream, run_stream
from vllm_medic.sim.metrics_page import render_metrics
from vllm_medic.sim.state import Crashed, SimState
from vllm_medic.sim.tokenizer import render_chat, token_ids, tokenize_text
from vllm_medic.sim.tools import Refusal, ToolCallPlan, plan_tool_call

STATE_KEY: web.AppKey[SimState] = web.AppKey("state")


def _error(
    status: int, message: str, err_type: str = "BadRequestError", param: str | None = None
) -> web.Response:
    body = {"error": {"message": message, "type": err_type, "param": param, "code": status}}
    return web.json_response(body, status=status)


def _auth_failed(state: SimState, request: web.Request) -> web.Response | None:
    key = state.cfg.api_key
    if key and request.headers.get("Authorization", "") != f"Bearer {key}":
        return web.json_response({"error": "Unauthorized"}, status=401)
    return None


async def _json_body(request: web.Request) -> dict[str, Any] | web.Response:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError):
        return _error(400, "Request body is not valid JSON.")
    if not isinstance(body, dict):
        return _error(400, "Request body must be a JSON object.")
    return body


def _max_tokens(body: dict[str, Any]) -> int | None:
    for key in ("max_completion_tokens", "max_tokens"):
        v = body.get(key)
        if isinstance(v, int) and v > 0:
            return v
    return None


async def _generate(state: SimState, request: web.Request, kind: str) -> web.StreamResponse:
    if (denied := _auth_failed(state, request)) is not None:
        return denied
    body = await _json_body(request)
    if isinstance(body, web.Response):
        return body
    if state.dead:
        return _error(500, "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                      "InternalServerError")  # fmt: skip
    cfg = state.cfg
    if body.get("model") not in (None, cfg.model):
        return _error(404, f"The model `{body.get('model')}` does not exist.", "NotFoundError", "model")
    tool: ToolCallPlan | None = None
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "messages must be a non-empty list")
        plan = plan_tool_call(cfg, body)
        if isinstance(plan, Refusal):
            return _error(plan.status, plan.message)
        tool = plan
        prompt_text = render_chat(messages, body.get("tools"))
    else:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            return _error(400, "prompt must be a string")
        prompt_text = prompt
    prompt_ids = token_ids(tokenize_text(prompt_text))
    max_tokens = _max_tokens(body)
    natural = cfg.output_tokens
    n_out = (
        natural
        if max_tokens is None
        else (max_tokens if body.get("ignore_eos") else min(max_tokens, natural))
    )
    finish = "length" if max_tokens is not None and n_out >= max_tokens else "stop"
    if tool:
        finish = tool.finish
    if len(prompt_ids) + (max_tokens or 0) > cfg.max_model_len:
        total = len(prompt_ids) + (max_tokens or 0)
        return _error(
            400,
            f"This model's maximum context length is {cfg.max_model_len} tokens. However, you requested "
            f"{total} tokens ({len(prompt_ids)} in the messages, {max_tokens or 0} in the completion). "
            "Please reduce the length of the messages or completion.",
        )
    if state.chance(cfg.error_rate):
        kinds = {429: "RateLimitError", 503: "ServiceUnavailableError"}
        return _error(
            cfg.error_status,
            f"sim: injected HTTP {cfg.error_status}",
            kinds.get(cfg.error_status, "InternalServerError"),
        )
    stream = bool(body.get("stream"))
    include_usage = stream and bool((body.get("stream_options") or {}).get("include_usage"))
    prefix = "chatcmpl" if kind == "chat" else "cmpl"
    job = Job(
        rid=f"{prefix}-sim-{state.next_id()}",
        kind=kind,
        prompt_ids=prompt_ids,
        n_out=n_out,
        finish=finish,
        tool=tool,
        include_usage=include_usage,
        engine=state.pick_engine(prompt_ids),
    )
    state.in_flight += 1
    try:
        if cfg.crash_at_concurrency is not None and state.in_flight >= cfg.crash_at_concurrency:
            state.crash()
            return _error(500, "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                          "InternalServerError")  # fmt: skip
        try:
            if stream:
                return await run_stream(state, job, request)
            return web.json_response(await run_nonstream(state, job))
        except Crashed:
            return _error(500, "EngineCore encountered an issue. See stack trace (above) for the root cause.",
                          "InternalServerError")  # fmt: skip
    finally:
        state.in_flight -= 1


# --- simple endpoints ---------------------------------------------------------------------------


async def _health(request: web.Request) -> web.Response:
    state: SimState = request.app[STATE_KEY]
    return web.Response(status=503 if state.dead else 200)


async def _version(request: web.Request) -> web.Response:
    return web.json_response({"version": SIM_VERSION})


async def _models(request: web.Request) -> web.Response:
    state: SimState = request.app[STATE_KEY]
    if (denied := _auth_failed(state, request)) is not None:
        return denied
    cfg = state.cfg
    card = {
        "id": cfg.model,
        "object": "model",
        "created": state.created,
        "owned_by": "vllm",
        "root": cfg.model,
        "parent": None,
        "max_model_len": cfg.max_model_len,
        "permission": [],
    }
    return web.json_response({"object": "list", "data": [card]})


async def _tokenize(request: web.Request) -> web.Response:
    state: SimState = request.app[STATE_KEY]
    if (denied := _auth_failed(state, request)) is not None:
        return denied
    body = await _json_body(request)
    if isinstance(body, web.Response):
        return body
    if "messages" in body:
        if body.get("add_generation_prompt", True) and body.get("continue_final_message"):
            return _error(
                400, "Cannot set both `continue_final_message` and `add_generation_prompt` to True."
            )
        text = render_chat(body["messages"], body.get("tools"), bool(body.get("add_generation_prompt", True)))
    elif isinstance(body.get("prompt"), str):
        text = body["prompt"]
    else:
        return _error(400, "either prompt or messages is required")
    toks = tokenize_text(text)
    return web.json_response(
        {
            "count": len(toks),
            "max_model_len": state.cfg.max_model_len,
            "tokens": token_ids(toks),
            "token_strs": toks if body.get("return_token_strs") else None,
        }
    )


async def _metrics(request: web.Request) -> web.Response:
    state: SimState = request.app[STATE_KEY]
    return web.Response(text=render_metrics(state), content_type="text/plain", charset="utf-8")


def build_app(cfg: SimConfig) -> web.Application:
    app = web.Application(client_max_size=64 * 1024 * 1024)
    state = SimState(cfg)
    app[STATE_KEY] = state

    async def chat(request: web.Request) -> web.StreamResponse:
        return await _generate(state, request, "chat")

    async def completions(request: web.Request) -> web.StreamResponse:
        return await _generate(state, request, "completion")

    app.router.add_get("/health", _health)
    app.router.add_get("/ping", _health)
    app.router.add_get("/version", _version)
    app.router.add_get("/v1/models", _models)
    app.router.add_get("/metrics", _metrics)
    app.router.add_post("/tokenize", _tokenize)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/v1/completions", completions)
    return app


# --- running it ---------------------------------------------------------------------------------


class SimHandle:
    """A sim running on its own event loop in a daemon thread. ``url``, ``state``, ``stop()``."""

    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.url = ""
        self.port = 0
        self.state: SimState | None = None
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._thread = threading.Thread(target=self._main, name="vllm-medic-sim", daemon=True)

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._start())
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(self._cleanup())
        pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
        for t in pending:
            t.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    async def _start(self) -> None:
        app = build_app(self.cfg)
        self.state = app[STATE_KEY]
        self.state.on_crash.append(self._schedule_close)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, self.cfg.host, self.cfg.port)
        await self._site.start()
        self.port = _bound_port(self._site)
        self.url = f"http://{self.cfg.host}:{self.port}"
        self.state.log("INFO", "api_server.py:1", f"Starting vLLM server on {self.url} (vllm-medic sim)")

    def _schedule_close(self) -> None:
        async def close_later() -> None:
            # Like a dead `vllm serve` process: stop listening *and* drop every open connection.
            await asyncio.sleep(self.cfg.crash_exit_after_s)
            await self._cleanup()

        self._loop.create_task(close_later())

    async def _cleanup(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            with contextlib.suppress(Exception):
                await runner.cleanup()

    def start(self, timeout_s: float = 30.0) -> SimHandle:
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError("sim did not start in time")
        if self._error is not None:
            raise self._error
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)

    def __enter__(self) -> SimHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_sim(cfg: SimConfig | None = None) -> SimHandle:
    return SimHandle(cfg or SimConfig()).start()


async def serve_forever(cfg: SimConfig, announce: Any = print) -> int:
    """Run until cancelled (Ctrl-C) → 0, or until the injected crash closes the port → 1."""
    app = build_app(cfg)
    state: SimState = app[STATE_KEY]
    runner = web.AppRunner(app, handle_signals=False, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, cfg.host, cfg.port)
    await site.start()
    port = _bound_port(site)
    url = f"http://{cfg.host}:{port}"
    state.log("INFO", "api_server.py:1", f"Starting vLLM server on {url} (vllm-medic sim)")
    announce(f"vllm-medic sim listening on {url}")
    crashed = asyncio.Event()
    state.on_crash.append(crashed.set)
    try:
        await crashed.wait()
        await asyncio.sleep(cfg.crash_exit_after_s)
        return 1
    finally:
        await runner.cleanup()


def _bound_port(site: web.TCPSite) -> int:
    """The port a started site listens on (the ephemeral one when the config asked for port 0)."""
    server = site._server  # noqa: SLF001 - the only way to learn the ephemeral port
    sockets = getattr(server, "sockets", None)  # asyncio's and uvloop's servers both have it; the ABC not
    if not sockets:
        raise RuntimeError("the sim server has not started listening")
    return int(sockets[0].getsockname()[1])
