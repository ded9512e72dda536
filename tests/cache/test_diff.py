"""`vllm-medic cache diff`: first divergence, token/block counts and the likely cause."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cache_helpers import run, write

SYSTEM = (
    "You are a helpful assistant for a weather service. Today is {date}. Answer briefly and cite the station."
)
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Local time in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


def chat(
    date: str = "2026-11-30 02:45:01", tools: list | None = None, user: str = "Weather in Paris?"
) -> dict:
    body: dict = {
        "model": "tiny",
        "messages": [
            {"role": "system", "content": SYSTEM.format(date=date)},
            {"role": "user", "content": user},
        ],
    }
    if tools is not None:
        body["tools"] = tools
    return body


def test_timestamp_in_system_prompt_is_named(tmp_path: Path) -> None:
    a = write(tmp_path / "a.json", chat("2026-11-30 02:45:01"))
    b = write(tmp_path / "b.json", chat("2026-11-30 02:47:13"))
    code, out, _ = run("diff", str(a), str(b), "--json")
    assert code == 1
    d = out["first_divergence"]
    assert (d["message_index"], d["role"], d["field"]) == (0, "system", "messages[0].content")
    assert (
        SYSTEM.format(date="2026-11-30 02:4")[: d["char_offset"]]
        == SYSTEM.format(date="2026-11-30 02:45:01")[: d["char_offset"]]
    )
    assert d["char_offset"] == SYSTEM.index("{date}") + len("2026-11-30 02:4")
    assert "02:45:01" in d["a"] and "02:47:13" in d["b"]
    assert out["likely_causes"] == ["timestamp/date in system prompt"]
    assert out["common_prefix_tokens"] is None and out["reusable_blocks"] is None
    assert "token counts unknown" in out["note"]


def test_reordered_tools(tmp_path: Path) -> None:
    a = write(tmp_path / "a.json", chat(tools=[WEATHER_TOOL, TIME_TOOL]))
    b = write(tmp_path / "b.json", chat(tools=[TIME_TOOL, WEATHER_TOOL]))
    code, out, _ = run("diff", str(a), str(b), "--json")
    assert code == 1
    assert out["first_divergence"]["role"] == "tools" and out["first_divergence"]["field"] == "tools[0]"
    assert out["likely_causes"] == ["tool definitions reordered"]


def test_json_key_order_whitespace_and_message_order(tmp_path: Path) -> None:
    reordered_keys = json.loads(json.dumps(WEATHER_TOOL))
    reordered_keys["function"] = dict(reversed(list(WEATHER_TOOL["function"].items())))
    _, out, _ = run(
        "diff",
        str(write(tmp_path / "a.json", chat(tools=[WEATHER_TOOL]))),
        str(write(tmp_path / "b.json", chat(tools=[reordered_keys]))),
        "--json",
    )
    assert out["likely_causes"] == ["JSON key order (tool schemas)"]
    spaced = chat()
    spaced["messages"][0]["content"] = spaced["messages"][0]["content"].replace(". ", ".  ")
    _, out, _ = run(
        "diff", str(write(tmp_path / "c.json", chat())), str(write(tmp_path / "d.json", spaced)), "--json"
    )
    assert out["likely_causes"] == ["whitespace"]
    swapped = chat()
    swapped["messages"] = [swapped["messages"][1], swapped["messages"][0]]
    _, out, _ = run("diff", str(tmp_path / "c.json"), str(write(tmp_path / "e.json", swapped)), "--json")
    assert "message order" in out["likely_causes"]


def test_identical_and_content_change(tmp_path: Path) -> None:
    a = write(tmp_path / "a.json", chat())
    code, out, _ = run("diff", str(a), str(a), "--json")
    assert code == 0 and out["identical"] is True and out["first_divergence"] is None
    b = write(tmp_path / "b.json", chat(user="Weather in Rome?"))
    code, out, _ = run("diff", str(a), str(b), "--json")
    assert code == 0  # a different question is an expected divergence, not a fault
    assert out["likely_causes"] == ["content differs"]
    assert out["first_divergence"]["message_index"] == 1 and out["first_divergence"]["role"] == "user"


def test_jsonl_compared_in_order(tmp_path: Path) -> None:
    lines = [
        chat("2026-11-30 02:45:01"),
        chat("2026-11-30 02:45:01", user="Weather in Rome?"),
        chat("2026-11-30 09:00:00"),
    ]
    p = tmp_path / "captured.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    code, out, _ = run("diff", str(p), "--json")
    assert code == 1
    assert [r["likely_causes"] for r in out["pairs"]] == [
        ["content differs"],
        ["timestamp/date in system prompt"],
    ]


def test_huge_prompt_streams_through(tmp_path: Path) -> None:
    # A 1M-token-class prompt (about 4 MB of text) differing only at the very end.
    big = "The station reports clear skies and light wind. " * 90_000
    a = write(tmp_path / "a.json", {"messages": [{"role": "user", "content": big + "END-A"}]})
    b = write(tmp_path / "b.json", {"messages": [{"role": "user", "content": big + "END-B"}]})
    code, out, _ = run("diff", str(a), str(b), "--json", timeout=120)
    assert code == 0
    assert out["first_divergence"]["char_offset"] == len(big) + 4
    assert out["common_prefix_chars"] >= len(big)


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"prompt_ids": [1, 2]}), "not a chat request"),
        (json.dumps({"messages": "hello"}), "'messages' must be a list"),
        (json.dumps([1, 2]), "must be a JSON object"),
        ("", "is empty"),
    ],
)
def test_bad_input(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    good = write(tmp_path / "good.json", chat())
    code, _, err = run("diff", str(bad), str(good))
    assert code == 2
    assert message in err and "Traceback" not in err


class _NoTokenize(BaseHTTPRequestHandler):
    """A server that speaks /metrics but has no /tokenize (an older or stripped-down gateway)."""

    def do_GET(self) -> None:  # noqa: N802
        body = b'vllm:cache_config_info{engine="0",block_size="16",enable_prefix_caching="True"} 1.0\n'
        self.send_response(200 if self.path == "/metrics" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def no_tokenize_server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _NoTokenize)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_server_without_tokenize_degrades_to_structural(tmp_path: Path, no_tokenize_server: str) -> None:
    a = write(tmp_path / "a.json", chat("2026-11-30 02:45:01"))
    b = write(tmp_path / "b.json", chat("2026-11-30 02:47:13"))
    code, out, err = run("diff", str(a), str(b), "--server", no_tokenize_server, "--json")
    assert code == 1 and "Traceback" not in err
    assert out["common_prefix_tokens"] is None
    assert "no /tokenize endpoint" in out["note"]
    assert out["block_size"] == 16
    assert out["likely_causes"] == ["timestamp/date in system prompt"]


@pytest.mark.real_vllm
def test_real_server_timestamp_and_reordered_tools(tmp_path: Path, vllm_server_cached) -> None:  # noqa: ANN001
    url = vllm_server_cached.url
    long_system = SYSTEM + " " + "Always report temperature, wind, humidity and pressure. " * 20
    a_body, b_body = chat(), chat()
    a_body["messages"][0]["content"] = long_system.format(date="2026-11-30 02:45:01")
    b_body["messages"][0]["content"] = long_system.format(date="2026-11-30 02:47:13")
    code, out, _ = run(
        "diff",
        str(write(tmp_path / "a.json", a_body)),
        str(write(tmp_path / "b.json", b_body)),
        "--server",
        url,
        "--json",
    )
    assert code == 1
    assert out["likely_causes"] == ["timestamp/date in system prompt"]
    assert out["block_size"] == vllm_server_cached.block_size
    assert 0 < out["common_prefix_tokens"] < out["tokens_a"]
    assert out["reusable_blocks"] == out["common_prefix_tokens"] // out["block_size"]
    assert out["first_differing_token"]["index"] == out["common_prefix_tokens"]
    code, out, _ = run(
        "diff",
        str(write(tmp_path / "c.json", chat(tools=[WEATHER_TOOL, TIME_TOOL]))),
        str(write(tmp_path / "d.json", chat(tools=[TIME_TOOL, WEATHER_TOOL]))),
        "--server",
        url,
        "--json",
    )
    assert code == 1
    assert out["likely_causes"] == ["tool definitions reordered"]
    assert out["common_prefix_tokens"] < out["tokens_a"]  # the template renders tools: tokens differ too


def test_local_tokenizer_counts_tokens(tmp_path: Path) -> None:
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<unk>"],
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([SYSTEM, "Weather in Paris? 2026-11-30 02:45:01"] * 10, trainer=trainer)
    tok_file = tmp_path / "tokenizer.json"
    tok.save(str(tok_file))
    a = write(tmp_path / "a.json", chat("2026-11-30 02:45:01"))
    b = write(tmp_path / "b.json", chat("2026-11-30 02:47:13"))
    code, out, _ = run("diff", str(a), str(b), "--tokenizer", str(tok_file), "--block-size", "4", "--json")
    assert code == 1
    assert 0 < out["common_prefix_tokens"] < out["tokens_a"]
    assert out["reusable_blocks"] == out["common_prefix_tokens"] // 4
    assert "approximate" in out["tokens_from"]
    code, _, err = run("diff", str(a), str(b), "--tokenizer", str(tmp_path / "missing.json"))
    assert code == 2 and "no tokenizer.json" in err


def test_image_inputs_and_template_variables(tmp_path: Path) -> None:
    def with_image(url: str) -> dict:
        body = chat()
        body["messages"][1]["content"] = [
            {"type": "image_url", "image_url": {"url": url}},
            {"type": "text", "text": "What is in this picture?"},
        ]
        return body

    a = write(tmp_path / "a.json", with_image("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB"))
    b = write(tmp_path / "b.json", with_image("https://example.invalid/cat.png"))
    code, out, _ = run("diff", str(a), str(b), "--json")
    assert code == 1
    assert out["first_divergence"]["field"] == "messages[1].content[0].image_url"
    assert out["likely_causes"] == ["image inputs"]
    thinking = chat()
    thinking["chat_template_kwargs"] = {"enable_thinking": True}
    code, out, _ = run(
        "diff", str(write(tmp_path / "c.json", chat())), str(write(tmp_path / "d.json", thinking)), "--json"
    )
    assert code == 1
    assert out["likely_causes"] == ["chat-template variables"]
