"""Step 2, basic: a short chat completes; the stream conforms; a forced tool call matches its schema."""

from __future__ import annotations

import json
from typing import Any

from vllm_medic.accept.context import RunContext, probes
from vllm_medic.accept.outcome import DOCS_TOOL_CALLING, StepOutcome
from vllm_medic.model import Category, Finding, Severity

TOOL_PARSER_HINT = "requires --tool-call-parser"


async def run_basic(ctx: RunContext) -> StepOutcome:
    out = StepOutcome("basic")
    p = probes()
    messages = [{"role": "user", "content": p["basic_prompt"]}]
    body = {"messages": messages, "max_tokens": 16, "temperature": 0}

    reply = await ctx.client.chat(body, timeout_s=ctx.opts.request_timeout_s)
    out.data["chat"] = {
        "status": reply.status, "latency_s": reply.latency_s, "finish_reason": reply.finish_reason,
        "usage": reply.usage, "content": (reply.content or "")[:200], "error": reply.error,
    }  # fmt: skip
    for f in chat_findings(reply.ok, reply.status, reply.error, reply.json):
        out.add(f)

    stream = await ctx.client.chat_stream(
        dict(body, stream_options={"include_usage": True}), timeout_s=ctx.opts.request_timeout_s,
        stall_timeout_s=min(ctx.opts.request_timeout_s, 30.0),
    )  # fmt: skip
    out.data["stream"] = {
        "status": stream.status, "ttft_s": stream.ttft_s, "e2e_s": stream.e2e_s, "events": stream.n_events,
        "saw_done": stream.saw_done, "finish_reason": stream.finish_reason, "usage": stream.usage,
        "problems": stream.problems, "error_kind": stream.error_kind, "error": stream.error,
    }  # fmt: skip
    for f in stream_findings(stream.status, stream.error_kind, stream.error, stream.problems):
        out.add(f)

    tool = p["tool"]
    tool_body = {
        "messages": [{"role": "user", "content": p["tool_prompt"]}],
        "tools": [tool],
        "tool_choice": {"type": "function", "function": {"name": tool["function"]["name"]}},
        "max_tokens": 256,
        "temperature": 0,
    }
    tool_reply = await ctx.client.chat(tool_body, timeout_s=ctx.opts.request_timeout_s)
    out.data["tool_call"] = {
        "status": tool_reply.status, "tool_calls": tool_reply.tool_calls if tool_reply.ok else None,
        "finish_reason": tool_reply.finish_reason, "error": tool_reply.error,
    }  # fmt: skip
    for f in tool_findings(
        tool_reply.ok, tool_reply.status, tool_reply.error, tool_reply.tool_calls, tool,
        content=tool_reply.content if tool_reply.ok else None, finish_reason=tool_reply.finish_reason,
    ):  # fmt: skip
        out.add(f)
    if not any(f.severity in (Severity.FAIL, Severity.WARN) for f in out.findings):
        out.add(
            Finding(
                "ACC-BASIC-000", Severity.PASS, Category.OTHER,
                "chat, streaming and a forced tool call all conform",
                [f"chat: finish_reason={reply.finish_reason}, usage={reply.usage}",
                 f"stream: {stream.n_events} events, TTFT {fmt_s(stream.ttft_s)}, [DONE] seen",
                 f"tool call arguments: {tool_reply.tool_calls[0]['function'].get('arguments') if tool_reply.tool_calls else None}"],
            )
        )  # fmt: skip
    return out.settle()


def fmt_s(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 1000:.0f} ms"


def chat_findings(
    ok: bool, status: int | None, error: str | None, data: dict[str, Any] | None
) -> list[Finding]:
    if not ok:
        return [
            Finding(
                "ACC-BASIC-001", Severity.FAIL, Category.OTHER, "a short chat completion failed",
                [f"POST /v1/chat/completions → {error or 'HTTP ' + str(status)}"],
                ["read the server log around this request (`vllm-medic triage LOG`)",
                 "check the model has a chat template (a base model needs --chat-template)"],
            )
        ]  # fmt: skip
    problems = completion_problems(data or {})
    if problems:
        return [
            Finding(
                "ACC-BASIC-002", Severity.FAIL, Category.OTHER, "the chat completion came back incomplete",
                problems, ["a conforming server returns choices[0].message, finish_reason and usage"],
            )
        ]  # fmt: skip
    return []


def completion_problems(data: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        return [f"no choices in the response: {json.dumps(data)[:200]}"]
    choice = choices[0] or {}
    message = choice.get("message") or {}
    if not isinstance(message.get("content"), str) and not message.get("tool_calls"):
        problems.append(f"choices[0].message has no content: {json.dumps(message)[:200]}")
    if not choice.get("finish_reason"):
        problems.append("choices[0].finish_reason is missing")
    usage = data.get("usage") or {}
    for key in ("prompt_tokens", "completion_tokens"):
        if not isinstance(usage.get(key), int):
            problems.append(f"usage.{key} is missing")
    if isinstance(usage.get("completion_tokens"), int) and usage["completion_tokens"] < 1:
        problems.append("usage.completion_tokens is 0: nothing was generated")
    return problems


def stream_findings(
    status: int | None, error_kind: str | None, error: str | None, problems: list[str]
) -> list[Finding]:
    if error_kind is not None and (status is None or status >= 400):
        return [
            Finding(
                "ACC-BASIC-003", Severity.FAIL, Category.OTHER, "a streamed chat completion failed",
                [f"POST /v1/chat/completions stream=true → {error_kind}: {error}"],
                ["read the server log around this request (`vllm-medic triage LOG`)"],
            )
        ]  # fmt: skip
    issues = list(problems)
    if error_kind is not None:
        issues.insert(0, f"{error_kind}: {error}")
    if issues:
        return [
            Finding(
                "ACC-BASIC-004", Severity.FAIL, Category.OTHER, "the SSE stream does not conform",
                issues[:10],
                ["clients (OpenAI SDK, LangChain) need: role chunk, content deltas, finish_reason, the usage "
                 "chunk with stream_options.include_usage, then 'data: [DONE]'",
                 "if a proxy sits in front of vLLM, disable its response buffering/rewriting and retest directly"],
            )
        ]  # fmt: skip
    return []


def tool_findings(
    ok: bool,
    status: int | None,
    error: str | None,
    tool_calls: list[dict[str, Any]],
    tool: dict[str, Any],
    content: str | None = None,
    finish_reason: str | None = None,
) -> list[Finding]:
    name = tool["function"]["name"]
    if not ok:
        if status == 400 and error and TOOL_PARSER_HINT in error:
            return [
                Finding(
                    "ACC-BASIC-005", Severity.FAIL, Category.OTHER,
                    "tool calling is off: the server has no tool-call parser",
                    [f"POST /v1/chat/completions with tool_choice={name} → HTTP 400: {error[:300]}"],
                    ["start vLLM with --enable-auto-tool-choice --tool-call-parser <parser> "
                     "(for Kimi K3: --tool-call-parser kimi_k3; Llama 3: llama3_json; Qwen/Hermes: hermes)"],
                    [DOCS_TOOL_CALLING],
                )
            ]  # fmt: skip
        return [
            Finding(
                "ACC-BASIC-006", Severity.FAIL, Category.OTHER, "a forced tool call failed",
                [f"POST /v1/chat/completions with tool_choice={name} → {error or 'HTTP ' + str(status)}"],
                ["check the server log for the request; check --tool-call-parser matches the model"],
                [DOCS_TOOL_CALLING],
            )
        ]  # fmt: skip
    return validate_tool_calls(tool_calls, tool, content, finish_reason)


def validate_tool_calls(
    tool_calls: list[dict[str, Any]],
    tool: dict[str, Any],
    content: str | None = None,
    finish_reason: str | None = None,
) -> list[Finding]:
    """Each call must name the forced function and carry JSON arguments valid against its schema.

    A schema violation is a ``fail``, even on a random-weight test model: a client that parses these
    arguments breaks the same way whatever produced them, and on a real model it means the tool-call
    parser or chat template does not match the model.
    """
    import jsonschema

    name = tool["function"]["name"]
    schema = tool["function"].get("parameters") or {"type": "object"}
    fix = [
        "check --tool-call-parser matches the model's tool-call format (Kimi K3: kimi_k3) and that the chat "
        "template renders the tools",
        "with a matching parser, a forced tool_choice makes vLLM constrain the arguments to the schema",
    ]
    if not tool_calls:
        evidence = [
            f"finish_reason={finish_reason}" + (" (cut at max_tokens)" if finish_reason == "length" else "")
        ]
        if content:
            evidence.append(f"message.content instead: {content[:200]!r}")
            if "<tool_call>" in content or "tool_call" in content:
                evidence.append("the content holds a tool call the parser did not extract")
        return [
            Finding(
                "ACC-BASIC-007", Severity.FAIL, Category.OTHER,
                f"tool_choice forced {name} but the response has no tool_calls", evidence, fix, [DOCS_TOOL_CALLING],
            )
        ]  # fmt: skip
    problems: list[str] = []
    for i, call in enumerate(tool_calls):
        fn = call.get("function") or {}
        args_text = fn.get("arguments")
        where = f"tool_calls[{i}].function"
        if fn.get("name") != name:
            problems.append(f"{where}.name is {fn.get('name')!r}, expected {name!r}")
        if not isinstance(args_text, str):
            problems.append(f"{where}.arguments is {type(args_text).__name__}, not a JSON string")
            continue
        try:
            args = json.loads(args_text)
        except ValueError as exc:
            problems.append(f"{where}.arguments is not JSON ({exc}): {args_text[:200]!r}")
            continue
        try:
            jsonschema.validate(args, schema)
        except jsonschema.ValidationError as exc:
            path = "/".join(str(x) for x in exc.absolute_path) or "(root)"
            problems.append(
                f"{where}.arguments = {args_text[:200]!r} breaks the schema at {path}: {exc.message[:160]}"
            )
    if problems:
        return [
            Finding(
                "ACC-BASIC-008", Severity.FAIL, Category.OTHER,
                "tool-call arguments do not match the declared schema", problems[:10], fix, [DOCS_TOOL_CALLING],
            )
        ]  # fmt: skip
    return []
