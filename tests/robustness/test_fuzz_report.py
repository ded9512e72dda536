"""A stored run is read back from a database that other versions, other writers or a crash may have
left in any JSON shape. The sheet, the JUnit XML, the terminal view and `diff` must render whatever
they find (and escape it), never raise.

The seed is a real run: `vllm-medic accept` against the simulator, its snapshot attached. Hypothesis
then replaces random sub-trees of that run and snapshot with random JSON.
"""

from __future__ import annotations

import io
import json
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from robustkit import REPO, medic_env, run_medic
from test_fuzz_parsers import JSON_ANY, _mutated

from vllm_medic.store.step_row import StepRow

RECORDINGS = REPO / "tests" / "data" / "checks" / "bundles" / "b200-r575-k3"
MARK = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any] | None]:
    from vllm_medic.sim.config import SimConfig
    from vllm_medic.sim.server import start_sim
    from vllm_medic.store.api import open_store
    from vllm_medic.store.views import load_snapshot

    tmp = tmp_path_factory.mktemp("real-run")
    db = f"sqlite:///{tmp / 'h.db'}"
    handle = start_sim(SimConfig())
    try:
        outcome = run_medic(
            [
                "accept",
                handle.url,
                "--steps",
                "start,basic,prefix_reuse,ramp,soak,archive",
                "--quick",
                "--soak",
                "2s",
                "--concurrency",
                "1,2",
                "--requests-per-step",
                "4",
                "--bundle",
                str(RECORDINGS),
                "--no-collect",
                "--db",
                db,
            ],
            medic_env(tmp),
            timeout=240,
        )
    finally:
        handle.stop()
    assert outcome.returncode in (0, 1), outcome.describe()
    store = open_store(db)
    run = store.get_run("latest")
    names = {a["name"] for a in run.get("attachments") or []}
    snapshot = (
        load_snapshot(store.get_attachment(run["run_id"], "snapshot.json"))
        if "snapshot.json" in names
        else None
    )
    assert {s["name"] for s in run["steps"]} >= {"start", "basic", "ramp", "soak"}, run["steps"]
    return run, snapshot


def _render_all(run: dict[str, Any], snapshot: dict[str, Any] | None) -> str:
    from vllm_medic.history.cli import _print_run, report_exit_code
    from vllm_medic.report.html import render_sheet
    from vllm_medic.store.diffing import diff_runs
    from vllm_medic.store.run_junit import run_to_junit

    sheet = render_sheet(run, snapshot)
    run_to_junit(run, strict=True)
    report_exit_code(run, strict=False)
    with redirect_stdout(io.StringIO()):
        _print_run(run)
    json.dumps(diff_runs(run, snapshot, run, snapshot), default=str)
    return sheet


def test_the_real_run_renders(real_run: tuple[dict[str, Any], dict[str, Any] | None]) -> None:
    sheet = _render_all(*real_run)
    assert "<html" in sheet.lower() and "ramp" in sheet.lower()


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(data=st.data())
def test_a_run_of_any_shape_renders_escaped(
    real_run: tuple[dict[str, Any], dict[str, Any] | None], data: st.DataObject
) -> None:
    run, snapshot = real_run
    run = json.loads(json.dumps(run))
    snapshot = json.loads(json.dumps(snapshot)) if snapshot is not None else None
    # Only what the store decodes from JSON can have any shape: meta, each step's data and findings,
    # each event's payload, and the attached snapshot (get_run builds the rest from typed columns).
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        target = data.draw(st.sampled_from(["meta", "data", "findings", "payload", "snapshot"]))
        if target == "meta":
            run["meta"] = _mutated(run.get("meta") or {}, data)
        elif target in ("data", "findings") and run["steps"]:
            step = data.draw(st.sampled_from(run["steps"]))
            step[target] = _mutated(step.get(target), data)
        elif target == "payload" and run.get("events"):
            event = data.draw(st.sampled_from(run["events"]))
            event["payload"] = _mutated(event.get("payload"), data)
        elif target == "snapshot":
            mutated = _mutated(snapshot or {}, data)
            snapshot = mutated if isinstance(mutated, dict) else None
    # get_run hands renderers dicts for data/payload/meta and finding dicts: apply the same reading
    from vllm_medic.store.api import _as_findings, _as_object

    run["meta"] = _as_object(run.get("meta"))
    for step in run["steps"]:
        step["data"], step["findings"] = _as_object(step.get("data")), _as_findings(step.get("findings"))
    for event in run.get("events") or []:
        event["payload"] = _as_object(event.get("payload"))
    # a string planted anywhere must come out escaped
    run["target"] = MARK
    sheet = _render_all(run, snapshot)
    assert MARK not in sheet


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(step_data=JSON_ANY, payload=JSON_ANY, findings=JSON_ANY)
def test_report_cli_on_a_stored_run_of_any_shape(
    step_data: Any, payload: Any, findings: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Through the public store API and the `report`/`diff` commands (in-process runner)."""
    from typer.testing import CliRunner

    from vllm_medic.cli import app
    from vllm_medic.store.api import open_store

    path = tmp_path_factory.mktemp("shaped") / "h.db"
    store = open_store(f"sqlite:///{path}")
    run_id = store.start_run("accept", MARK, {"argv": [MARK]})
    store.record_step(run_id, StepRow("ramp", "fail", data=step_data))
    for kind in ("ramp_level", "soak_sample", "archive_item"):
        store.record_event(run_id, kind, payload if isinstance(payload, dict) else {"value": payload})
    store.attach(run_id, "snapshot.json", json.dumps(findings), "application/json")
    store.finish_run(run_id, verdict="fail")
    store.close()
    runner = CliRunner()
    for argv in (["report", run_id, "--html", "-"], ["report", run_id, "--json"], ["diff", run_id, run_id]):
        result = runner.invoke(app, [*argv, "--db", f"sqlite:///{path}"])
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            f"{argv}: {type(result.exception).__name__}: {result.exception}"
        )
        assert result.exit_code in (0, 1), (argv, result.output)
        if "--html" in argv:
            assert MARK not in result.stdout, argv


def test_sheet_subprocess_is_offline_and_escaped(tmp_path: Path) -> None:
    """One end-to-end check through the console script: the planted markup is escaped on the sheet."""
    from vllm_medic.store.api import open_store

    db = tmp_path / "h.db"
    store = open_store(f"sqlite:///{db}")
    run_id = store.start_run("accept", MARK, {"argv": [MARK]})
    store.record_step(run_id, StepRow("basic", "fail", data={"error": MARK}))
    store.finish_run(run_id, verdict="fail")
    store.close()
    out = run_medic(["report", run_id, "--db", f"sqlite:///{db}", "--html", "-"], medic_env(tmp_path))
    assert out.returncode == 1, out.describe()
    assert MARK not in out.stdout and "&lt;script&gt;" in out.stdout, out.describe()
    assert "<script" not in out.stdout.lower()
