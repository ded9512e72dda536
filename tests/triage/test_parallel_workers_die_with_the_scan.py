"""A scan's forked workers never outlive it: killed with its process (SIGKILL, the OOM killer), they go
too, instead of staying behind as orphans that hold the caller's output pipe open (parallel.py)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

_SCAN = r"""
import os, sys

from vllm_medic.triage.catalogue import load_catalogue
from vllm_medic.triage.parallel import scan_in_workers

fifo, pids = sys.argv[1], sys.argv[2]


def work(i):
    with open(pids, "a") as fh:
        fh.write(f"{os.getpid()}\n")
    with open(fifo, "rb") as fh:  # blocks: nobody opens the FIFO for writing
        return len(fh.read())


list(scan_in_workers(2, 2, load_catalogue(), work))
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_workers_die_when_the_scanning_process_is_killed(tmp_path):
    fifo, pids = tmp_path / "never-written", tmp_path / "pids"
    os.mkfifo(fifo)
    scan = subprocess.Popen([sys.executable, "-c", _SCAN, str(fifo), str(pids)])
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(workers) < 2 and time.monotonic() < deadline and scan.poll() is None:
            workers = [int(x) for x in pids.read_text().split()] if pids.exists() else []
            time.sleep(0.05)
        assert len(workers) == 2, (workers, scan.poll())
        scan.kill()
        scan.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in workers if _alive(p)], "workers outlived the scan"
    finally:
        scan.kill()
        for p in workers:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
