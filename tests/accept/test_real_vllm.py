"""The acceptance loop end to end against a real vLLM (CPU build, tiny random-weight model).

Skipped by name where the real vLLM tier is not installed (scripts/setup-real-vllm.sh installs it).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vllm_medic.cli import app
from vllm_medic.store.api import open_store

pytestmark = pytest.mark.real_vllm

# The test server and this client share two CPU cores, so the client's event loop is routinely descheduled
# for tens of ms; the default self-check (20 ms lag p99) would rightly call every level "client saturation".
SHARED_HOST = ["--max-client-lag-ms", "1000"]


def _accept(args: list[str], db_url: str) -> tuple[int, dict]:
    result = CliRunner().invoke(app, ["accept", *args, "--json", "--db", db_url])
    assert result.stdout.strip().startswith("{"), result.stdout + result.stderr
    return result.exit_code, json.loads(result.stdout)


def _step(out: dict, name: str) -> dict:
    return next(s for s in out["steps"] if s["name"] == name)


def test_full_loop_on_a_caching_server(vllm_server_cached, db_url):
    srv = vllm_server_cached
    code, out = _accept(
        [
            srv.url,
            "--quick",
            "--soak",
            "4s",
            "--logs",
            str(srv.log_path),
            "--request-timeout",
            "120s",
            *SHARED_HOST,
        ],
        db_url,
    )
    steps = {s["name"]: s for s in out["steps"]}
    assert list(steps) == ["start", "basic", "prefix_reuse", "ramp", "soak", "archive"]
    # start: ready, the model listed, the single CPU rank registered in the log.
    assert steps["start"]["status"] == "pass", steps["start"]
    assert steps["start"]["data"]["version"] == "0.32.0"
    assert steps["start"]["data"]["ranks"] == {
        "expected": 1,
        "seen": 1,
        "workers": steps["start"]["data"]["ranks"]["workers"],
    }
    # basic: chat and stream conform; the random model's forced tool call breaks the declared schema.
    basic_ids = [f["id"] for f in steps["basic"]["findings"]]
    assert not {"ACC-BASIC-001", "ACC-BASIC-002", "ACC-BASIC-003", "ACC-BASIC-004"} & set(basic_ids), (
        basic_ids
    )
    assert {"ACC-BASIC-007", "ACC-BASIC-008"} & set(basic_ids), basic_ids
    assert steps["basic"]["status"] == "fail"
    # prefix_reuse: the server's own counters show the reuse, and cached_tokens agree.
    reuse = steps["prefix_reuse"]
    assert reuse["status"] == "pass", reuse
    assert reuse["data"]["block_size"] == srv.block_size == 128
    assert reuse["data"]["enable_prefix_caching"] == "True"
    assert reuse["data"]["hits_delta"] >= reuse["data"]["expected_hits"] > 0
    assert reuse["data"]["cached_tokens"][-1] >= 4 * 128
    # ramp and soak measured real traffic; archive kept the launch arguments and vLLM version.
    assert steps["ramp"]["status"] == "pass" and steps["ramp"]["data"]["levels"][0]["ok"] > 0
    assert steps["soak"]["status"] in ("pass", "warn") and steps["soak"]["data"]["samples"]
    archive = steps["archive"]["data"]
    assert archive["vllm_version"] == "0.32.0"
    assert "--enable-prefix-caching" in archive["launch_args"]
    assert out["verdict"] == "fail" and code == 1
    assert open_store(db_url).get_run(out["run_id"])["verdict"] == "fail"


def test_uncached_server_fails_reuse_and_tool_calls_with_the_flags(vllm_server_uncached, db_url):
    code, out = _accept([vllm_server_uncached.url, "--steps", "basic,prefix_reuse", "--quick"], db_url)
    assert code == 1
    reuse = _step(out, "prefix_reuse")
    assert [f["id"] for f in reuse["findings"]] == ["ACC-PREFIX-001"]
    assert reuse["data"]["hits_delta"] == 0
    assert "--enable-prefix-caching" in reuse["findings"][0]["fix"][0]
    tool = next(f for f in _step(out, "basic")["findings"] if f["id"] == "ACC-BASIC-005")
    assert "requires --tool-call-parser" in tool["evidence"][0]


@pytest.mark.vllm_destructive
def test_killing_the_server_mid_ramp_is_reported_as_engine_death(vllm_server_uncached, db_url):
    srv = vllm_server_uncached
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("vllm-medic")), "accept", srv.url, "--steps", "ramp,soak",
         "--concurrency", "1,2,4,8,16", "--step-duration", "4s", "--soak", "5s", *SHARED_HOST, "--json",
         "--db", db_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    store = open_store(db_url)

    def levels_done() -> int:
        runs = store.list_runs()
        if not runs:
            return 0
        ramp = next((s for s in store.get_run(runs[0]["run_id"])["steps"] if s["name"] == "ramp"), None)
        return len((ramp or {}).get("data", {}).get("levels") or [])

    try:
        deadline = time.monotonic() + 120
        while levels_done() < 1:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "first ramp level never recorded"
            time.sleep(0.2)
        srv.kill(signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stdout + stderr
    out = json.loads(stdout)
    ramp = _step(out, "ramp")
    levels = ramp["data"]["levels"]
    assert levels[0]["status"] == "ok" and levels[0]["ok"] > 0, levels[0]
    assert levels[-1]["status"] == "broken" and levels[-1]["break_kind"] == "engine_death"
    assert ramp["findings"][0]["id"] == "ACC-RAMP-002"
    assert "server gone" in ramp["data"]["stop_reason"] or "engine death" in ramp["data"]["stop_reason"]
    # /health asked after the break: nothing listens any more, so the soak sends no load into a dead port
    assert ramp["data"]["health_after_break"]["ok"] is False
    dead = ramp["data"]["engine_dead"]
    at = levels[-1]["concurrency"]
    assert dead.startswith(f"engine dead at ramp level {at}: /health unreachable after the break"), dead
    soak = _step(out, "soak")
    assert soak["status"] == "skipped" and soak["data"] == {"skipped_reason": dead}, soak
    run = store.get_run(out["run_id"])
    assert run["status"] == "finished" and run["verdict"] == "fail"
    assert run["steps"][0]["data"]["levels"][0]["ok"] == levels[0]["ok"]


def test_environment_verdict_against_the_real_server(vllm_server_cached, db_url):
    """The same real server: with a bundle whose driver fails `check` the verdict is not pass; with nothing
    to archive (this CPU host: no driver, no GPU) the loop's pass is only `pass_unverified`."""
    srv = vllm_server_cached
    bundle = Path(__file__).parents[1] / "data" / "checks" / "bundles" / "nvml-mismatch"
    steps = ["--steps", "start,prefix_reuse,archive", "--request-timeout", "120s"]
    code, out = _accept([srv.url, *steps, "--bundle", str(bundle)], db_url)
    assert out["verdict"] == "fail" and code == 1, out["environment"]
    env = out["environment"]
    assert env["status"] == "fail"
    assert "DRV001" in [f["id"] for f in env["findings"] if f["severity"] == "fail"]
    assert _step(out, "start")["status"] == "pass" and _step(out, "prefix_reuse")["status"] == "pass"

    code, out = _accept([srv.url, *steps], db_url)
    assert (out["verdict"], code) == ("pass_unverified", 0), out
    assert out["verdict_label"] == "pass (environment not verified)"
    assert out["environment"]["status"] == "not_verified"
    stored = open_store(db_url).get_run(out["run_id"])
    assert stored["verdict"] == "pass_unverified"
