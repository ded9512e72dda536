"""Report fixtures: a history DB holding SYNTHETIC runs (see report_sample.py), and the browser."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import browser_probe
import pytest
import report_sample

from vllm_medic.store.api import open_store


@dataclass
class SampleDb:
    url: str
    passed: str  # verdict pass, baseline
    failed: str  # verdict fail, newer driver/digest, slower, an extra launch arg, 4 GPUs


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> SampleDb:
    url = f"sqlite:///{tmp_path_factory.mktemp('history') / 'history.db'}"
    store = open_store(url)
    passed = report_sample.write_run(store, verdict="pass")
    failed = report_sample.write_run(
        store,
        verdict="fail",
        scale=1.5,
        driver="575.57.08",
        digest="sha256:" + "cd" * 32,
        gpus=4,
        extra_arg="--enable-expert-parallel",
        hit_ratio=0.0,
    )
    store.close()
    return SampleDb(url, passed, failed)


@pytest.fixture(scope="session")
def chromium() -> str:
    path = browser_probe.find_chromium()
    if path is None:
        pytest.skip(
            "HTML sheet browser tests skipped: Debian `chromium` not installed (scripts/setup-system-deps.sh installs it)"
        )
    return path


@pytest.fixture
def sheet_path(tmp_path: Path) -> Path:
    return tmp_path / "sheet.html"
