"""`vllm-medic triage LOG --json` run in-process on a text, for tests that assert on its root cause."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from vllm_medic.cli import app

runner = CliRunner()


def root_cause(tmp_path: Path, text: str) -> dict:
    log = tmp_path / "x.log"
    log.write_text(text, encoding="utf-8")
    r = runner.invoke(app, ["triage", str(log), "--json"])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)["root_cause"]
