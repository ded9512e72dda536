"""Tool-call planning for the sim: what a vLLM server with (or without) a tool parser answers. Pure."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from vllm_medic.sim.config import SimConfig


@dataclass(frozen=True)
class ToolCallPlan:
    name: str
    arguments: str  # JSON text, as in tool_calls[].function.arguments
    finish: str  # finish_reason: "stop" for a named tool_choice, "tool_calls" otherwise


@dataclass(frozen=True)
class Refusal:
    status: int
    message: str


def value_for(schema: dict[str, Any]) -> Any:
    """A value satisfying a (simple) JSON schema: every declared property, typed, enums honoured."""
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = kind[0] if kind else "string"
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: value_for(v if isinstance(v, dict) else {}) for k, v in props.items()}
    return {"integer": 1, "number": 1.5, "boolean": True, "array": [], "null": None}.get(str(kind), "sim")


def plan_tool_call(cfg: SimConfig, body: dict[str, Any]) -> ToolCallPlan | Refusal | None:
    """The tool call to make, the HTTP 400 a real vLLM gives, or None (answer with text)."""
    tools = [t for t in (body.get("tools") or []) if isinstance(t, dict)]
    choice = body.get("tool_choice", "auto" if tools else "none")
    if not tools or choice == "none":
        return None
    parser = cfg.tool_call_parser
    if isinstance(choice, dict):
        name = str((choice.get("function") or {}).get("name", ""))
        if not parser:
            return Refusal(400, f'tool_choice=function "{name}" requires --tool-call-parser to be set')
        tool = next((t for t in tools if (t.get("function") or {}).get("name") == name), None)
        if tool is None:
            return Refusal(400, f"Tool '{name}' has not been passed in `tools`.")
        finish = "stop"
    elif choice == "required":
        tool, finish = tools[0], "tool_calls"
    elif choice == "auto":
        if not (cfg.enable_auto_tool_choice and parser):
            return Refusal(
                400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
            )
        tool, finish = tools[0], "tool_calls"
    else:
        return Refusal(400, f"Invalid tool_choice: {choice!r}")
    fn = tool.get("function") or {}
    declared = fn.get("parameters")
    params: dict[str, Any] = declared if isinstance(declared, dict) else {"type": "object"}
    args = "true" if cfg.bad_tool_args else json.dumps(value_for(params))
    return ToolCallPlan(name=str(fn.get("name", "")), arguments=args, finish=finish)
