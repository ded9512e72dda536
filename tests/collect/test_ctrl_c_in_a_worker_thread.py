"""Ctrl-C that the kernel hands to a probe's thread instead of the main one still ends collection.

A process-directed SIGINT goes to any thread that does not block it; `pthread_kill` aims it at a
probe thread on purpose, which is the case that left `doctor` waiting out a 50 s probe in CI.
"""

import signal
import threading
import time

import pytest

from vllm_medic.collect.runner import ProbesInterrupted, run_all


def test_sigint_delivered_to_a_probe_thread_interrupts_run_all(tmp_path):
    marker = tmp_path / "started"
    script = tmp_path / "hang.sh"
    script.write_text(f'#!/bin/sh\necho started >> "{marker}"\nexec sleep 60\n')
    script.chmod(0o755)
    jobs = [(f"hang-{i}", [str(script)]) for i in range(3)]

    def aim_sigint_at_a_probe_thread() -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            started = len(marker.read_text().splitlines()) if marker.exists() else 0
            probes = [t for t in threading.enumerate() if t.name.startswith("probe") and t.ident is not None]
            if started == len(jobs) and probes:
                signal.pthread_kill(probes[0].ident, signal.SIGINT)
                return
            time.sleep(0.02)

    # As in a terminal: a parent that ignores SIGINT (a shell's background job) would hand that down.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    aimer = threading.Thread(target=aim_sigint_at_a_probe_thread, daemon=True)
    t0 = time.monotonic()
    aimer.start()
    try:
        with pytest.raises(ProbesInterrupted) as caught:
            run_all(jobs, timeout_s=20)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - t0 < 10  # not the 20 s probe timeout
    assert {o.status for o in caught.value.partial.values()} == {"interrupted"}
