"""Hooks: the places a stage's command leaves open for a package above it to fill.

A stage never imports a package above it. Where a command has a multi-node form (`check` on a
multi-node bundle, `collect --ray/--hosts/--k8s`, `triage --ray`, `accept --workers`), the stage
declares a `Hook` and calls what fills it; the cluster package plugs its handlers in when the command
line is built (``cluster/cli.py``, registered by ``vllm_medic/cli.py`` after the stages).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from vllm_medic.errors import ToolError

F = TypeVar("F", bound=Callable[..., Any])


class Hook(Generic[F]):
    def __init__(self, what: str) -> None:
        self.what = what
        self._fn: F | None = None

    def plug(self, fn: F) -> None:
        self._fn = fn

    @property
    def plugged(self) -> F | None:
        return self._fn

    def need(self) -> F:
        """What fills the hook; a tool error (exit 3) when nothing does (a stage used on its own)."""
        if self._fn is None:
            raise ToolError(f"{self.what} is not available: the cluster package did not plug it in")
        return self._fn
