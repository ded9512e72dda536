"""A real writer process killed mid-run keeps what it measured and reads back as interrupted."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_medic.store.api import open_store

WRITER = Path(__file__).with_name("store_writer_proc.py")


def _start_writer(url: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    run_id = proc.stdout.readline().strip()
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
    for t in ("1", "2"):
        proc.stdin.write(t + "\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "ok"
    return proc, run_id


def _assert_kept(url: str, run_id: str) -> dict:
    run = open_store(url).get_run(run_id)
    assert [(s["name"], s["status"]) for s in run["steps"]] == [("start", "pass"), ("ramp", "running")]
    kinds = [e["kind"] for e in run["events"]]
    assert kinds.count("ramp_level") == 3 and kinds.count("soak_sample") == 2
    assert "sk-secretsecret" not in str(run["meta"])
    return run


@pytest.mark.slow
def test_sigkill_keeps_measurements_and_reads_interrupted(store_url: str) -> None:
    proc, run_id = _start_writer(store_url)
    running = open_store(store_url).get_run(run_id)
    assert running["status"] == "running"  # the writer is alive: not misreported
    proc.kill()
    proc.wait(timeout=60)
    run = _assert_kept(store_url, run_id)
    assert (run["status"], run["verdict"]) == ("interrupted", "incomplete")
    assert f"writer process {proc.pid}" in run["reason"]
    listed = open_store(store_url).list_runs()
    assert listed[0]["status"] == "interrupted"


@pytest.mark.slow
def test_sigint_marks_interrupted_with_reason(store_url: str) -> None:
    proc, run_id = _start_writer(store_url)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    run = _assert_kept(store_url, run_id)
    assert (run["status"], run["verdict"]) == ("interrupted", "incomplete")
    assert "Ctrl-C" in run["reason"]
    assert run["finished_at"] is not None
