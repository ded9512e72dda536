"""Main-thread waits that Ctrl-C can always end.

Linux hands a process-directed SIGINT to any thread that does not block it. When it lands in a
worker thread (a probe's thread asleep in `select`), CPython records it there, but the main thread,
asleep in a lock wait with no timeout, is never woken: Ctrl-C is ignored until the wait ends by
itself, which for a hung probe is its whole timeout. Waiting in short slices lets the main thread
run the pending handler (KeyboardInterrupt) within one slice, whichever thread the kernel chose.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

SLICE_S = 0.1

T = TypeVar("T")


def future_result(fut: Future[T], timeout_s: float | None = None) -> T:
    """`fut.result(timeout_s)`, woken every SLICE_S so a pending Ctrl-C is raised here."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        step = SLICE_S if deadline is None else max(0.0, min(SLICE_S, deadline - time.monotonic()))
        try:
            return fut.result(timeout=step)
        except FutureTimeout:
            if deadline is not None and time.monotonic() >= deadline:
                raise


def event_wait(event: threading.Event, timeout_s: float) -> bool:
    """`event.wait(timeout_s)`, woken every SLICE_S so a pending Ctrl-C is raised here."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        if event.wait(max(0.0, min(SLICE_S, left))):
            return True
        if left <= SLICE_S:
            return False
