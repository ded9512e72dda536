"""Fixtures for the health tests: real captured outputs, and fake host tools on PATH that replay them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "health"
FAKEBIN = Path(__file__).resolve().parent / "fakebin"
VENV_BIN = Path(sys.executable).parent


def data(rel: str) -> str:
    return (DATA / rel).read_text("utf-8")


@dataclass
class FakeHost:
    """A scenario directory read by the fake tools; ``env`` puts them first on PATH."""

    dir: Path
    env: dict[str, str]

    def replay(
        self,
        name: str,
        out: str | None = None,
        err: str | None = None,
        rc: int | None = None,
        hang: float | None = None,
    ) -> None:
        if out is not None:
            (self.dir / f"{name}.out").write_text(out)
        if err is not None:
            (self.dir / f"{name}.err").write_text(err)
        if rc is not None:
            (self.dir / f"{name}.rc").write_text(str(rc))
        if hang is not None:
            (self.dir / f"{name}.hang").write_text(str(hang))

    def calls(self) -> list[str]:
        p = self.dir / "calls.log"
        return p.read_text().splitlines() if p.exists() else []

    def run_cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """The installed console script, as a user runs it, with the fake tools first on PATH."""
        return subprocess.run(
            [str(VENV_BIN / "vllm-medic"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def run_json(self, *args: str, timeout: float = 120) -> tuple[int, dict]:
        proc = self.run_cli(*args, "--json", timeout=timeout)
        assert proc.stdout.strip(), proc.stderr
        return proc.returncode, json.loads(proc.stdout)


@pytest.fixture
def fake_host(tmp_path: Path) -> FakeHost:
    scen = tmp_path / "scenario"
    scen.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in FAKEBIN.iterdir():
        shutil.copy2(tool, bindir / tool.name)
    env = dict(os.environ)
    # only the fake tools and the basics the sh scripts need; no real docker/dmesg can leak in
    env["PATH"] = f"{bindir}:/usr/bin:/bin"
    env["HEALTH_FAKE_DIR"] = str(scen)
    env["COLUMNS"] = "250"  # rich wraps error messages at the terminal width
    for k in list(env):
        if k.startswith(("NCCL_", "GLOO_")):
            del env[k]
    return FakeHost(scen, env)


def ids(payload: dict) -> dict[str, dict]:
    return {f["id"]: f for f in payload["findings"]}
