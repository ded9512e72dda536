"""The normaliser: prefixes, timestamps, traceback folding; fuzzed with hypothesis."""

from __future__ import annotations

from datetime import datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from vllm_medic.triage import normalize as norm_module
from vllm_medic.triage.normalize import normalize, normalize_line


def test_vllm_process_prefixes_and_timestamps():
    ev = normalize_line(
        "\x1b[36m(EngineCore_DP0 pid=1094)\x1b[0m ERROR 11-30 02:01:46 [core.py:123] ValueError: x\r"
    )
    assert (ev.process, ev.pid, ev.rank, ev.level) == ("EngineCore_DP0", 1094, 0, "ERROR")
    assert ev.timestamp == datetime(2000, 11, 30, 2, 1, 46) and ev.message == "ValueError: x"
    assert normalize_line("(VllmWorker TP3 pid=9) INFO 01-02 03:04:05 [a.py:1] hi").rank == 3
    assert normalize_line("(Worker_TP5 pid=9) INFO 01-02 03:04:05 [a.py:1] hi").rank == 5
    assert normalize_line("(Worker_PP0_TP1_EP3 pid=9) INFO 01-02 03:04:05 [a.py:1] hi").rank == 1
    ray = normalize_line(
        "(RayWorkerWrapper pid=1355, ip=192.168.201.208) ERROR 07-25 06:51:17 worker_base.py:382] boom"
    )
    assert (ray.process, ray.node, ray.level, ray.message) == (
        "RayWorkerWrapper",
        "192.168.201.208",
        "ERROR",
        "boom",
    )
    nccl = normalize_line(
        "hd03-gpu2-0031:14133:14133 [2] misc/socket.cc:484 NCCL WARN socketStartConnect: failed"
    )
    assert (nccl.node, nccl.pid, nccl.rank, nccl.level) == ("hd03-gpu2-0031", 14133, 2, "WARNING")
    v1 = normalize_line("(VllmWorker rank=3 pid=3013) ERROR 03-20 03:14:59 [multiproc_executor.py:1] hit")
    assert (v1.process, v1.pid, v1.rank, v1.level, v1.message) == ("VllmWorker", 3013, 3, "ERROR", "hit")
    sgl = normalize_line("[2025-05-06 10:00:00 DP1 TP2 EP2] Scheduler hit an exception")
    assert (sgl.rank, sgl.timestamp.year, sgl.message) == (2, 2025, "Scheduler hit an exception")
    torch = normalize_line(
        "[rank3]:[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught collective operation timeout"
    )
    assert (torch.rank, torch.level) == (3, "ERROR")


def test_docker_kubectl_journald_and_iso_forms():
    d = normalize_line("2026-11-30T02:36:13.123456789Z (APIServer pid=1) INFO 11-30 02:36:13 [a.py:1] hello")
    assert d.timestamp == datetime(2026, 11, 30, 2, 36, 13, 123456) and d.process == "APIServer"
    k = normalize_line("[pod/vllm-0/vllm] 2026-11-30T02:36:13.5Z ERROR boom")
    assert k.node == "vllm-0" and k.timestamp.year == 2026 and k.level == "ERROR" and k.message == "boom"
    j = normalize_line(
        "Nov 30 02:36:13 gpu-node-7 vllm[4242]: (APIServer pid=1) INFO 11-30 02:36:13 [a.py:1] up"
    )
    assert j.node == "gpu-node-7" and j.timestamp.month == 11 and j.message == "up"
    compose = normalize_line(
        "vllm  | ERROR 02-11 08:25:49 serving_chat.py:661] torch.OutOfMemoryError: CUDA out of memory."
    )
    assert (
        compose.node == "vllm"
        and compose.level == "ERROR"
        and compose.message.startswith("torch.OutOfMemoryError")
    )
    py = normalize_line("[2024-04-17 20:07:13,727] [ERROR] [MainThread] [asyncio] >>> AssertionError")
    assert py.timestamp == datetime(2024, 4, 17, 20, 7, 13, 727000) and py.level == "ERROR"
    assert py.message == "AssertionError"


def test_traceback_becomes_one_event_with_its_exception_line():
    text = "\n".join(
        [
            "(EngineCore_DP0 pid=7) ERROR 11-30 02:00:00 [core.py:1] EngineCore failed to start.",
            "(EngineCore_DP0 pid=7) ERROR 11-30 02:00:00 [core.py:1] Traceback (most recent call last):",
            '(EngineCore_DP0 pid=7) ERROR 11-30 02:00:00 [core.py:1]   File "/x/kv_cache_utils.py", line 9, in check',
            '(EngineCore_DP0 pid=7) ERROR 11-30 02:00:00 [core.py:1]     raise ValueError("No available memory")',
            "(APIServer pid=1) INFO 11-30 02:00:00 [a.py:1] interleaved line from another process",
            "(EngineCore_DP0 pid=7) ERROR 11-30 02:00:00 [core.py:1]            ^^^^^^^^",
            "(EngineCore_DP0 pid=7) ERROR 11-30 02:00:00 [core.py:1] ValueError: No available memory for the cache blocks.",
        ]
    )
    events = normalize(text, "s")
    assert [e.line for e in events] == [1, 5, 7]
    exc = events[-1]
    assert exc.traceback_start == 2 and exc.frames == ["/x/kv_cache_utils.py:check"]
    assert exc.text.endswith("No available memory for the cache blocks.")


def test_bare_assertion_points_at_the_failing_statement():
    text = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "/v/prefix_prefill.py", line 639, in context_attention_fwd',
            "    assert Lk in {16, 32, 64, 128}",
            "AssertionError",
        ]
    )
    (ev,) = normalize(text)
    assert ev.line == 3 and "assert Lk" in ev.text


line_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=300)
prefixes = st.sampled_from(
    [
        "",
        "(APIServer pid=1) ",
        "(EngineCore_DP0 pid=12) ",
        "[rank0]: ",
        "2026-11-30T02:36:13.1Z ",
        "INFO 11-30 02:01:46 [a.py:1] ",
        "ERROR 13-45 99:99:99 [a.py:1] ",
        "h:1:2 [0] NCCL WARN ",
        "vllm  | ",
        "[pod/p/c] ",
        "Nov 31 25:61:61 host unit[1]: ",
        "\x1b[31m",
        "Traceback (most recent call last):",
        '  File "x", line 1, in f',
        "    code()",
        "ValueError: ",
        "\r",
        "\x00",
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(prefixes, prefixes, line_text), max_size=30))
def test_normaliser_never_raises_and_keeps_positions(parts):
    lines = [a + b + c for a, b, c in parts]
    for i, line in enumerate(lines, 1):
        ev = normalize_line(line, "fuzz", i)
        assert ev.line == i and ev.source == "fuzz"
        assert ev.text == line[: norm_module.MAX_LINE_CHARS].rstrip("\r\n")
    events = normalize(lines, "fuzz")
    assert [e.line for e in events] == sorted({e.line for e in events})
    assert all(1 <= e.line <= len(lines) for e in events)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_normaliser_takes_any_bytes(raw):
    ev = normalize_line(raw, "bytes", 1)
    assert "\x00" not in ev.text


@given(st.text(alphabet="\x1b#03[]6;m?AZaz_w \r\t:-", max_size=40))
def test_ansi_hint_guard_never_changes_a_line(text):
    """strip_ansi skips its (slow) substitution when `_ANSI_HINT` finds nothing: that must be exactly
    when the substitution would find nothing either."""
    assert bool(norm_module._ANSI_HINT.search(text)) or norm_module._ANSI.sub("", text) == text


def _every_real_line() -> list[bytes]:
    import json
    from pathlib import Path

    data = Path(__file__).resolve().parents[1] / "data" / "triage"
    lines: list[bytes] = []
    for path in [data / "corpus.jsonl", *sorted((data / "blind").glob("round*.jsonl"))]:
        for row in path.read_text(encoding="utf-8").splitlines():
            lines += [ln.encode() for ln in json.loads(row)["log"].split("\n")]
    for path in sorted((data / "healthy").rglob("*")) + sorted((data / "noise").rglob("*")):
        if path.is_file():
            lines += path.read_bytes().splitlines()[:2000]
    return lines


def test_a_line_may_hold_time_is_never_false_for_a_line_with_a_timestamp():
    """The look back for the last time seen skips what `may_hold_time` rules out: over every real line
    the tests hold, not one dated line is ruled out, and undated ones (an access log's) are."""
    lines = _every_real_line()
    dated = [raw for raw in lines if normalize_line(raw[:512]).timestamp is not None]
    assert len(dated) > 1000
    assert [raw for raw in dated if not norm_module.may_hold_time(raw[:512])] == []
    access = b'INFO:     127.0.0.1:53344 - "POST /v1/chat/completions HTTP/1.1" 200 OK'
    assert normalize_line(access).timestamp is None and not norm_module.may_hold_time(access)
    assert sum(not norm_module.may_hold_time(raw[:512]) for raw in lines) > len(lines) // 4


_STAMPS = st.sampled_from(
    [
        "INFO 12-04 01:02:03 [core.py:1] ",
        "2026-12-04T01:02:03.5Z ",
        "[W1204 01:02:03.123 utils.cpp:68] ",
        "Dec  4 01:02:03 host vllm[12]: ",
        "I 12-04 01:02:03 setup.py:1] ",
        "\x1b[32mINFO\x1b[0m 12-04 01:02:03 [a.py:2] ",
        "(EngineCore_DP0 pid=1) ERROR 12-04 01:02:03 [core.py:9] ",
    ]
)


@settings(max_examples=300, deadline=None)
@given(prefix=st.text(max_size=12), stamp=_STAMPS, rest=st.text(max_size=60))
def test_may_hold_time_holds_for_fuzzed_lines(prefix, stamp, rest):
    for text in (prefix + stamp + rest, stamp + rest, prefix + rest):
        raw = text.encode("utf-8", "surrogatepass")
        if normalize_line(raw[:512]).timestamp is not None:
            assert norm_module.may_hold_time(raw[:512]), text
