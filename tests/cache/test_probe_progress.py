"""`cache probe` on a terminal draws a live progress line (requests done/planned, hits so far, errors,
time left), quiet in a pipe and with --json; `--timeout` bounds each request and rejects nonsense."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator

import pytest
from cache_helpers import EXE, run

from pty_run import run_on_tty, tty_env
from vllm_medic.sim.config import SimConfig
from vllm_medic.sim.server import start_sim

PROGRESS = re.compile(r"cache probe: requests (\d+)/(\d+) done, hits (\d+), errors (\d+), [^\n\r]*left")


@pytest.fixture
def slow_sim() -> Iterator[str]:
    """TTFT 300 ms: the six requests take long enough for several redraws."""
    handle = start_sim(SimConfig(enable_prompt_tokens_details=True, ttft_ms=300.0))
    yield handle.url
    handle.stop()


def test_progress_line_is_drawn_on_a_terminal(slow_sim: str) -> None:
    code, text = run_on_tty([*EXE, "cache", "probe", slow_sim])
    assert code == 0, text[-3000:]
    drawn = [tuple(int(g) for g in m.groups()) for m in PROGRESS.finditer(text)]
    assert drawn, text[-3000:]
    assert {planned for _d, planned, _h, _e in drawn} == {6}
    assert any(done >= 2 and hits >= 1 for done, _p, hits, _e in drawn), drawn  # a repeat hit shows up live
    assert all(errors == 0 for *_x, errors in drawn)
    assert re.search(r"requests [1-5]/6 done, hits \d+, errors 0, ~\d+ s left", text), text[-3000:]
    assert "Prefix caching on" in text  # the result is still printed after the line is erased


def test_no_progress_in_a_pipe_or_with_json(slow_sim: str) -> None:
    proc = subprocess.run(
        [*EXE, "cache", "probe", slow_sim], capture_output=True, text=True, env=tty_env(), timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert not PROGRESS.search(proc.stdout + proc.stderr)
    code, text = run_on_tty([*EXE, "cache", "probe", slow_sim, "--json"])
    assert code == 0 and not PROGRESS.search(text), text[-2000:]
    assert text.lstrip().startswith("{")


@pytest.mark.parametrize("value", ["nan", "-1", "0", "0s", "inf", "soon"])
def test_timeout_rejects_what_is_not_a_positive_duration(value: str) -> None:
    code, _out, err = run("probe", "http://127.0.0.1:9", f"--timeout={value}")
    assert code == 2, err
    assert "--timeout" in err and "Traceback" not in err


def test_timeout_bounds_each_request() -> None:
    handle = start_sim(SimConfig(stall_rate=1.0, stall_after=1, stall_s=60.0))
    try:
        t0 = time.monotonic()
        code, out, err = run("probe", handle.url, "--timeout", "1s", "--json")
        wall = time.monotonic() - t0
    finally:
        handle.stop()
    assert code == 1, err
    assert out["verdict"] == "no answers"
    errors = [r["error"] for r in out["requests"] if r["error"]]
    assert errors and all("timeout" in e.lower() or "timed out" in e.lower() for e in errors), errors
    assert wall < 40, wall  # six 60 s stalls cut at 1 s each, not 300 s
