"""`follow()` / `--follow`: anomalies reported as they appear, across rotation and truncation."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path

from vllm_medic.triage.api import Anomaly, follow

MEDIC = Path(sys.executable).with_name("vllm-medic")
OOM = "(EngineCore_DP0 pid=7) ERROR 11-30 03:10:00 [core.py:900] torch.OutOfMemoryError: CUDA out of memory."
NCCL = (
    "(Worker_TP1 pid=8) ERROR 11-30 03:11:00 [pynccl.py:1] RuntimeError: NCCL error: unhandled system error"
)
DEAD = "(APIServer pid=1) ERROR 11-30 03:10:01 [serving.py:1] vllm.v1.engine.exceptions.EngineDeadError: EngineCore"


def _append(path: Path, *lines: str) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in lines))


def _next(q: queue.Queue[Anomaly], timeout: float = 30.0) -> Anomaly:
    return q.get(timeout=timeout)


def test_follow_reports_new_lines_through_rotation_and_truncation(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("(APIServer pid=1) INFO 11-30 03:00:00 [a.py:1] serving\n", encoding="utf-8")
    q: queue.Queue[Anomaly] = queue.Queue()
    stop = threading.Event()
    t = threading.Thread(target=follow, args=([str(log)], q.put, stop), kwargs={"poll_s": 0.05}, daemon=True)
    t.start()
    try:
        _append(log, "(APIServer pid=1) INFO 11-30 03:00:01 [a.py:1] still fine", OOM, DEAD)
        a = _next(q)
        assert (a.role, a.signature, a.line, a.source) == ("root", "cuda-oom", 3, str(log))
        b = _next(q)
        assert (b.role, b.signature) == ("cascade", "engine-dead")
        # rotation: the old file moves away, a new one appears at the path
        os.rename(log, tmp_path / "engine.log.1")
        log.write_text(NCCL + "\n", encoding="utf-8")
        c = _next(q)
        assert (c.signature, c.line) == ("nccl-system-error", 1)
        # truncation in place (copytruncate): reread from the start
        with log.open("w", encoding="utf-8") as fh:
            fh.write(OOM + "\n")
        d = _next(q)
        assert (d.signature, d.line) == ("cuda-oom", 1)
    finally:
        stop.set()
        t.join(timeout=10)
    assert not t.is_alive()
    assert q.empty()


def test_follow_cli_streams_json_lines_and_stops_on_ctrl_c(tmp_path):
    log = tmp_path / "x.log"
    log.write_text(OOM + "\n", encoding="utf-8")
    proc = subprocess.Popen(
        [str(MEDIC), "triage", "--follow", str(log), "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["signature"] == "cuda-oom" and first["role"] == "root"
        _append(log, NCCL)
        second = json.loads(proc.stdout.readline())
        assert second["signature"] == "nccl-system-error" and second["line"] == 2
    finally:
        proc.send_signal(2)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 1  # a root cause was seen
    assert "Traceback" not in err


def test_follow_docker_logs(monkeypatch):
    """`docker logs --follow` through the fake docker (real vLLM output replayed)."""
    fakebin = Path(__file__).resolve().parent / "fakebin"
    monkeypatch.setenv("PATH", f"{fakebin}{os.pathsep}{os.environ['PATH']}")
    q: queue.Queue[Anomaly] = queue.Queue()
    stop = threading.Event()
    t = threading.Thread(
        target=follow, args=([], q.put, stop), kwargs={"docker": ["vllm-badarch"]}, daemon=True
    )
    try:
        t.start()
        seen = [_next(q)]
        while seen[-1].signature != "arch-not-supported":
            seen.append(_next(q))
        assert seen[-1].source == "docker:vllm-badarch" and seen[-1].role == "root"
    finally:
        stop.set()
        t.join(timeout=10)
