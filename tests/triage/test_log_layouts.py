"""Log layouts that hid the root cause from earlier versions (found by the blind rounds 3-5, see
tests/data/triage/SOURCES.md). Synthetic lines in the real layouts, driven through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from vllm_medic.cli import app
from vllm_medic.triage.normalize import normalize_line

runner = CliRunner()


def _root(tmp_path: Path, text: str) -> dict:
    log = tmp_path / "rank0.log"
    log.write_text(text, encoding="utf-8")
    res = runner.invoke(app, ["triage", str(log), "--json"])
    assert res.exit_code == 1, res.output
    return json.loads(res.output)["root_cause"]


def test_torch_glog_lines_with_an_unpadded_month_get_level_and_time():
    ev = normalize_line("[rank6]:[E429 13:55:49.384372190 ProcessGroupNCCL.cpp:1743] [Rank 6] boom")
    assert (ev.level, ev.rank, ev.timestamp.month, ev.timestamp.day) == ("ERROR", 6, 4, 29)
    padded = normalize_line("[W1130 02:36:44.515165417 utils.cpp:68] msg")
    assert (padded.level, padded.timestamp.month, padded.timestamp.day) == ("WARNING", 11, 30)


def test_earlier_timestamp_wins_over_file_order_for_torch_glog_lines(tmp_path):
    # synthetic, in the layout of snowflakedb/ArcticTraining#219: the stuck-watchdog line is printed
    # first but happened 8 minutes after the collective timed out on another rank
    root = _root(
        tmp_path,
        "[rank7]:[E626 05:14:36.393067540 ProcessGroupNCCL.cpp:1743] [Rank 7] ProcessGroupNCCL's "
        "watchdog got stuck for 480 seconds without making progress\n"
        "[rank2]:[E626 05:06:30.929096625 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 1800065 milliseconds\n",
    )
    assert (root["line"], root["signature"], root["category"]) == (2, "nccl-watchdog-timeout", "nccl_network")


def test_one_line_worker_exception_with_trailing_traceback_header(tmp_path):
    root = _root(
        tmp_path,
        "(VllmWorkerProcess pid=7) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226] Exception in worker "
        "VllmWorkerProcess while processing method init_device: NCCL error: unhandled system error, "
        "Traceback (most recent call last):\n"
        '(VllmWorkerProcess pid=7) ERROR 08-23 08:25:25 multiproc_worker_utils.py:226]   File "w.py", '
        "line 1, in f\n",
    )
    assert (root["line"], root["category"]) == (1, "nccl_network")


def test_quoted_raise_statement_is_not_the_exception(tmp_path):
    root = _root(
        tmp_path,
        "    raise BackendCompilerFailed(self.compiler_fn, e) from e\n"
        "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
        "ImportError: cannot import name 'triton_key' from 'triton.compiler.compiler'\n",
    )
    assert (root["line"], root["signature"], root["category"]) == (
        2,
        "torch-compile-failed",
        "image_dependency",
    )


def test_bare_exception_line_is_an_anomaly(tmp_path):
    # a line no signature knows is offered as a low-confidence `other` root
    root = _root(tmp_path, "  x = load()\nException: something no signature knows about\n")
    assert (root["line"], root["category"]) == (2, "other") and root["confidence"] <= 0.3
