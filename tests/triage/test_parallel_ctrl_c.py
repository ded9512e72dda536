"""Ctrl-C that lands in one of the worker pool's handler threads still ends a parallel scan at once.

A terminal's SIGINT goes to the whole process group; the forked workers ignore it and, in the parent,
the kernel may pick a Pool handler thread. `pthread_kill` aims it there on purpose.
"""

import contextlib
import os
import signal
import threading
import time

import pytest

from vllm_medic.triage.catalogue import load_catalogue
from vllm_medic.triage.parallel import scan_in_workers


def test_sigint_delivered_to_a_pool_thread_interrupts_the_scan(tmp_path):
    fifo = tmp_path / "never-written"
    os.mkfifo(fifo)

    def work(i: int) -> int:
        with open(fifo, "rb") as fh:  # blocks: nobody opens the FIFO for writing
            return len(fh.read())

    scan_ended = threading.Event()

    def aim_sigint_at_a_pool_thread() -> None:
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                # A handler thread is listed before it runs (no ident yet): aim only at a running one.
                handlers = [t for t in threading.enumerate() if "_handle_" in t.name and t.ident is not None]
                if handlers:
                    signal.pthread_kill(handlers[0].ident, signal.SIGINT)
                    break
                time.sleep(0.02)
        finally:
            if not scan_ended.wait(
                15
            ):  # the interrupt was lost: release the workers so the test fails, not hangs
                with contextlib.suppress(OSError):
                    os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    # As in a terminal: a parent that ignores SIGINT (a shell's background job) would hand that down.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    aimer = threading.Thread(target=aim_sigint_at_a_pool_thread, daemon=True)
    t0 = time.monotonic()
    aimer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            list(scan_in_workers(2, 2, load_catalogue(), work))
    finally:
        scan_ended.set()
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - t0 < 15
