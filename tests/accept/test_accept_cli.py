"""Usage errors, API-key handling and redaction, Ctrl-C on a real `vllm-medic accept` process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vllm_medic.cli import app
from vllm_medic.store.api import open_store

KEY = "medic-test-key-5f3a9c1e77"  # deliberately not a known token shape: redaction must not rely on shapes


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["ftp://host:1"], "not an http(s) URL"),
        (["http://127.0.0.1:8000", "--steps", "basic,warmup"], "unknown step"),
        (["http://127.0.0.1:8000", "--concurrency", "4,2"], "strictly increasing"),
        (["http://127.0.0.1:8000", "--soak", "forever"], "duration"),
        (["http://127.0.0.1:8000", "--api-key-env", "MEDIC_UNSET_VAR_XYZ"], "not set"),
        (["http://127.0.0.1:8000", "--api-key", KEY], "No such option"),
        (["http://user:pw@127.0.0.1:8000"], "credentials in the URL"),
    ],
)
def test_usage_errors_exit_2(args, message, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MEDIC_UNSET_VAR_XYZ"}
    proc = subprocess.run(
        [str(Path(sys.executable).with_name("vllm-medic")), "accept", *args, "--db", f"sqlite:///{tmp_path}/h.db"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_api_key_from_env_is_used_and_never_shown(sim, db_url, tmp_path):
    s = sim(api_key=KEY, tool_call_parser="hermes", enable_auto_tool_choice=True)
    sheet = tmp_path / "sheet.html"
    junit = tmp_path / "junit.xml"
    result = CliRunner().invoke(
        app,
        ["accept", s.url, "--steps", "start,basic,prefix_reuse,archive", "--quick", "--no-collect",
         "--api-key-env", "MEDIC_KEY", "--json", "--db", db_url, "--html", str(sheet), "--junit", str(junit)],
        env={"MEDIC_KEY": KEY},
    )  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    out = json.loads(result.stdout)
    assert out["verdict"] == "pass_unverified"  # --no-collect, no --bundle: the environment is unproven
    stored = json.dumps(open_store(db_url).get_run(out["run_id"]), default=str)
    for text in (result.stdout, result.stderr, stored, sheet.read_text(), junit.read_text()):
        assert KEY not in text
    assert out["run_id"] in sheet.read_text()


def test_missing_key_is_a_credentials_finding(sim, accept):
    s = sim(api_key=KEY)
    r = accept(s.url, "--steps", "start", "--ready-timeout", "1s")
    assert r.exit_code == 1
    assert r.finding_ids("start") == ["ACC-START-006"]
    assert "--api-key-env" in r.step("start")["findings"][0]["fix"][0]


def _wait_for(predicate, timeout_s: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError(f"accept exited early with {proc.returncode}: {proc.communicate()}")
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_mid_soak_saves_the_run_as_interrupted(sim, db_url, sig):
    s = sim(itl_ms=5.0)
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("vllm-medic")), "accept", s.url, "--steps", "start,prefix_reuse,soak",
         "--quick", "--soak", "120s", "--json", "--db", db_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    store = open_store(db_url)

    def soak_has_samples() -> bool:
        runs = store.list_runs()
        if not runs:
            return False
        steps = store.get_run(runs[0]["run_id"])["steps"]
        soak = next((st for st in steps if st["name"] == "soak"), None)
        return bool(soak and soak["data"].get("samples"))

    try:
        _wait_for(soak_has_samples, 90, proc)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr
    out = json.loads(stdout)
    assert out["verdict"] == "incomplete" and out["status"] == "interrupted"
    assert ("SIGTERM" if sig == signal.SIGTERM else "SIGINT") in out["interrupted_reason"]
    run = store.get_run(out["run_id"])
    assert run["status"] == "interrupted" and run["verdict"] == "incomplete"
    steps = {st["name"]: st for st in run["steps"]}
    assert steps["start"]["status"] == "pass" and steps["prefix_reuse"]["status"] == "pass"
    assert steps["soak"]["status"] == "skipped" and steps["soak"]["data"]["samples"]


def test_a_failing_history_store_never_hides_the_results(sim, accept, db_url):
    import sqlite3

    open_store(db_url).close()  # create the schema, then make every step write fail like a broken disk
    con = sqlite3.connect(db_url.removeprefix("sqlite:///"))
    for op in ("INSERT", "UPDATE"):
        con.execute(
            f"CREATE TRIGGER medic_test_fail_{op.lower()} BEFORE {op} ON medic_steps "
            "BEGIN SELECT RAISE(ABORT, 'disk I/O error (injected by the test)'); END"
        )
    con.commit()
    con.close()
    s = sim(tool_call_parser="hermes", enable_auto_tool_choice=True)
    r = accept(s.url, "--steps", "start,basic")
    assert r.exit_code == 0, r.stdout + r.stderr
    assert [st["status"] for st in r.json["steps"]] == ["pass", "pass"]
    assert r.json["store_errors"] and "disk I/O error" in r.json["store_errors"][0]
    assert "could not be fully written" in r.stderr
    assert "Traceback" not in r.stderr


def test_unreadable_docker_logs_are_a_warning_with_the_reason(sim, accept):
    # Real `docker` client where installed (no engine here), or none at all: either way a warning, not a crash.
    r = accept(sim().url, "--steps", "start", "--docker", "vllm-k3-missing")
    assert r.exit_code == 0, r.stdout + r.stderr
    f = next(f for f in r.step("start")["findings"] if f["id"] == "ACC-START-012")
    assert f["severity"] == "warn" and "docker" in f["evidence"][0]
