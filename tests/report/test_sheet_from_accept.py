"""End to end through the public CLIs: `sim` serves, `accept` records into the store, then `report` and
`diff` read the runs back — prefix caching on vs off — and the sheet is checked in Chromium."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import browser_probe
import pytest

pytestmark = pytest.mark.slow
MEDIC = [sys.executable, "-m", "vllm_medic.cli"]


@contextmanager
def running_sim(*args: str) -> Iterator[str]:
    """A `vllm-medic sim` subprocess on a free port; yields its URL once it says it listens."""
    proc = subprocess.Popen(
        [*MEDIC, "sim", "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()  # blocks until the server says where it listens (or dies)
        if "listening on" not in line:
            pytest.fail(f"sim did not start: {line}{proc.stdout.read()}")
        yield line.rsplit(" ", 1)[-1].strip()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def _accept(url: str, db: str) -> dict:
    res = subprocess.run(
        [*MEDIC, "accept", url, "--quick", "--soak", "2s", "--no-collect", "--db", db, "--json"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert res.returncode in (0, 1), res.stderr[-2000:]
    return json.loads(res.stdout)


def test_accept_run_renders_as_a_sheet(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    with running_sim() as url:
        out = _accept(url, db)
    sheet = tmp_path / "sheet.html"
    rep = subprocess.run(
        [*MEDIC, "report", out["run_id"], "--db", db, "--html", str(sheet), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    stored = json.loads(rep.stdout)
    assert stored["verdict"] == out["verdict"]
    assert rep.returncode == (0 if out["verdict"] == "pass" else 1)
    ramp = next(s for s in stored["steps"] if s["name"] == "ramp")
    levels = [lv["concurrency"] for lv in ramp["data"]["levels"]]
    assert levels, "accept recorded no ramp levels"
    html = sheet.read_text()
    assert "TTFT percentiles vs concurrency" in html and "Throughput vs concurrency" in html
    assert "KV-cache usage over the soak" in html
    for step in ("start", "basic", "prefix_reuse", "ramp", "soak", "archive"):
        assert f"id='step-{step}'" in html
    chromium = browser_probe.find_chromium()
    if chromium is None:
        pytest.skip("browser part skipped: Debian `chromium` not installed")
    page = browser_probe.load(chromium, sheet)
    assert page.page_requests == []
    assert "4. Concurrency ramp" in page.text and out["run_id"] in page.text


def test_diff_of_cache_on_and_off(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'h.db'}"
    runs = []
    for args in ((), ("--no-enable-prefix-caching",)):
        with running_sim(*args) as url:
            runs.append(_accept(url, db))
    res = subprocess.run(
        [*MEDIC, "diff", runs[0]["run_id"], runs[1]["run_id"], "--db", db, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    prefix = next(s for s in d["steps"] if s["name"] == "prefix_reuse")
    assert prefix["a"] == "pass" and prefix["b"] == "fail" and prefix["changed"]
    ratio = d["results"]["prefix_hit_ratio"]
    assert ratio["a"] is not None and ratio["a"] > 0.5
    assert ratio["b"] in (None, 0.0)
    text = subprocess.run(
        [*MEDIC, "diff", runs[0]["run_id"], runs[1]["run_id"], "--db", db],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "prefix_reuse: pass → fail (changed)" in text.stdout
