"""Fixtures: an in-process ``vllm-medic sim`` on an ephemeral loopback port, per test (real HTTP)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from vllm_medic.sim.config import SimConfig
from vllm_medic.sim.server import SimHandle, start_sim


@pytest.fixture
def make_sim() -> Iterator[Callable[..., SimHandle]]:
    handles: list[SimHandle] = []

    def make(**overrides: object) -> SimHandle:
        handle = start_sim(SimConfig(**overrides))  # type: ignore[arg-type]
        handles.append(handle)
        return handle

    yield make
    for h in handles:
        h.stop()
