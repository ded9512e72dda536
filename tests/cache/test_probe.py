"""`vllm-medic cache probe` against the simulator (multi-engine, hybrid) and the real vLLM tier,
and the retention model behind its verdicts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from cache_helpers import run, write

from vllm_medic.cache.retention import RetentionPolicy, expected_hit, policy_from
from vllm_medic.sim.config import SimConfig
from vllm_medic.sim.server import start_sim


@pytest.fixture
def sim(request: pytest.FixtureRequest) -> Iterator[str]:
    handle = start_sim(SimConfig(enable_prompt_tokens_details=True, **getattr(request, "param", {})))
    yield handle.url
    handle.stop()


def by_name(out: dict) -> dict[str, dict]:
    return {r["name"]: r for r in out["requests"]}


@pytest.mark.parametrize("sim", [{}], indirect=True)
def test_single_engine_effective_and_records_saved(sim: str, tmp_path: Path) -> None:
    out_file = tmp_path / "probe.jsonl"
    code, out, err = run("probe", sim, "--out", str(out_file), "--json")
    assert code == 0, err
    assert out["verdict"] == "effective"
    reqs = by_name(out)
    first, repeat = reqs["fixed#1"], reqs["fixed#2 (repeat)"]
    assert first["outcome"] == "miss-expected" and repeat["outcome"] == "hit"
    assert repeat["hit_tokens"] == repeat["expected_hit_tokens"] == (repeat["prompt_tokens"] - 1) // 16 * 16
    assert repeat["cached_tokens"] == repeat["hit_tokens"] and repeat["engine"] == "0"
    assert repeat["ttft_s"] is not None and repeat["request"]["messages"][0]["role"] == "system"
    lines = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [r["name"] for r in lines] == [r["name"] for r in out["requests"]]
    assert [f["id"] for f in out["findings"]] == ["CACHE-PROBE001"]


@pytest.mark.parametrize("sim", [{"engines": 2}], indirect=True)
def test_two_engines_round_robin_miss_is_explained(sim: str) -> None:
    code, out, _ = run("probe", sim, "--json")
    assert code == 0
    reqs = by_name(out)
    assert reqs["fixed#1"]["engine"] != reqs["fixed#2 (repeat)"]["engine"]
    assert reqs["fixed#2 (repeat)"]["outcome"] == "miss-expected"
    assert "per-engine caches" in reqs["fixed#2 (repeat)"]["expected_reason"]
    assert reqs["fixed#3 (repeat)"]["outcome"] == "hit"
    assert "CACHE-PROBE006" in [f["id"] for f in out["findings"]]


@pytest.mark.parametrize("sim", [{"hybrid": True, "retention_interval": 0}], indirect=True)
def test_hybrid_prompt_end_checkpoints(sim: str) -> None:
    code, out, _ = run("probe", sim, "--json")
    assert code == 0
    assert out["retention_policy"]["hybrid"] is True and out["retention_policy"]["interval"] == 0
    reqs = by_name(out)
    # A shorter prefix shares tokens with the fixed prompt, but no checkpoint lies inside it: a designed miss.
    assert reqs["shorter prefix"]["outcome"] == "miss-expected" and reqs["shorter prefix"]["hit_tokens"] == 0
    # A longer prefix can only resume from the shorter prompt's end (rounded down to a block).
    shorter_end = reqs["shorter prefix"]["prompt_tokens"] // 16 * 16
    assert reqs["longer prefix"]["hit_tokens"] == reqs["longer prefix"]["expected_hit_tokens"] == shorter_end


@pytest.mark.parametrize("sim", [{"enable_prefix_caching": False}], indirect=True)
def test_flag_off(sim: str) -> None:
    code, out, _ = run("probe", sim, "--json")
    assert code == 1 and out["verdict"] == "flag off"
    assert [f["id"] for f in out["findings"]] == ["CACHE-PROBE002"]


@pytest.mark.parametrize("sim", [{}], indirect=True)
def test_own_request_is_sent_first(sim: str, tmp_path: Path) -> None:
    body = {
        "messages": [{"role": "system", "content": "Fixed prefix. " * 40}, {"role": "user", "content": "hi"}]
    }
    code, out, _ = run("probe", sim, "--request", str(write(tmp_path / "r.json", body)), "--json")
    assert code == 0
    names = [r["name"] for r in out["requests"]]
    assert names[:2] == ["your request#1", "your request#2 (repeat)"]
    assert out["requests"][1]["outcome"] == "hit"


def test_dead_server_is_a_tool_error() -> None:
    code, _, err = run("probe", "http://127.0.0.1:9")
    assert code == 3 and "Traceback" not in err


def test_retention_model_k3_interval_and_alignment() -> None:
    # Kimi K3-like: attention block 1536 for the hybrid page, 32K retention interval.
    policy = RetentionPolicy(block_size=1536, hybrid=True, mamba_cache_mode="align", interval=32768)
    e = expected_hit(policy, prompt_len=70_000, common_prefix=70_000, earlier_prompt_lens=[])
    assert e.tokens == 2 * 33792  # interval rounded up to the block (22 x 1536 = 33792)
    e = expected_hit(policy, prompt_len=70_000, common_prefix=60_000, earlier_prompt_lens=[50_000])
    assert e.tokens == 50_000 // 1536 * 1536  # the earlier prompt's end beats the 33,792 interval checkpoint
    dense = RetentionPolicy(block_size=16, hybrid=False, mamba_cache_mode=None, interval=None)
    assert expected_hit(dense, 418, 418, []).tokens == 416
    p = policy_from(
        {"block_size": "1536", "mamba_cache_mode": "align"}, env={"VLLM_PREFIX_CACHE_RETENTION_INTERVAL": "0"}
    )
    assert p.hybrid and p.interval == 0 and "VLLM_PREFIX_CACHE_RETENTION_INTERVAL=0" in p.sources[0]
    assert expected_hit(p, 5000, 5000, [3100]).tokens == 3072


@pytest.mark.real_vllm
def test_real_server_cached_is_effective(vllm_server_cached) -> None:  # noqa: ANN001
    s = vllm_server_cached
    code, out, err = run("probe", s.url, "--logs", str(s.log_path), "--json")
    assert code == 0, err
    assert out["verdict"] == "effective"
    block = s.block_size
    for r in out["requests"][1:]:
        # The retention model (full attention: whole blocks, last token computed) predicts the real counters.
        assert r["hit_tokens"] == r["expected_hit_tokens"], r
    repeat = by_name(out)["fixed#2 (repeat)"]
    assert repeat["hit_tokens"] == (repeat["prompt_tokens"] - 1) // block * block > 0
    assert repeat["cached_tokens"] == repeat["hit_tokens"]  # --enable-prompt-tokens-details


@pytest.mark.real_vllm
def test_real_server_uncached_is_flag_off(vllm_server_uncached) -> None:  # noqa: ANN001
    code, out, _ = run("probe", vllm_server_uncached.url, "--json")
    assert code == 1 and out["verdict"] == "flag off"
    assert all(r["hit_tokens"] == 0 for r in out["requests"])


@pytest.mark.parametrize("sim", [{}], indirect=True)
def test_probe_run_is_recorded_in_the_history(sim: str, tmp_path: Path) -> None:
    from vllm_medic.store.api import open_store

    db = f"sqlite:///{tmp_path / 'history.db'}"
    code, out, err = run("probe", sim, "--store", db, "--json")
    assert code == 0, err
    with open_store(db) as store:
        stored = store.get_run(out["run_id"])
        events = store.get_events(out["run_id"], kind="cache_probe_request")
    assert stored["verdict"] == "pass" and stored["status"] == "finished"
    assert [e["payload"]["name"] for e in events] == [r["name"] for r in out["requests"]]


class _NeverHits:
    """A server that says prefix caching is on but never reuses anything (what a broken cache looks like)."""

    def __init__(self) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        state = {"queries": 0, "done": 0, "prompt": 0}
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                if self.path == "/v1/models":
                    self._send(200, json.dumps({"data": [{"id": "broken", "max_model_len": 4096}]}).encode())
                elif self.path == "/metrics":
                    with lock:
                        text = (
                            'vllm:cache_config_info{engine="0",block_size="16",enable_prefix_caching="True"} 1.0\n'
                            f'vllm:prefix_cache_queries_total{{engine="0"}} {state["queries"]}\n'
                            'vllm:prefix_cache_hits_total{engine="0"} 0\n'
                            f'vllm:request_success_total{{engine="0"}} {state["done"]}\n'
                            f'vllm:prompt_tokens_total{{engine="0"}} {state["prompt"]}\n'
                        )
                    self._send(200, text.encode(), "text/plain")
                else:
                    self._send(404, b"{}")

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = json.dumps(body.get("messages"))
                ids = [ord(c) % 251 for c in text[::4]]
                if self.path == "/tokenize":
                    self._send(
                        200, json.dumps({"count": len(ids), "tokens": ids, "max_model_len": 4096}).encode()
                    )
                    return
                with lock:
                    state["queries"] += len(ids)
                    state["prompt"] += len(ids)
                    state["done"] += 1
                usage = {"prompt_tokens": len(ids), "completion_tokens": 1, "total_tokens": len(ids) + 1}
                chunks = [
                    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}}]},
                    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                    {"choices": [], "usage": usage},
                ]
                payload = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
                self._send(200, payload.encode(), "text/event-stream")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_unexplained_miss_says_what_to_capture_next() -> None:
    srv = _NeverHits()
    try:
        code, out, err = run("probe", srv.url, "--json")
    finally:
        srv.close()
    assert code == 1, err
    assert out["verdict"] == "unexplained miss"
    f = [f for f in out["findings"] if f["id"] == "CACHE-PROBE005"][0]
    assert any("Capture next" in s for s in f["fix"])
    repeat = by_name(out)["fixed#2 (repeat)"]
    assert repeat["outcome"] == "miss" and repeat["expected_hit_tokens"] > 0


@pytest.mark.parametrize(
    ("verdict", "finding_id", "severity"),
    [
        ("effective", "CACHE-PROBE001", "pass"),
        ("flag off", "CACHE-PROBE002", "fail"),
        ("prefixes differ", "CACHE-PROBE003", "fail"),
        ("miss expected by the retention policy", "CACHE-PROBE004", "info"),
        ("no answers", "CACHE-PROBE007", "fail"),
        ("unexplained miss", "CACHE-PROBE005", "fail"),
    ],
)
def test_each_verdict_has_its_finding_and_two_engines_add_a_warning(verdict, finding_id, severity) -> None:  # noqa: ANN001
    from vllm_medic.cache.probe import ProbeRecord, ProbeReport, probe_findings

    records = [
        ProbeRecord("fixed#1", {}, prompt_tokens=40, hit_tokens=0.0, engine="0", ok=True, outcome="miss"),
        ProbeRecord(
            "fixed#2 (repeat)", {}, prompt_tokens=40, hit_tokens=32.0, engine="1", ok=True, outcome="hit"
        ),
        ProbeRecord("fixed#3 (repeat)", {}, error="ReadTimeout: no answer"),
    ]
    report = ProbeReport("http://x", [], None, True, records, verdict, engines=2, notes=["a note"])
    findings = probe_findings(report)
    assert [(f.id, f.severity.value) for f in findings] == [
        (finding_id, severity),
        ("CACHE-PROBE006", "warn"),
    ]
    assert "a note" in findings[0].evidence and any("fixed#2" in e for e in findings[0].evidence)
    if verdict == "no answers":
        assert "1 of the fixed request's sends" in findings[0].title and "ReadTimeout" in findings[0].title
    one_engine = ProbeReport("http://x", [], None, True, records[:1], "unexplained miss", engines=1)
    assert [f.id for f in probe_findings(one_engine)] == ["CACHE-PROBE005"]
