"""The HTML sheet in real headless Chromium: it renders, makes no network request, and a hostile log line
stays text. Every request the browser makes goes through a local recording proxy (browser_probe.py)."""

from __future__ import annotations

from pathlib import Path

import browser_probe
import pytest
import report_sample
from typer.testing import CliRunner

from vllm_medic.cli import app

pytestmark = pytest.mark.browser
runner = CliRunner()


def test_probe_detects_a_page_that_fetches(chromium: str, tmp_path: Path) -> None:
    """Positive control: the same probe sees an image and a stylesheet a page asks for."""
    page = tmp_path / "fetching.html"
    page.write_text(
        '<!DOCTYPE html><html><body><img src="http://cdn.example.invalid/pixel.png">'
        '<link rel="stylesheet" href="https://fonts.example.invalid/a.css"><p>hi</p></body></html>'
    )
    result = browser_probe.load(chromium, page)
    hosts = {browser_probe.request_host(r) for r in result.page_requests}
    assert {"cdn.example.invalid", "fonts.example.invalid"} <= hosts, result.requests


def test_sheet_renders_offline_and_keeps_script_as_text(chromium: str, sample_db, sheet_path: Path) -> None:
    res = runner.invoke(app, ["report", sample_db.failed, "--db", sample_db.url, "--html", str(sheet_path)])
    assert res.exit_code == 1
    html = sheet_path.read_text()
    for host in browser_probe.BROWSER_SERVICE_HOSTS:
        assert host not in html  # so filtering the browser's own services cannot hide a page request

    result = browser_probe.load(chromium, sheet_path)

    assert result.page_requests == [], f"the sheet made network requests: {result.page_requests}"
    # rendered: the verdict, every step, the environment and the charts are in the live DOM
    assert "Verdict:" in result.text and "FAIL" in result.text.upper()
    for title in (
        "1. Service start",
        "2. Basic requests",
        "3. Long-prefix reuse",
        "4. Concurrency ramp",
        "5. Soak",
        "6. Archive",
    ):
        assert title in result.text
    assert "575.57.08" in result.text and "NV18" in result.text
    assert result.tags.count("svg") == 7 and "polyline" in result.tags
    # the hostile log line is text in the document, and no script element exists
    assert report_sample.XSS_LINE in result.text
    assert "script" not in result.tags
    assert report_sample.SECRET_KEY not in result.dom


def test_accept_sheet_shows_the_environment_verdict(chromium: str, tmp_path: Path) -> None:
    """accept over a bundle that is not the measured server's: the sheet's Environment verdict section says
    so (rendered DOM and a screenshot, kept at tmp_path/sheet.png)."""
    from vllm_medic.sim.config import SimConfig
    from vllm_medic.sim.server import start_sim

    bundle = Path(__file__).parents[1] / "data" / "checks" / "bundles" / "b200-r575-k3"
    sheet = tmp_path / "sheet.html"
    handle = start_sim(SimConfig())
    try:
        res = runner.invoke(
            app,
            ["accept", handle.url, "--steps", "archive", "--bundle", str(bundle), "--html", str(sheet),
             "--db", f"sqlite:///{tmp_path / 'h.db'}"],
        )  # fmt: skip
    finally:
        handle.stop()
    assert res.exit_code == 1, res.stdout
    result = browser_probe.load(chromium, sheet)
    assert result.page_requests == []
    text = result.text
    assert "Environment verdict" in text
    start = text.index("Environment verdict")
    section = text[start : text.index("Environment", start + len("Environment verdict"))]
    assert "FAIL" in section.upper() and "ACC-ENV-012" in section and "sim-model" in section
    assert "NET004" in section  # the node's own preflight fail is on the sheet too
    png = browser_probe.screenshot(chromium, sheet, tmp_path / "sheet.png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
