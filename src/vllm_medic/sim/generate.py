"""Generating an answer in the sim: admission, prefill, decode with KV growth/preemption, SSE chunks."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from vllm_medic.sim.engine import Engine
from vllm_medic.sim.state import Crashed, SimState
from vllm_medic.sim.tokenizer import output_piece
from vllm_medic.sim.tools import ToolCallPlan


@dataclass
class Job:
    rid: str
    kind: str  # "chat" or "completion"
    prompt_ids: list[int]
    n_out: int
    finish: str
    tool: ToolCallPlan | None
    include_usage: bool
    engine: Engine
    cached: int = 0
    t_arrive: float = field(default_factory=time.perf_counter)


def _usage(state: SimState, job: Job) -> dict[str, Any]:
    usage: dict[str, Any] = {
        "prompt_tokens": len(job.prompt_ids),
        "total_tokens": len(job.prompt_ids) + job.n_out,
        "completion_tokens": job.n_out,
        "prompt_tokens_details": None,
    }
    if state.cfg.enable_prompt_tokens_details and job.cached:
        usage["prompt_tokens_details"] = {"cached_tokens": job.cached}
    return usage


async def prefill(state: SimState, job: Job) -> int:
    """Admit the job to its engine, model the prefill time, record cache stats. Returns blocks held."""
    eng = job.engine
    blocks = eng.blocks_for(len(job.prompt_ids))
    await eng.admit(blocks)
    if state.dead:
        await eng.release(blocks)
        raise Crashed
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


async def _decode_step(state: SimState, job: Job, i: int, blocks: int) -> int:
    """Wait one inter-token interval; grow the KV allocation, preempting (and re-admitting) when full."""
    eng = job.engine
    if i > 0:
        await asyncio.sleep(state.cfg.itl_ms / 1000.0)
    if state.dead:
        raise Crashed
    if (len(job.prompt_ids) + i) % eng.block_size == 0:  # this token starts a new KV block
        if eng.try_grow():
            blocks += 1
        else:
            await eng.preempt(blocks)
            blocks = eng.blocks_for(len(job.prompt_ids) + i + 1)
            await eng.admit(blocks)
            if state.dead:
                raise Crashed
            await asyncio.sleep(state.cfg.ttft_ms / 1000.0)  # recompute after preemption
    eng.stats.generation_tokens += 1
    return blocks


def _finish_stats(state: SimState, job: Job, t0: float, t_first: float, t_last: float) -> None:
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


async def run_nonstream(state: SimState, job: Job) -> dict[str, Any]:
    t0 = time.perf_counter()
    blocks = await prefill(state, job)
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
                    "function": {"name": job.tool.name, "arguments": job.tool.arguments},
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


def _chunk(state: SimState, job: Job, choice: dict[str, Any] | None) -> bytes:
    obj = "text_completion" if job.kind == "completion" else "chat.completion.chunk"
    payload = {
        "id": job.rid,
        "object": obj,
        "created": state.created,
        "model": state.cfg.model,
        "choices": [choice] if choice is not None else [],
    }
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


async def run_stream(state: SimState, job: Job, request: web.Request) -> web.StreamResponse:
    t0 = time.perf_counter()
    blocks = await prefill(state, job)
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
                "function": {"name": job.tool.name, "arguments": ""},
            }
            pieces = [{"tool_calls": [first]}] + [
                {"tool_calls": [{"index": 0, "function": {"arguments": p}}]}
                for p in _tool_pieces(job.tool.arguments)
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
            payload: dict[str, Any] = {
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
    except (ConnectionResetError, ConnectionError, Crashed):
        pass
    finally:
        state.streams.pop(id(request), None)
        await job.engine.release(blocks)
    return resp
