"""Live progress of a load step on a terminal: level, requests done/planned, live TTFT/E2E p99, errors so
far, time left. One Rich line on stderr, redrawn twice a second while the step runs, erased at its end.

Quiet (a no-op) unless stderr is a terminal, and never in CI (``CI`` set) or with ``--json``: pipes and logs
get only the final result.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

REDRAW_S = 0.5


def wanted(as_json: bool, stream: Any = None) -> bool:
    stream = stream if stream is not None else sys.stderr
    if as_json or os.environ.get("CI"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(callable(isatty) and isatty())


def _p99_ms(summary: dict[str, Any]) -> str:
    if not summary or not summary.get("count") or summary.get("p99") is None:
        return "–"
    return f"{float(summary['p99']) * 1000.0:.0f} ms"


def line(label: str, result: Any, planned: int | None, duration_s: float | None, elapsed_s: float) -> str:
    """One progress line from a live StepResult (pure: the test reads it back from the terminal)."""
    done = int(result.ok) + int(result.failed)
    pct = result.percentiles()
    if duration_s is not None:
        left = f"{max(0.0, duration_s - elapsed_s):.0f} s left"
    elif planned and done:
        left = f"~{max(0.0, elapsed_s / done * (planned - done)):.0f} s left"
    else:
        left = "time left unknown"
    plan = f"/{planned}" if planned else ""
    return (
        f"{label}: requests {done}{plan} done, TTFT p99 {_p99_ms(pct.get('ttft', {}))}, "
        f"E2E p99 {_p99_ms(pct.get('e2e', {}))}, errors {int(result.failed)}, {left}"
    )


class LiveProgress:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    @contextlib.asynccontextmanager
    async def watch(
        self, label: str, get_result: Any, planned: int | None, duration_s: float | None
    ) -> AsyncIterator[None]:
        if not self.enabled:
            yield
            return
        from rich.console import Console
        from rich.live import Live

        t0 = time.perf_counter()
        console = Console(stderr=True, highlight=False)
        with Live("", console=console, transient=True, auto_refresh=False) as live:

            async def redraw() -> None:
                while True:
                    live.update(line(label, get_result(), planned, duration_s, time.perf_counter() - t0))
                    live.refresh()
                    await asyncio.sleep(REDRAW_S)

            task = asyncio.create_task(redraw())
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


QUIET = LiveProgress(False)
