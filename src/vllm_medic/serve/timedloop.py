"""An asyncio event loop that remembers when its poll returned, for honest socket-read timestamps.

When a burst of streams becomes readable at once (vLLM's continuous batching emits the next token of
every running request in the same engine step), asyncio runs their read callbacks one after the
other. Stamping ``time.perf_counter()`` inside each callback then charges the *client's* processing of
the earlier streams to the later ones: at 256 streams that is milliseconds of made-up latency.

This loop's selector records the time its ``select()`` returned. Every byte a callback reads in that
iteration was already in the socket buffer then, so that time is a tight upper bound on arrival and a
lower bound on nothing the client did. ``serve.rawhttp`` uses it when running on such a loop and falls
back to ``perf_counter()`` at the callback otherwise.

Use: ``timedloop.run(coro)`` instead of ``asyncio.run(coro)`` (the load generator and ``accept`` do).
"""

from __future__ import annotations

import asyncio
import selectors
import time
import weakref
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class TimedSelector(selectors.DefaultSelector):
    poll_time: float = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(timeout)
        self.poll_time = time.perf_counter()
        return ready


_SELECTORS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, TimedSelector] = weakref.WeakKeyDictionary()


def new_event_loop() -> asyncio.AbstractEventLoop:
    selector = TimedSelector()
    loop = asyncio.SelectorEventLoop(selector)
    _SELECTORS[loop] = selector
    return loop


def selector_for(loop: asyncio.AbstractEventLoop) -> TimedSelector | None:
    """The timed selector of ``loop``, or None for any other loop."""
    return _SELECTORS.get(loop)


def run(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run`` on a timed loop (Ctrl-C cancels the main task, as asyncio.run does)."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)
