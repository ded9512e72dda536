"""``vllm-medic sim``: a vLLM-compatible OpenAI server with fault injection (aiohttp).

Endpoints as a real vLLM 0.32 serves them: ``GET /health`` (200 empty; 503 once the engine died),
``GET /version``, ``GET /v1/models`` (ModelCard with ``max_model_len``), ``GET /metrics`` (see
``exposition.py``), ``POST /tokenize`` (chat and prompt forms), ``POST /v1/chat/completions`` and
``POST /v1/completions`` (non-streaming and SSE with ``stream_options.include_usage``).

Start it:
- in the foreground: ``vllm-medic sim --port 8000 [fault flags]`` (``run_foreground``);
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
import itertools
import json
import random
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from vllm_medic.sim.config import SIM_VERSION, SimConfig
from vllm_medic.sim.engine import Engine, PrefixCache, block_hashes
from vllm_medic.sim.exposition import ITL_BUCKETS, REQUEST_BUCKETS, TTFT_BUCKETS, Exposition, PromHistogram
from vllm_medic.sim.tokenizer import output_piece, render_chat, token_ids, tokenize_text

STATE_KEY: web.AppKey[SimState] = web.AppKey("state")


class _Crashed(Exception):
    """The sim's engine died while this request was running."""


@dataclass
class _EngineHists:
    ttft: PromHistogram = field(default_factory=lambda: PromHistogram(TTFT_BUCKETS))
    itl: PromHistogram = field(default_factory=lambda: PromHistogram(ITL_BUCKETS))
    tpot: PromHistogram = field(default_factory=lambda: PromHistogram(ITL_BUCKETS))
    e2e: PromHistogram = field(default_factory=lambda: PromHistogram(REQUEST_BUCKETS))
    queue: PromHistogram = field(default_factory=lambda: PromHistogram(REQUEST_BUCKETS))


class SimState:
    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.engines = [
            Engine(
                i,
                block_size=cfg.block_size,
                num_gpu_blocks=cfg.num_gpu_blocks,
                max_num_seqs=cfg.max_num_seqs,
                cache=PrefixCache(
                    cfg.block_size,
                    cfg.num_gpu_blocks,
                    enabled=cfg.enable_prefix_caching,
                    hybrid=cfg.hybrid,
                    retention_interval=cfg.retention_interval if cfg.hybrid else None,
                ),
            )
            for i in range(cfg.engines)
        ]
        self.hists = [_EngineHists() for _ in range(cfg.engines)]
        self._rr = itertools.count()
        self._ids = itertools.count(1)
        self.in_flight = 0
        self.dead = False
        self.created = int(time.time())
        self.streams: dict[int, web.Request] = {}  # requests with an open SSE stream (a crash cuts them)
        self.on_crash: list[Any] = []
        self.log_path = Path(cfg.log_file) if cfg.log_file else None

    def next_id(self) -> int:
        return next(self._ids)

    def pick_engine(self, tokens: list[int]) -> Engine:
        if len(self.engines) == 1:
            return self.engines[0]
        if self.cfg.routing == "hash":
            first = block_hashes(tokens, self.cfg.block_size)[:1]
            return self.engines[(first[0] if first else 0) % len(self.engines)]
        return self.engines[next(self._rr) % len(self.engines)]

    def chance(self, p: float) -> bool:
        return p > 0 and self.rng.random() < p

    def log(self, level: str, where: str, message: str, prefix: str = "(APIServer pid=1) ") -> None:
        if self.log_path is None:
            return
        stamp = datetime.now().strftime("%m-%d %H:%M:%S")
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(f"{prefix}{level} {stamp} [{where}] {message}\n")

    def crash(self) -> None:
        if self.dead:
            return
        self.dead = True
        engine_prefix = "(EngineCore_DP0 pid=2) "
        if self.cfg.crash_kind == "oom":
            self.log(
                "ERROR",
                "core.py:1",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 786.00 MiB. GPU 0 has a total "
                "capacity of 79.11 GiB of which 140.75 MiB is free. (vllm-medic sim: injected)",
                engine_prefix,
            )
        self.log("ERROR", "core.py:1", "EngineCore encountered a fatal error.", engine_prefix)
        self.log(
            "ERROR",
            "async_llm.py:1",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
            "See stack trace (above) for the root cause.",
        )
        for request in list(self.streams.values()):
            if request.transport is not None:
                request.transport.abort()
        for cb in self.on_crash:
            cb()


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


# --- tool calls -------------------------------------------------------------------------------


def _value_for(schema: dict[str, Any]) -> Any:
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else "string"
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: _value_for(v if isinstance(v, dict) else {}) for k, v in props.items()}
    return {"integer": 1, "number": 1.5, "boolean": True, "array": [], "null": None}.get(str(kind), "sim")


def _tool_plan(state: SimState, body: dict[str, Any]) -> tuple[dict[str, Any] | None, web.Response | None]:
    """Which tool to call (if any) and its arguments, or the HTTP 400 a real vLLM gives."""
    tools = body.get("tools") or []
    choice = body.get("tool_choice", "auto" if tools else "none")
    if not tools or choice == "none":
        return None, None
    parser = state.cfg.tool_call_parser
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name", "")
        if not parser:
            return None, _error(400, f'tool_choice=function "{name}" requires --tool-call-parser to be set')
        tool = next((t for t in tools if (t.get("function") or {}).get("name") == name), None)
        if tool is None:
            return None, _error(400, f"Tool '{name}' has not been passed in `tools`.")
        finish = "stop"
    elif choice == "required":
        tool, finish = tools[0], "tool_calls"
    elif choice == "auto":
        if not (state.cfg.enable_auto_tool_choice and parser):
            return None, _error(
                400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
            )
        tool, finish = tools[0], "tool_calls"
    else:
        return None, _error(400, f"Invalid tool_choice: {choice!r}")
    fn = tool.get("function") or {}
    args = (
        "true"
        if state.cfg.bad_tool_args
        else json.dumps(_value_for(fn.get("parameters") or {"type": "object"}))
    )
    return {"name": fn.get("name", ""), "arguments": args, "finish": finish}, None


# --- generation --------------------------------------------------------------------------------


@dataclass
class _Job:
    rid: str
    kind: str  # "chat" or "completion"
    prompt_ids: list[int]
    n_out: int
    finish: str
    tool: dict[str, Any] | None
    include_usage: bool
    engine: Engine
    cached: int = 0
    t_arrive: float = field(default_factory=time.perf_counter)


def _usage(state: SimState, job: _Job) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": len(job.prompt_ids),
        "total_tokens": len(job.prompt_ids) + job.n_out,
        "completion_tokens": job.n_out,
        "prompt_tokens_details": None,
    }
    if state.cfg.enable_prompt_tokens_details and job.cached:
        usage["prompt_tokens_details"] = {"cached_tokens": job.cached}
    return usage


async def _prefill(state: SimState, job: _Job) -> int:
    """Admit the job to its engine, model the prefill time, record cache stats. Returns blocks held."""
    eng = job.engine
    blocks = eng.blocks_for(len(job.prompt_ids))
    await eng.admit(blocks)
    if state.dead:
        await eng.release(blocks)
        raise _Crashed
    state.hists[eng.index].queue.observe(time.perf_counter() - job.t_arrive)
    job.cached = eng.cache.lookup(job.prompt_ids)
    if state.cfg.enable_prefix_caching:
        eng.stats.queries += len(job.prompt_ids)
        eng.stats.hits += job.cached
    eng.stats.prompt_tokens += len(job.prompt_ids)
    cfg = state.cfg
    await asyncio.sleep(
        (cfg.ttft_ms + cfg.prefill_ms_per_token * (len(job.prompt_ids) - job.cached)) / 1000.0
    )
    eng.cache.insert(job.prompt_ids)
    return blocks


async def _decode_step(state: SimState, job: _Job, i: int, blocks: int) -> int:
    """Wait one inter-token interval; grow the KV allocation, preempting (and re-admitting) when full."""
    eng = job.engine
    if i > 0:
        await asyncio.sleep(state.cfg.itl_ms / 1000.0)
    if state.dead:
        raise _Crashed
    if (len(job.prompt_ids) + i) % eng.block_size == 0:  # this token starts a new KV block
        if eng.try_grow():
            blocks += 1
        else:
            await eng.preempt(blocks)
            blocks = eng.blocks_for(len(job.prompt_ids) + i + 1)
            await eng.admit(blocks)
            if state.dead:
                raise _Crashed
            await asyncio.sleep(state.cfg.ttft_ms / 1000.0)  # recompute after preemption
    eng.stats.generation_tokens += 1
    return blocks


def _finish_stats(state: SimState, job: _Job, t0: float, t_first: float, t_last: float) -> None:
    h = state.hists[job.engine.index]
    h.ttft.observe(t_first - t0)
    h.e2e.observe(t_last - t0)
    if job.n_out > 1:
        tpot = (t_last - t_first) / (job.n_out - 1)
        h.tpot.observe(tpot)
        for _ in range(job.n_out - 1):
            h.itl.observe(tpot)
    job.engine.stats.success[job.finish] = job.engine.stats.success.get(job.finish, 0) + 1


def _tool_pieces(args: str) -> list[str]:
    return [args[i : i + 8] for i in range(0, len(args), 8)] or [""]


async def _run_nonstream(state: SimState, job: _Job) -> dict[str, Any]:
    t0 = time.perf_counter()
    blocks = await _prefill(state, job)
    try:
        t_first = time.perf_counter()
        for i in range(job.n_out):
            blocks = await _decode_step(state, job, i, blocks)
    finally:
        await job.engine.release(blocks)
    t_last = time.perf_counter()
    _finish_stats(state, job, t0, t_first, t_last)
    text = "".join(output_piece(i) for i in range(job.n_out))
    if job.kind == "completion":
        choice: dict[str, Any] = {"index": 0, "text": text, "logprobs": None, "finish_reason": job.finish}
        obj = "text_completion"
    else:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": None if job.tool else text,
            "tool_calls": [],
        }
        if job.tool:
            message["tool_calls"] = [
                {
                    "id": f"chatcmpl-tool-{job.rid}",
                    "type": "function",
                    "function": {"name": job.tool["name"], "arguments": job.tool["arguments"]},
                }
            ]
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": job.finish}
        obj = "chat.completion"
    return {
        "id": job.rid,
        "object": obj,
        "created": int(time.time()),
        "model": state.cfg.model,
        "choices": [choice],
        "usage": _usage(state, job),
    }


def _chunk(state: SimState, job: _Job, choice: dict[str, Any] | None) -> bytes:
    obj = "text_completion" if job.kind == "completion" else "chat.completion.chunk"
    payload = {
        "id": job.rid,
        "object": obj,
        "created": state.created,
        "model": state.cfg.model,
        "choices": [choice] if choice is not None else [],
    }
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


async def _run_stream(state: SimState, job: _Job, request: web.Request) -> web.StreamResponse:
    t0 = time.perf_counter()
    blocks = await _prefill(state, job)
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
    )
    disconnect = state.chance(state.cfg.disconnect_rate)
    stall = state.chance(state.cfg.stall_rate)
    malformed = state.chance(state.cfg.malformed_sse_rate)
    sent = 0
    try:
        await resp.prepare(request)
        state.streams[id(request)] = request
        if job.kind == "chat":
            await resp.write(
                _chunk(
                    state,
                    job,
                    {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None},
                )
            )
            sent += 1
        pieces: list[dict[str, Any]]
        if job.tool:
            tc_id = f"chatcmpl-tool-{job.rid}"
            first = {
                "index": 0,
                "id": tc_id,
                "type": "function",
                "function": {"name": job.tool["name"], "arguments": ""},
            }
            pieces = [{"tool_calls": [first]}] + [
                {"tool_calls": [{"index": 0, "function": {"arguments": p}}]}
                for p in _tool_pieces(job.tool["arguments"])
            ]
            job.n_out = max(job.n_out, len(pieces))
        else:
            pieces = [{"content": output_piece(i)} for i in range(job.n_out)]
        t_first = t0
        for i, delta in enumerate(pieces):
            blocks = await _decode_step(state, job, i, blocks)
            if i == 0:
                t_first = time.perf_counter()
            if disconnect and sent >= state.cfg.disconnect_after:
                state.log("WARNING", "serving.py:1", f"sim: cutting the connection of {job.rid} (injected)")
                if request.transport is not None:
                    request.transport.abort()
                return resp
            if stall and sent == state.cfg.stall_after:
                await asyncio.sleep(state.cfg.stall_s)
            last = i == len(pieces) - 1
            if job.kind == "chat":
                choice = {
                    "index": 0,
                    "delta": delta,
                    "logprobs": None,
                    "finish_reason": job.finish if last else None,
                }
            else:
                choice = {"index": 0, "text": delta.get("content", ""), "logprobs": None,
                          "finish_reason": job.finish if last else None}  # fmt: skip
            if malformed and sent == state.cfg.stall_after:
                await resp.write(b'data: {"id": "' + job.rid.encode() + b'", "choices": [{"delta": \n\n')
            else:
                await resp.write(_chunk(state, job, choice))
            sent += 1
        t_last = time.perf_counter()
        if job.include_usage:
            payload = {
                "id": job.rid,
                "object": "chat.completion.chunk" if job.kind == "chat" else "text_completion",
                "created": state.created,
                "model": state.cfg.model,
                "choices": [],
                "usage": _usage(state, job),
            }
            await resp.write(b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        _finish_stats(state, job, t0, t_first, t_last)
    except (ConnectionResetError, ConnectionError, _Crashed):
        pass
    finally:
        state.streams.pop(id(request), None)
        await job.engine.release(blocks)
    return resp


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
    tool: dict[str, Any] | None = None
    if kind == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "messages must be a non-empty list")
        tool, denied = _tool_plan(state, body)
        if denied is not None:
            return denied
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
        finish = tool["finish"]
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
    job = _Job(
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
                return await _run_stream(state, job, request)
            return web.json_response(await _run_nonstream(state, job))
        except _Crashed:
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
        server = self._site._server  # noqa: SLF001 - the only way to learn the ephemeral port
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
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
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]  # noqa: SLF001
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
