"""`vllm-medic sim` as a user runs it: a real subprocess, Ctrl-C, bad options, a busy port, a crash."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

EXE = Path(sys.executable).with_name("vllm-medic")


def _start(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [str(EXE), "sim", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # blocks until the sim announces itself (or exits)
    if not line:
        proc.kill()
        raise AssertionError(f"sim did not start: {proc.stderr.read() if proc.stderr else ''}")
    return proc, line.strip()


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_runs_in_the_foreground_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    log = tmp_path / "sim.log"
    proc, line = _start("--log-file", str(log), "--json")
    try:
        info = json.loads(line)
        url = info["url"]
        assert url.startswith("http://127.0.0.1:")
        assert _get(url + "/health")[0] == 200
        status, body = _get(url + "/v1/models")
        assert status == 200 and json.loads(body)["data"][0]["max_model_len"] == 4096
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=20) == 0
        assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
        assert "Starting vLLM server on" in log.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_api_key_comes_from_the_environment_and_is_not_printed() -> None:
    secret = "sk-sim-0123456789-SECRET"
    proc, line = _start("--api-key-env", "SIM_KEY_FOR_TEST", "--json", env={"SIM_KEY_FOR_TEST": secret})
    try:
        assert secret not in line
        url = json.loads(line)["url"]
        assert _get(url + "/v1/models")[0] == 401
        assert _get(url + "/v1/models", {"Authorization": f"Bearer {secret}"})[0] == 200
        assert _get(url + "/metrics")[0] == 200  # like vLLM: only /v1 is protected
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=20)


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--error-rate", "2"], "between 0 and 1"),
        (["--routing", "random"], "round_robin or hash"),
        (["--api-key-env", "SURELY_NOT_SET_VAR_XYZ"], "SURELY_NOT_SET_VAR_XYZ"),
    ],
)
def test_bad_options_exit_2_with_a_message(args: list[str], needle: str) -> None:
    done = subprocess.run([str(EXE), "sim", "--port", "0", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert needle in done.stderr and "Traceback" not in done.stderr


def test_busy_port_exits_2() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        done = subprocess.run(
            [str(EXE), "sim", "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 2 and "cannot listen" in done.stderr and "Traceback" not in done.stderr


def test_injected_crash_answers_503_logs_the_oom_and_exits_1(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    proc, line = _start(
        "--crash-at-concurrency",
        "1",
        "--crash-kind",
        "oom",
        "--crash-exit-after-s",
        "1.5",
        "--log-file",
        str(log),
    )
    url = line.rsplit(" ", 1)[-1]
    try:
        body = json.dumps({"messages": [{"role": "user", "content": "hi"}]}).encode()
        req = urllib.request.Request(
            url + "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(req, timeout=10)
        assert exc.value.code == 500
        assert _get(url + "/health")[0] == 503
        assert proc.wait(timeout=30) == 1
        text = log.read_text()
        assert "torch.OutOfMemoryError: CUDA out of memory" in text and "EngineDeadError" in text
        t = time.monotonic()
        with pytest.raises(OSError):
            urllib.request.urlopen(url + "/health", timeout=5)
        assert time.monotonic() - t < 5
    finally:
        if proc.poll() is None:
            proc.kill()
