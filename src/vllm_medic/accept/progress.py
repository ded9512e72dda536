"""Live progress of accept's load steps: level, requests done/planned, live TTFT/E2E p99, errors so far,
time left. The drawing and the quiet rule (a terminal only; never in CI or with ``--json``) are
``vllm_medic.progress``'s; this module only renders the line from a live StepResult.
"""

from __future__ import annotations

import time
from typing import Any

from vllm_medic.progress import REDRAW_S, LiveLine, time_left, wanted

__all__ = ["QUIET", "REDRAW_S", "LiveProgress", "line", "wanted"]


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
    else:
        left = time_left(done, planned, elapsed_s)
    plan = f"/{planned}" if planned else ""
    return (
        f"{label}: requests {done}{plan} done, TTFT p99 {_p99_ms(pct.get('ttft', {}))}, "
        f"E2E p99 {_p99_ms(pct.get('e2e', {}))}, errors {int(result.failed)}, {left}"
    )


class LiveProgress(LiveLine):
    def watch(self, label: str, get_result: Any, planned: int | None, duration_s: float | None) -> Any:
        t0 = time.perf_counter()
        return self.watching(lambda: line(label, get_result(), planned, duration_s, time.perf_counter() - t0))


QUIET = LiveProgress(False)
