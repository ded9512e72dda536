"""The history commands on each backend (SQLite and the session's real PostgreSQL), via --db and $VLLM_MEDIC_DB."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from vllm_medic.cli import app
from vllm_medic.model import Finding
from vllm_medic.store.api import open_store
from vllm_medic.store.step_row import StepRow

runner = CliRunner()


def test_history_report_diff_on_backend(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = open_store(store_url)
    a = store.start_run("accept", "http://a:8000", {})
    store.record_step(a, StepRow("basic", "pass"))
    store.finish_run(a, "pass")
    b = store.start_run("accept", "http://a:8000", {})
    store.record_step(
        b,
        StepRow.of("basic", "fail", [Finding("X1", "fail", "other", "broken stream")], {}),
    )
    store.finish_run(b, "fail")

    hist = runner.invoke(app, ["history", "--db", store_url, "--json"])
    assert hist.exit_code == 0, hist.output
    assert [r["run_id"] for r in json.loads(hist.stdout)["runs"]] == [b, a]

    monkeypatch.setenv("VLLM_MEDIC_DB", store_url)  # the environment default reaches every command
    ok = runner.invoke(app, ["report", a, "--json"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["steps"][0]["status"] == "pass"
    bad = runner.invoke(app, ["report", "latest"])
    assert bad.exit_code == 1 and "broken stream" in bad.stdout
    d = runner.invoke(app, ["diff", a, b, "--json"])
    assert d.exit_code == 0
    assert json.loads(d.stdout)["steps"] == [{"name": "basic", "a": "pass", "b": "fail", "changed": True}]
