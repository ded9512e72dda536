"""`vllm-medic triage LOG --json` run in-process on a text, for tests that assert on its root cause."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from vllm_medic.cli import app

runner = CliRunner()
BLIND = Path(__file__).resolve().parents[1] / "data/triage/blind"


def blind_case(round_file: str, case_id: str) -> dict:
    """One labelled case of a blind round file (`round12.jsonl`), by id."""
    for raw in (BLIND / round_file).read_text(encoding="utf-8").splitlines():
        case = json.loads(raw)
        if case["id"] == case_id:
            return case
    raise AssertionError(f"{case_id} not in {round_file}")


def triage_json(tmp_path: Path, text: str) -> dict:
    """The whole `triage --json` document for a text."""
    log = tmp_path / "x.log"
    log.write_text(text, encoding="utf-8")
    r = runner.invoke(app, ["triage", str(log), "--json"])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)


def root_cause(tmp_path: Path, text: str) -> dict:
    return triage_json(tmp_path, text)["root_cause"]


def found_root(tmp_path: Path, text: str) -> dict:
    """The root cause of `triage --json` for a text; fails the test when there is none."""
    rc = root_cause(tmp_path, text)
    assert rc is not None, "no root"
    return rc
