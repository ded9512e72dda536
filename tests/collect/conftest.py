"""Helpers for the collect tests: real captured outputs, fake tools on PATH, the CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data" / "collect"
FAKEBIN = ROOT / "tests" / "fakebin"
EXAMPLE = ROOT / "examples" / "captured-h200-node"
CLI = [sys.executable, "-m", "vllm_medic.cli"]


def sample(rel: str) -> str:
    return (DATA / rel).read_text(encoding="utf-8")


@pytest.fixture
def recordings(tmp_path: Path) -> Path:
    """A FAKEBIN_DIR seeded with the example node's real outputs (tests add or remove files)."""
    d = tmp_path / "recordings"
    shutil.copytree(EXAMPLE, d)
    return d


def fake_env(
    recordings: Path, extra: dict[str, str] | None = None, with_fakes: bool = True
) -> dict[str, str]:
    """Environment for a `collect` subprocess: fakes first on PATH, then only the interpreter's dir.

    System tools (real ip, lsmod, docker...) are left off PATH so results do not depend on the host.
    """
    path = [str(Path(sys.executable).parent)]
    if with_fakes:
        path.insert(0, str(FAKEBIN))
    env = {
        "PATH": os.pathsep.join(path),
        "FAKEBIN_DIR": str(recordings),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": str(ROOT / "src"),
    }
    env.update(extra or {})
    return env


def run_cli(args: list[str], env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(CLI + args, env=env, capture_output=True, text=True, timeout=timeout)
