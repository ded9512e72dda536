"""The acceptance loop's steps, in run order: the one table options, runner, sheet, views, CLI help and docs read.

Adding a step touches two files: its module (``accept/step_<name>.py``) and a row here. ``run`` names the
step function by import path and is imported only when the step runs, so this table imports nothing:
``report`` and ``store`` read it, and ``accept`` imports both of them, so the table cannot live inside the
``accept`` package without closing a package import cycle (tests/test_architecture.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Step:
    name: str
    title: str  # the sheet shows it numbered: "4. Concurrency ramp"
    needs_server: bool  # skipped (with the reason) once the server is unreachable or its engine is dead
    run: str  # "module:function", an ``async def (RunContext) -> StepOutcome``

    def function(self) -> Callable[[Any], Any]:
        module, _, attr = self.run.partition(":")
        fn: Callable[[Any], Any] = getattr(importlib.import_module(module), attr)
        return fn


STEPS: tuple[Step, ...] = (
    Step("start", "Service start", False, "vllm_medic.accept.step_start:run_start"),
    Step("basic", "Basic requests", True, "vllm_medic.accept.step_basic:run_basic"),
    Step("prefix_reuse", "Long-prefix reuse", True, "vllm_medic.accept.step_prefix:run_prefix_reuse"),
    Step("ramp", "Concurrency ramp", True, "vllm_medic.accept.step_ramp:run_ramp"),
    Step("soak", "Soak", True, "vllm_medic.accept.step_soak:run_soak"),
    Step("archive", "Archive", False, "vllm_medic.accept.step_archive:run_archive"),
)

STEP_NAMES: tuple[str, ...] = tuple(s.name for s in STEPS)
BY_NAME: dict[str, Step] = {s.name: s for s in STEPS}


def numbered_title(name: str) -> str:
    """``"4. Concurrency ramp"`` for a known step; an unknown (older or newer) stored name as it is."""
    step = BY_NAME.get(name)
    return f"{STEP_NAMES.index(name) + 1}. {step.title}" if step else name
