"""Why two chat requests do not share a cached prefix: where they diverge and the likely cause (pure).

A request is flattened into *segments* in the order a chat template renders it (system message,
tool definitions, then the other messages; each message's role, name, content parts, tool calls),
each with its JSON location. The first segment whose text differs is the structural divergence;
its character offset comes from a linear common-prefix scan, so a 1M-token prompt costs one pass.
Token-level numbers (common prefix in tokens and in whole blocks) come from the caller: the server's
``/tokenize`` (chat template applied) or a local tokenizer.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

_CHUNK = 1 << 16
_SNIPPET = 40

_DATE_TIME = re.compile(
    r"(\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4}|\d{1,2}:\d{2}(:\d{2})?|\b\d{10}(\.\d+)?\b|\b\d{13}\b|"
    r"\b(Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\b|\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\b|"
    r"\b(today|current date|current time|timestamp|now)\b)",
    re.IGNORECASE,
)

CAUSE_TIMESTAMP = "timestamp/date in {role} prompt"
CAUSE_TOOLS_REORDERED = "tool definitions reordered"
CAUSE_TOOLS_CHANGED = "tool definitions changed"
CAUSE_KEY_ORDER = "JSON key order"
CAUSE_WHITESPACE = "whitespace"
CAUSE_MESSAGE_ORDER = "message order"
CAUSE_IMAGE = "image inputs"
CAUSE_TEMPLATE_VARS = "chat-template variables"
CAUSE_CONTENT = "content differs"

AVOIDABLE = (
    "timestamp/date",
    CAUSE_TOOLS_REORDERED,
    CAUSE_KEY_ORDER,
    CAUSE_WHITESPACE,
    CAUSE_MESSAGE_ORDER,
    CAUSE_IMAGE,
    CAUSE_TEMPLATE_VARS,
)

TEMPLATE_FIELDS = (
    "chat_template",
    "chat_template_kwargs",
    "add_generation_prompt",
    "continue_final_message",
    "documents",
)


class NotAChatRequest(ValueError):
    pass


@dataclass(frozen=True)
class Segment:
    message_index: int | None
    role: str
    field: str  # JSON path inside the request, e.g. "messages[0].content"
    text: str


@dataclass
class Divergence:
    message_index: int | None
    role: str
    field: str
    char_offset: int
    a: str
    b: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "message_index": self.message_index,
            "role": self.role,
            "field": self.field,
            "char_offset": self.char_offset,
            "a": self.a,
            "b": self.b,
        }


@dataclass
class DiffResult:
    identical: bool
    divergence: Divergence | None
    likely_causes: list[str] = field(default_factory=list)
    common_prefix_chars: int = 0  # characters of identical rendered segments before the divergence


def check_chat(req: Any, name: str) -> dict[str, Any]:
    """Validate a chat body (``messages``) or a completion body (``prompt``); raise NotAChatRequest."""
    if not isinstance(req, dict):
        raise NotAChatRequest(f"{name}: a request must be a JSON object, got {type(req).__name__}")
    if "messages" in req:
        msgs = req["messages"]
        if not isinstance(msgs, list) or not all(isinstance(m, dict) for m in msgs):
            raise NotAChatRequest(f"{name}: 'messages' must be a list of objects")
        for i, m in enumerate(msgs):
            if "role" not in m:
                raise NotAChatRequest(f"{name}: messages[{i}] has no 'role'")
        return req
    if isinstance(req.get("prompt"), str):
        return req
    keys = ", ".join(list(req)[:8]) or "none"
    raise NotAChatRequest(
        f"{name}: not a chat request: no 'messages' list (and no 'prompt' string); keys: {keys}"
    )


def _content_segments(i: int, role: str, content: Any) -> list[Segment]:
    base = f"messages[{i}].content"
    if content is None:
        return []
    if isinstance(content, str):
        return [Segment(i, role, base, content)]
    if isinstance(content, list):
        out = []
        for j, part in enumerate(content):
            if isinstance(part, dict):
                kind = str(part.get("type", ""))
                if kind == "text" or "text" in part:
                    out.append(Segment(i, role, f"{base}[{j}].text", str(part.get("text", ""))))
                else:
                    out.append(
                        Segment(
                            i, role, f"{base}[{j}].{kind or 'part'}", json.dumps(part, ensure_ascii=False)
                        )
                    )
            else:
                out.append(Segment(i, role, f"{base}[{j}]", json.dumps(part, ensure_ascii=False)))
        return out
    return [Segment(i, role, base, json.dumps(content, ensure_ascii=False))]


def _as_list(value: Any) -> list[Any]:
    """A field that should be a list, as one: a malformed scalar or object becomes one element, so it is
    still compared (and shown) instead of crashing the diff."""
    if isinstance(value, list):
        return value
    return [] if value is None or value == "" else [value]


def _message_segments(i: int, m: dict[str, Any]) -> list[Segment]:
    role = str(m.get("role"))
    out = [Segment(i, role, f"messages[{i}].role", role)]
    if m.get("name") is not None:
        out.append(Segment(i, role, f"messages[{i}].name", str(m["name"])))
    out.extend(_content_segments(i, role, m.get("content")))
    for j, call in enumerate(_as_list(m.get("tool_calls"))):
        fn = call.get("function", {}) if isinstance(call, dict) else {}
        out.append(Segment(i, role, f"messages[{i}].tool_calls[{j}].function.name", str(fn.get("name", ""))))
        args = fn.get("arguments", "")
        out.append(
            Segment(
                i,
                role,
                f"messages[{i}].tool_calls[{j}].function.arguments",
                args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
            )
        )
    if m.get("tool_call_id") is not None:
        out.append(Segment(i, role, f"messages[{i}].tool_call_id", str(m["tool_call_id"])))
    return out


def segments(req: dict[str, Any]) -> list[Segment]:
    """The request in render order: template variables, system message, tools, the other messages."""
    out: list[Segment] = []
    for key in TEMPLATE_FIELDS:
        if key in req:
            out.append(
                Segment(None, "template", key, json.dumps(req[key], ensure_ascii=False, sort_keys=False))
            )
    if isinstance(req.get("prompt"), str) and "messages" not in req:
        out.append(Segment(0, "prompt", "prompt", req["prompt"]))
        return out
    msgs = req.get("messages") or []
    start = 0
    if msgs and msgs[0].get("role") in ("system", "developer"):
        out.extend(_message_segments(0, msgs[0]))
        start = 1
    for j, tool in enumerate(_as_list(req.get("tools"))):
        out.append(Segment(None, "tools", f"tools[{j}]", json.dumps(tool, ensure_ascii=False)))
    for i in range(start, len(msgs)):
        out.extend(_message_segments(i, msgs[i]))
    return out


def common_prefix_len(a: Any, b: Any) -> int:
    """Length of the common prefix of two strings or lists, in one linear pass (chunked compares)."""
    n = min(len(a), len(b))
    i = 0
    while i < n:
        j = min(i + _CHUNK, n)
        if a[i:j] == b[i:j]:
            i = j
            continue
        while i < j and a[i] == b[i]:
            i += 1
        return i
    return n


def _snip(text: str, at: int) -> str:
    return text[max(0, at - _SNIPPET) : at + _SNIPPET]


def first_divergence(sa: list[Segment], sb: list[Segment]) -> tuple[Divergence | None, int]:
    chars = 0
    for x, y in zip(sa, sb, strict=False):
        if x.field != y.field:
            return Divergence(
                x.message_index, x.role, f"{x.field} vs {y.field}", 0, _snip(x.text, 0), _snip(y.text, 0)
            ), chars
        if x.text != y.text:
            k = common_prefix_len(x.text, y.text)
            return Divergence(
                x.message_index, x.role, x.field, k, _snip(x.text, k), _snip(y.text, k)
            ), chars + k
        chars += len(x.text)
    if len(sa) != len(sb):
        longer, which = (sa, "a") if len(sa) > len(sb) else (sb, "b")
        extra = longer[min(len(sa), len(sb))]
        a = _snip(extra.text, 0) if which == "a" else ""
        b = _snip(extra.text, 0) if which == "b" else ""
        return Divergence(extra.message_index, extra.role, extra.field, 0, a, b), chars
    return None, chars


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False)


def _tool_name(tool: Any) -> str:
    if isinstance(tool, dict):
        fn = tool.get("function")
        return str((fn if isinstance(fn, dict) else tool).get("name", ""))
    return ""


def _as_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, TypeError):
        return None


def likely_causes(a: dict[str, Any], b: dict[str, Any], div: Divergence | None) -> list[str]:
    if div is None:
        return []
    causes: list[str] = []
    if any(a.get(k) != b.get(k) for k in TEMPLATE_FIELDS):
        causes.append(CAUSE_TEMPLATE_VARS)
    ta, tb = _as_list(a.get("tools")), _as_list(b.get("tools"))
    if ta != tb or [_canon(t) for t in ta] != [_canon(t) for t in tb] or json.dumps(ta) != json.dumps(tb):
        if Counter(_canon(t) for t in ta) == Counter(_canon(t) for t in tb):
            if [_canon(t) for t in ta] != [_canon(t) for t in tb]:
                causes.append(CAUSE_TOOLS_REORDERED)
            else:
                causes.append(CAUSE_KEY_ORDER + " (tool schemas)")
        elif [_tool_name(t) for t in ta] != [_tool_name(t) for t in tb] and Counter(
            map(_tool_name, ta)
        ) == Counter(map(_tool_name, tb)):
            causes.append(CAUSE_TOOLS_REORDERED)
        else:
            causes.append(CAUSE_TOOLS_CHANGED)
    ma, mb = a.get("messages") or [], b.get("messages") or []
    same_set = ma != mb and len(ma) == len(mb) and Counter(map(_canon, ma)) == Counter(map(_canon, mb))
    if same_set and [_canon(m) for m in ma] != [_canon(m) for m in mb]:
        causes.append(CAUSE_MESSAGE_ORDER)
    if div.role not in ("tools", "template"):
        full_a, full_b = _field_text(a, div.field), _field_text(b, div.field)
        if full_a is not None and full_b is not None:
            if " ".join(full_a.split()) == " ".join(full_b.split()):
                causes.append(CAUSE_WHITESPACE)
            else:
                ja, jb = _as_json(full_a), _as_json(full_b)
                if ja is not None and ja == jb:
                    causes.append(CAUSE_KEY_ORDER)
                elif _DATE_TIME.search(_snip(full_a, div.char_offset)) and _DATE_TIME.search(
                    _snip(full_b, div.char_offset)
                ):
                    causes.append(CAUSE_TIMESTAMP.format(role=div.role))
        if "image" in div.field or "input_audio" in div.field or "video" in div.field:
            causes.append(CAUSE_IMAGE)
    if not causes:
        causes.append(CAUSE_CONTENT)
    return list(dict.fromkeys(causes))


def _field_text(req: dict[str, Any], path: str) -> str | None:
    """The text of a segment path, re-read from the request (for the whitespace / JSON checks)."""
    for seg in segments(req):
        if seg.field == path:
            return seg.text
    return None


def diff_requests(a: dict[str, Any], b: dict[str, Any]) -> DiffResult:
    sa, sb = segments(a), segments(b)
    div, chars = first_divergence(sa, sb)
    return DiffResult(
        identical=div is None,
        divergence=div,
        likely_causes=likely_causes(a, b, div),
        common_prefix_chars=chars,
    )


def is_avoidable(causes: list[str]) -> bool:
    return any(c.startswith(prefix) for c in causes for prefix in AVOIDABLE)


def render_for_local_tokenizer(req: dict[str, Any]) -> str:
    """A plain rendering for a local tokenizer when no server is given (not the model's own template)."""
    parts = []
    for seg in segments(req):
        if seg.field.endswith(".role"):
            parts.append(f"<|{seg.text}|>")
        else:
            parts.append(seg.text)
    return "\n".join(parts)


def fix_for(causes: list[str]) -> list[str]:
    steps = []
    for c in causes:
        if c.startswith("timestamp/date"):
            steps.append(
                "Move the date/time out of the system prompt (put it in the last user turn, or round it to the day) "
                "so every request shares the same leading tokens."
            )
        elif c == CAUSE_TOOLS_REORDERED:
            steps.append("Send the tool definitions in one fixed order (sort by name once, in the client).")
        elif c.startswith(CAUSE_KEY_ORDER):
            steps.append(
                "Serialize JSON (tool schemas, arguments) with a fixed key order, e.g. json.dumps(sort_keys=True)."
            )
        elif c == CAUSE_WHITESPACE:
            steps.append(
                "Normalize whitespace in templates and prompts (trailing spaces, newlines, indentation)."
            )
        elif c == CAUSE_MESSAGE_ORDER:
            steps.append("Keep the message history append-only: never reorder or re-insert earlier turns.")
        elif c == CAUSE_IMAGE:
            steps.append(
                "Send images identically each time (same URL or the same base64 bytes, same detail setting)."
            )
        elif c == CAUSE_TEMPLATE_VARS:
            steps.append(
                "Use the same chat_template / chat_template_kwargs for every request of a conversation."
            )
        elif c == CAUSE_TOOLS_CHANGED:
            steps.append(
                "Keep tool definitions byte-identical across requests; changed tools invalidate everything after them."
            )
    return steps
