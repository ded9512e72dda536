"""Hung and garbage-spewing host tools, and Ctrl-C in the middle of a command.

The fake tools in tests/fakebin replay real recordings; ``FAKEBIN_<TOOL>_HANG`` makes one never return
and ``FAKEBIN_<TOOL>_GARBAGE`` makes it print random bytes. Ctrl-C is a real SIGINT sent to the real
console-script process once it is observably busy (the fake tool logged its start, or the first output
line arrived), never after a fixed sleep.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from robustkit import MEDIC, REPO, TRACEBACK, medic_env, run_medic

FAKEBIN = REPO / "tests" / "fakebin"
RECORDINGS = REPO / "tests" / "data" / "checks" / "bundles" / "b200-r575-k3"


def _tools_env(home: Path, tmp: Path, **knobs: str) -> dict[str, str]:
    return medic_env(
        home,
        PATH=f"{FAKEBIN}:{os.environ['PATH']}",
        FAKEBIN_DIR=str(RECORDINGS),
        FAKEBIN_LOG=str(tmp / "fakebin.jsonl"),
        **knobs,
    )


def _wait_for(predicate, what: str, limit_s: float = 60.0) -> None:  # noqa: ANN001 - a zero-arg callable
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    pytest.fail(f"never observed: {what}")


def _tool_started(log: Path, tool: str) -> bool:
    if not log.exists():
        return False
    return any(json.loads(line).get("tool") == tool for line in log.read_text().splitlines() if line.strip())


def _interrupt(argv: list[str], env: dict[str, str], ready, what: str) -> tuple[int, str, str]:  # noqa: ANN001
    proc = subprocess.Popen(
        [str(MEDIC), *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    try:
        _wait_for(lambda: ready(proc), what)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("interrupt-home")


@pytest.mark.parametrize("command", ["collect", "doctor", "health", "check"])
def test_a_host_tool_printing_garbage_is_reported_not_a_crash(
    command: str, home: Path, tmp_path: Path
) -> None:
    argv = {
        "collect": ["collect", "-o", str(tmp_path / "bundle"), "--json"],
        "doctor": ["doctor", "--json"],
        "health": ["health", "--json", "--timeout", "20"],
        "check": ["check", "--json"],
    }[command]
    env = _tools_env(home, tmp_path, FAKEBIN_NVIDIA_SMI_GARBAGE="1", FAKEBIN_LSMOD_GARBAGE="1")
    outcome = run_medic(argv, env, timeout=120)
    assert TRACEBACK not in outcome.text and "internal error" not in outcome.text, outcome.describe()
    assert outcome.returncode in (0, 1), outcome.describe()
    payload = json.loads(outcome.stdout)
    assert isinstance(payload, dict) and payload, outcome.describe()


@pytest.mark.parametrize("command", ["doctor", "check"])
def test_a_hung_nvidia_smi_costs_the_timeout_and_is_named(command: str, home: Path, tmp_path: Path) -> None:
    env = _tools_env(home, tmp_path, FAKEBIN_NVIDIA_SMI_HANG="child")
    outcome = run_medic([command, "--timeout", "2", "--json"], env, timeout=120)
    assert TRACEBACK not in outcome.text, outcome.describe()
    assert outcome.returncode == 1, outcome.describe()
    ids = [f["id"] for f in json.loads(outcome.stdout)["findings"] if f["severity"] == "fail"]
    assert "DRV001" in ids, outcome.describe()  # no driver answer: named, with the likely causes


def test_ctrl_c_during_collect_keeps_the_bundle_and_exits_130(home: Path, tmp_path: Path) -> None:
    env = _tools_env(home, tmp_path, FAKEBIN_NVIDIA_SMI_HANG="1")
    out = tmp_path / "bundle"
    code, stdout, stderr = _interrupt(
        ["collect", "--timeout", "120", "-o", str(out)],
        env,
        lambda _p: _tool_started(tmp_path / "fakebin.jsonl", "nvidia-smi"),
        "nvidia-smi started by collect",
    )
    assert TRACEBACK not in stdout + stderr, stdout + stderr
    assert code == 130, stdout + stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest.get("interrupted") is True, manifest
    assert (out / "snapshot.json").is_file()


def test_ctrl_c_during_doctor_prints_partial_findings_and_exits_130(home: Path, tmp_path: Path) -> None:
    env = _tools_env(home, tmp_path, FAKEBIN_NVIDIA_SMI_HANG="1")
    code, stdout, stderr = _interrupt(
        ["doctor", "--timeout", "120"],
        env,
        lambda _p: _tool_started(tmp_path / "fakebin.jsonl", "nvidia-smi"),
        "nvidia-smi started by doctor",
    )
    assert TRACEBACK not in stdout + stderr, stdout + stderr
    assert code == 130, stdout + stderr
    assert "interrupted" in stderr and "Driver and CUDA" in stdout, stdout + stderr


def test_ctrl_c_ends_triage_follow_with_the_verdict_and_no_traceback(home: Path, tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(
        "INFO 11-30 03:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
        "ERROR 11-30 03:00:02 [core.py:6] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
        encoding="utf-8",
    )
    stdout_seen: list[bytes] = []

    def printed_something(proc: subprocess.Popen) -> bool:
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        chunk = proc.stdout.read()
        if chunk:
            stdout_seen.append(chunk)
        return b"OutOfMemoryError" in b"".join(stdout_seen)

    code, stdout, stderr = _interrupt(
        ["triage", "-f", str(log)], medic_env(home), printed_something, "triage -f printed the OOM line"
    )
    text = b"".join(stdout_seen).decode("utf-8", "replace") + stdout + stderr
    assert TRACEBACK not in text, text
    # In --follow mode Ctrl-C is the normal way to stop: the exit code is the verdict so far (1: a root
    # cause was printed), not 130 (triage/cli.py _follow).
    assert code == 1, text


def test_ctrl_c_stops_the_sim_with_exit_0(home: Path) -> None:
    seen: list[bytes] = []

    def listening(proc: subprocess.Popen) -> bool:
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        chunk = proc.stdout.read()
        if chunk:
            seen.append(chunk)
        return b"listening on" in b"".join(seen)

    code, stdout, stderr = _interrupt(["sim", "--port", "0"], medic_env(home), listening, "sim listening")
    assert TRACEBACK not in stdout + stderr, stdout + stderr
    assert code == 0, stdout + stderr


def test_ctrl_c_during_cache_probe_exits_130_and_the_stored_run_reads_interrupted(
    home: Path, tmp_path: Path
) -> None:
    """Every stream stalls after its first chunk; once the sim reports a running request, SIGINT."""
    import urllib.request

    from vllm_medic.serve.metrics import parse_prometheus
    from vllm_medic.sim.config import SimConfig
    from vllm_medic.sim.server import start_sim

    handle = start_sim(SimConfig(stall_rate=1.0, stall_after=1, stall_s=120.0))
    db = f"sqlite:///{tmp_path / 'h.db'}"

    def running(_proc: subprocess.Popen) -> bool:
        with urllib.request.urlopen(f"{handle.url}/metrics", timeout=5) as resp:  # noqa: S310 - loopback
            metrics = parse_prometheus(resp.read().decode())
        return sum(s.value for s in metrics.samples if s.name == "vllm:num_requests_running") > 0

    try:
        code, stdout, stderr = _interrupt(
            [
                "cache",
                "probe",
                handle.url,
                "--filler-repeats",
                "1",
                "--out",
                str(tmp_path / "p.jsonl"),
                "--store",
                db,
            ],
            medic_env(home),
            running,
            "the probe's first request running on the sim",
        )
    finally:
        handle.stop()
    assert TRACEBACK not in stdout + stderr, stdout + stderr
    assert code == 130, stdout + stderr
    assert (tmp_path / "p.jsonl").exists()
    history = run_medic(["history", "--db", db, "--json"], medic_env(home))
    runs = json.loads(history.stdout)["runs"]
    assert runs and runs[0]["status"] == "interrupted", history.describe()
