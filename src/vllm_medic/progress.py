"""Live progress on a terminal, shared by every long-running command (accept's load steps, cache probe,
collect --ray/--hosts, triage over large inputs): one Rich line on stderr, redrawn twice a second while
the work runs, erased when it ends. A command supplies only a pure function that renders its line from
the live state; the drawing, the redraw loop and the quiet rule live here.

Quiet (a no-op: no thread, no task, nothing written) unless stderr is a terminal, and never in CI
(``CI`` set) or with ``--json``: pipes and logs get only the final result.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

REDRAW_S = 0.5
POLL_S = 0.1  # while a command's line is still empty: show it as soon as there is something to show


def wanted(as_json: bool, stream: Any = None) -> bool:
    stream = stream if stream is not None else sys.stderr
    if as_json or os.environ.get("CI"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(callable(isatty) and isatty())


def time_left(done: int, planned: int | None, elapsed_s: float) -> str:
    """``~N s left`` from the pace so far; ``time left unknown`` before the first item or without a plan."""
    if planned and done:
        return f"~{max(0.0, elapsed_s / done * (planned - done)):.0f} s left"
    return "time left unknown"


def _live() -> Any:
    from rich.console import Console
    from rich.live import Live

    # stdout is never redirected: a command's result must not end up on stderr behind the line.
    return Live(
        "",
        console=Console(stderr=True, highlight=False),
        transient=True,
        auto_refresh=False,
        redirect_stdout=False,
        redirect_stderr=False,
    )


class LiveLine:
    """The progress line of one command: ``watching`` for asyncio code, ``showing`` for threaded code."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @contextlib.asynccontextmanager
    async def watching(self, render: Callable[[], str]) -> AsyncIterator[None]:
        """Redraw ``render()`` from a task on the running loop (the state it reads is never shared
        with another thread)."""
        if not self.enabled:
            yield
            return
        import asyncio

        with _live() as live:

            async def redraw() -> None:
                while True:
                    live.update(render())
                    live.refresh()
                    await asyncio.sleep(REDRAW_S)

            task = asyncio.create_task(redraw())
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    @contextlib.contextmanager
    def showing(self, render: Callable[[], str]) -> Iterator[None]:
        """Redraw ``render()`` from a daemon thread while the body runs. Nothing is drawn while
        ``render()`` returns "" (a command uses that to keep short work from flashing a line); ``render``
        must only read plain counters the worker updates."""
        if not self.enabled:
            yield
            return
        stop = threading.Event()

        def redraw() -> None:
            live = None
            try:
                while True:
                    text = render()
                    if text:
                        if live is None:
                            live = _live()
                            live.start()
                        live.update(text)
                        live.refresh()
                    if stop.wait(REDRAW_S if live is not None else POLL_S):
                        return
            except Exception:  # noqa: BLE001 - a progress line never fails the work it shows
                return
            finally:
                if live is not None:
                    live.stop()

        thread = threading.Thread(target=redraw, name="progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=5.0)


QUIET = LiveLine(False)
