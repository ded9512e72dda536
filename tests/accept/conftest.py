"""Fixtures for the accept tests: an in-process sim per test, a fresh history DB, a CLI runner."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from vllm_medic.cli import app


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'history.db'}"


@pytest.fixture
def sim() -> Iterator[Callable[..., Any]]:
    """``sim(**SimConfig fields)`` starts a sim on a free loopback port; all are stopped at the end."""
    from vllm_medic.sim.config import SimConfig
    from vllm_medic.sim.server import start_sim

    handles = []

    def start(**fields: Any) -> Any:
        handle = start_sim(SimConfig(**fields))
        handles.append(handle)
        return handle

    yield start
    for h in handles:
        h.stop()


class AcceptRun:
    def __init__(self, exit_code: int, stdout: str, stderr: str) -> None:
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        self.json: dict[str, Any] = json.loads(stdout) if stdout.strip().startswith("{") else {}

    def step(self, name: str) -> dict[str, Any]:
        return next(s for s in self.json["steps"] if s["name"] == name)

    def finding_ids(self, name: str) -> list[str]:
        return [f["id"] for f in self.step(name)["findings"]]


@pytest.fixture
def accept(db_url: str) -> Callable[..., AcceptRun]:
    """Run ``vllm-medic accept ARGS --json --db <tmp>`` in-process and parse its JSON."""

    def run(*args: str, env: dict[str, str] | None = None) -> AcceptRun:
        runner = CliRunner()
        result = runner.invoke(app, ["accept", *args, "--json", "--db", db_url], env=env)
        stderr = result.stderr
        return AcceptRun(result.exit_code, result.stdout, stderr)

    return run
