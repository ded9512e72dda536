"""`history`, `report` and `diff` through the public CLI, on SYNTHETIC stored runs."""

from __future__ import annotations

import json
import subprocess
import sys
from html import unescape
from pathlib import Path
from xml.etree import ElementTree as ET

import report_sample
from typer.testing import CliRunner

from vllm_medic.cli import app
from vllm_medic.store.api import open_store
from vllm_medic.store.step_row import StepRow

runner = CliRunner()
MEDIC = [sys.executable, "-m", "vllm_medic.cli"]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    res = subprocess.run([*MEDIC, *args], capture_output=True, text=True, timeout=120, check=False)
    res.stderr = " ".join(res.stderr.split())  # the error console wraps long messages at 80 columns
    return res


def test_history_lists_newest_first(sample_db) -> None:
    res = runner.invoke(app, ["history", "--db", sample_db.url, "--json"])
    assert res.exit_code == 0, res.output
    runs = json.loads(res.stdout)["runs"]
    assert [r["run_id"] for r in runs] == [sample_db.failed, sample_db.passed]
    assert runs[0]["verdict"] == "fail" and runs[1]["verdict"] == "pass"
    assert [s["name"] for s in runs[0]["steps"]] == [
        "start",
        "basic",
        "prefix_reuse",
        "ramp",
        "soak",
        "archive",
    ]
    text = runner.invoke(app, ["history", "--db", sample_db.url, "--limit", "1"])
    assert text.exit_code == 0
    assert sample_db.failed in text.stdout and sample_db.passed not in text.stdout
    assert "basic✗" in text.stdout


def test_history_on_empty_or_missing_db(tmp_path: Path) -> None:
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    open_store(empty).close()
    res = runner.invoke(app, ["history", "--db", empty])
    assert res.exit_code == 0
    assert "No runs recorded yet" in res.stdout
    missing = tmp_path / "typo.db"
    res = runner.invoke(app, ["history", "--db", f"sqlite:///{missing}", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["runs"] == []
    rep = _cli("report", "latest", "--db", f"sqlite:///{missing}")
    assert rep.returncode == 2 and "no history database at" in rep.stderr
    assert not missing.exists()  # reading never creates a database at a mistyped path


def test_report_json_and_exit_codes(sample_db) -> None:
    ok = runner.invoke(app, ["report", sample_db.passed, "--db", sample_db.url, "--json"])
    assert ok.exit_code == 0, ok.output
    data = json.loads(ok.stdout)
    assert data["verdict"] == "pass" and data["exit_code"] == 0
    assert {s["name"]: s["status"] for s in data["steps"]}["ramp"] == "warn"
    assert report_sample.SECRET_KEY not in ok.stdout
    # a warn step fails the report only with --strict
    strict = runner.invoke(app, ["report", sample_db.passed, "--db", sample_db.url, "--json", "--strict"])
    assert strict.exit_code == 1
    bad = runner.invoke(app, ["report", sample_db.failed[:20], "--db", sample_db.url, "--json"])
    assert bad.exit_code == 1
    assert json.loads(bad.stdout)["run_id"] == sample_db.failed


def test_report_terminal_shows_findings_and_fix(sample_db) -> None:
    res = runner.invoke(app, ["report", "latest", "--db", sample_db.url])
    assert res.exit_code == 1
    assert "tool call rejected: server has no tool-call parser" in res.stdout
    assert "--tool-call-parser kimi_k2" in res.stdout


def test_report_junit(sample_db, tmp_path: Path) -> None:
    out = tmp_path / "junit.xml"
    res = runner.invoke(app, ["report", sample_db.failed, "--db", sample_db.url, "--junit", str(out)])
    assert res.exit_code == 1
    root = ET.parse(out).getroot()
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {
        f"acceptance.{n}" for n in ("start", "basic", "prefix_reuse", "ramp", "soak", "archive")
    }
    assert suites["acceptance.basic"].get("failures") == "1"
    failure = suites["acceptance.basic"].find("testcase/failure")
    assert failure is not None and "kimi_k2" in (failure.text or "")
    assert suites["acceptance.ramp"].get("failures") == "0"
    strict = tmp_path / "strict.xml"
    runner.invoke(
        app, ["report", sample_db.failed, "--db", sample_db.url, "--junit", str(strict), "--strict"]
    )
    assert ET.parse(strict).getroot().find("testsuite[@name='acceptance.ramp']").get("failures") == "1"


def test_report_html_is_offline_escaped_and_redacted(sample_db, sheet_path: Path) -> None:
    res = runner.invoke(app, ["report", sample_db.failed, "--db", sample_db.url, "--html", str(sheet_path)])
    assert res.exit_code == 1
    html = sheet_path.read_text()
    assert "Content-Security-Policy" in html and "default-src 'none'" in unescape(html)
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    for needle in ('src="http', "src='http", "@import", "url(http", "<link"):
        assert needle not in html
    assert report_sample.SECRET_KEY not in html and "hf_abcdefghijklmnop" not in html
    assert "--api-key &lt;redacted&gt;" in html
    # a flag that merely mentions tokens keeps its value; a secret after it is still masked
    assert "--max-num-batched-tokens 8192 --enable-prompt-tokens-details --api-key &lt;redacted&gt;" in html
    assert report_sample.PLAIN_SECRET not in html
    # driver, image and topology on the one sheet, next to the verdict and charts
    for fact in (
        "575.57.08",
        "sha256:" + "cd" * 32,
        "vllm/vllm-openai:v0.27.1",
        "NV18",
        "4 × NVIDIA H200",
        "0.27.1",
    ):
        assert fact in html
    # per level: KV peak, preemptions, queue, GPU memory peak, restarts (the broken level 16 row)
    assert (
        '<td class="num">95 %</td><td class="num">14</td><td class="num">8</td><td class="num">138,000 MiB</td>'
        in html
    )
    assert html.count("<svg") == 7  # TTFT, TPOT, ITL, E2E, throughput, KV over soak, E2E p99 over soak
    assert "KV-cache usage over the soak" in html and "Throughput vs concurrency" in html


def test_report_of_an_interrupted_run(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    store = open_store(url)
    rid = store.start_run("accept", "http://x:8000", {})
    store.record_step(rid, StepRow("start", "pass"))
    store.record_step(rid, StepRow("ramp", "running"))
    store.record_event(rid, "ramp_level", {"concurrency": 1, "ttft_ms": {"p50": 50, "p99": 90}})
    store.mark_interrupted(rid, "interrupted by Ctrl-C (SIGINT)")
    sheet = tmp_path / "s.html"
    junit = tmp_path / "j.xml"
    res = runner.invoke(app, ["report", rid, "--db", url, "--html", str(sheet), "--junit", str(junit)])
    assert res.exit_code == 1
    html = sheet.read_text()
    assert "incomplete" in html and "interrupted by Ctrl-C (SIGINT)" in html
    assert "TTFT percentiles vs concurrency" in html
    run_suite = ET.parse(junit).getroot().find("testsuite[@name='acceptance.run']")
    assert run_suite is not None and run_suite.get("failures") == "1"


def test_diff_names_environment_and_result_changes(sample_db) -> None:
    res = runner.invoke(app, ["diff", sample_db.passed, sample_db.failed, "--db", sample_db.url, "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    changed = {c["field"]: (c["a"], c["b"]) for c in d["environment"]["changed"]}
    assert changed["driver"] == ("580.65.06", "575.57.08")
    assert changed["image_digest"] == ("sha256:" + "ab" * 32, "sha256:" + "cd" * 32)
    assert changed["gpu_count"] == (8, 4)
    assert "topology" in changed
    assert "vllm" in d["environment"]["unchanged"]
    assert d["environment"]["launch_args"]["added"] == ["4", "--enable-expert-parallel"]
    assert {s["name"]: (s["a"], s["b"]) for s in d["steps"]}["basic"] == ("pass", "fail")
    lv8 = next(lv for lv in d["results"]["levels"] if lv["concurrency"] == 8)
    assert lv8["metrics"]["ttft_p99_ms"]["a"] == 600.0 and lv8["metrics"]["ttft_p99_ms"]["b"] == 900.0
    assert (
        lv8["metrics"]["ttft_p99_ms"]["change_pct"] == 50.0 and lv8["metrics"]["ttft_p99_ms"]["worse"] is True
    )
    assert lv8["metrics"]["output_tokens_per_s"]["worse"] is True
    assert d["results"]["prefix_hit_ratio"]["a"] == 0.82 and d["results"]["prefix_hit_ratio"]["b"] == 0.0
    assert d["results"]["max_sustainable_concurrency"] == {
        "a": 8.0,
        "b": 8.0,
        "change_pct": 0.0,
        "worse": False,
    }
    text = runner.invoke(app, ["diff", sample_db.passed, sample_db.failed, "--db", sample_db.url])
    assert text.exit_code == 0
    assert "driver" in text.stdout and "580.65.06 → 575.57.08" in text.stdout
    assert "--enable-expert-parallel" in text.stdout
    assert "c=8 [ok→ok]: " in text.stdout and "TTFT p99 ms 600→900 (+50%)" in text.stdout


def test_bad_input_is_a_clean_usage_error(sample_db, tmp_path: Path) -> None:
    unknown = _cli("report", "19990101", "--db", sample_db.url, "--json")
    assert unknown.returncode == 2 and "no run '19990101'" in unknown.stderr
    assert "Traceback" not in unknown.stderr + unknown.stdout
    bad_db = _cli("history", "--db", "postgresql+psycopg://medic:s3cretpw@127.0.0.1:9/none")
    assert bad_db.returncode == 2 and "cannot open the history database" in bad_db.stderr
    assert "s3cretpw" not in bad_db.stderr and "Traceback" not in bad_db.stderr
    no_dir = _cli(
        "report", sample_db.passed, "--db", sample_db.url, "--html", str(tmp_path / "missing" / "s.html")
    )
    assert no_dir.returncode == 2 and "does not exist" in no_dir.stderr
    into_dir = _cli("report", sample_db.passed, "--db", sample_db.url, "--junit", str(tmp_path))
    assert into_dir.returncode == 2 and "is a directory" in into_dir.stderr
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database at all" * 100)
    g = _cli("history", "--db", f"sqlite:///{garbage}")
    assert (
        g.returncode == 2 and "cannot open the history database" in g.stderr and "Traceback" not in g.stderr
    )
    diff_unknown = _cli("diff", sample_db.passed, "nope", "--db", sample_db.url)
    assert diff_unknown.returncode == 2 and "no run 'nope'" in diff_unknown.stderr
