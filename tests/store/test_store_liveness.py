"""When does a `running` run read as interrupted? Dead local pid, recycled pid, silent remote writer."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from vllm_medic.store.liveness import STALE_AFTER_S, pid_alive, process_start_token, this_host, writer_gone


def test_local_writer_alive_dead_and_recycled() -> None:
    me = os.getpid()
    token = process_start_token(me)
    now = time.time()
    assert writer_gone(this_host(), me, token, now, now) is None
    assert pid_alive(me, token)
    assert not pid_alive(me, "not-my-start-time")  # same pid, different process start: a recycled pid
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=60)
    reason = writer_gone(this_host(), proc.pid, None, now, now)
    assert reason is not None and f"writer process {proc.pid}" in reason


def test_remote_writer_is_judged_by_its_last_write() -> None:
    now = time.time()
    assert writer_gone("other-node", 4242, None, now - 60, now) is None
    reason = writer_gone("other-node", 4242, None, now - STALE_AFTER_S - 5, now)
    assert reason is not None and "no write from other-node" in reason
