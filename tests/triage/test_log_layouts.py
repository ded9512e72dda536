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


# Traceback shapes of blind round 7 (real lines from the reports named; issue 10). Each is also held
# by a second report in test_learned_round7.py where one was found.
_CORE = "(EngineCore_DP0 pid=223840) ERROR 10-25 13:08:43 [core.py:708] "


def test_traceback_cut_before_its_exception_line_reports_its_raise_statement(tmp_path):
    # vllm-project/vllm#27508: the excerpt ends inside the raise statement (three lines of literals).
    text = "".join(
        _CORE + x + "\n"
        for x in [
            '  File "/opt/conda/envs/vllm_env/lib/python3.13/site-packages/vllm/v1/core/kv_cache_utils.py", '
            "line 1243, in get_kv_cache_configs",
            "    check_enough_kv_cache_memory(vllm_config, kv_cache_spec_one_worker,",
            "    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
            '  File "/opt/conda/envs/vllm_env/lib/python3.13/site-packages/vllm/v1/core/kv_cache_utils.py", '
            "line 699, in check_enough_kv_cache_memory",
            '    raise ValueError("No available memory for the cache blocks. "',
            '                     "Try increasing `gpu_memory_utilization` when "',
            '                     "initializing the engine.")',
        ]
    )
    root = _root(tmp_path, text)
    assert (root["line"], root["signature"], root["category"]) == (5, "no-kv-cache-memory", "oom_startup")
    assert root["phase"]["evidenced"] and "get_kv_cache_configs" in root["phase"]["evidence"][0]


def test_raise_statement_message_is_rebuilt_from_its_literals():
    from vllm_medic.triage.tracebacks import rebuilt_raise

    assert (
        rebuilt_raise(
            '    raise ValueError("No available memory for the cache blocks. "',
            ['"Try increasing `gpu_memory_utilization` when "', '"initializing the engine.")'],
        )
        == "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
        "when initializing the engine."
    )
    assert rebuilt_raise("    raise RendezvousConnectionError(") == "RendezvousConnectionError"
    assert rebuilt_raise("x = 1") is None


def test_cut_traceback_without_raise_is_reported_on_its_announcing_line(tmp_path):
    # LMCache/LMCache#1491: the request thread dies in redis frames; the exception line is cut off.
    p = "(EngineCore_0 pid=208542) "
    site = "/home/chenyunxing/test/gpustack/env/lib/python3.10/site-packages/redis"
    text = (
        "(APIServer pid=208377) INFO:     Application startup complete.\n"
        f"{p}Exception in thread Thread-4 (process_request):\n"
        f"{p}Traceback (most recent call last):\n"
        f'{p}  File "{site}/connection.py", line 389, in connect_check_health\n'
        f"{p}    sock = self.retry.call_with_retry(\n"
        f'{p}  File "{site}/retry.py", line 105, in call_with_retry\n'
        f"{p}    return do()\n"
    )
    root = _root(tmp_path, text)
    assert (root["line"], root["category"]) == (2, "prefix_cache"), root


def test_traceback_indented_as_a_whole_still_ends_on_its_exception_line(tmp_path):
    # Ascend/pytorch#99: every line of the paste is indented by one more space.
    text = (
        "Traceback (most recent call last):\n"
        '   File "/usr/local/python3/lib/python3.11/site-packages/torch/_ops.py", line 1392, in load_library\n'
        "     ctypes.CDLL(path)\n"
        '   File "/usr/local/python3/lib/python3.11/ctypes/__init__.py", line 376, in __init__\n'
        "     self._handle = _dlopen(self._name, mode)\n"
        "                    ^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        " OSError: /home/mtp/Ascend/nnal/atb/latest/atb/cxx_abi_1/lib/libtbe_adapter.so: undefined symbol: "
        "_ZN3Mki2DlC1ERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEEb\n"
        " \n"
        " The above exception was the direct cause of the following exception:\n"
    )
    root = _root(tmp_path, text)
    assert (root["line"], root["category"]) == (7, "image_dependency"), root


def test_frame_lines_cut_before_file_still_fold_onto_their_exception(tmp_path):
    # vllm-project/vllm#2699: the paste starts at `awq.py", line 85`; the raise statement is not the root.
    text = (
        'File "/home/ma/ENTER/envs/myenv/lib/python3.9/site-packages/vllm/model_executor/layers/'
        'quantization/awq.py", line 85, in create_weights\n'
        "    raise ValueError(\n"
        "ValueError: The input size is not aligned with the quantized weight shape. This can be caused by "
        "too large tensor parallel size.\n"
    )
    assert _root(tmp_path, text)["line"] == 3
    # odysseus-dev/odysseus#191: frame lines without `File "`, cut at an import-time raise.
    text = (
        'transformers/integrations/hub_kernels.py", line 89, in <module>\n'
        '    "cuda": LayerRepository(\n'
        'kernels/layer/layer.py", line 76, in __init__\n'
        '    raise ValueError("Either a revision or a version must be specified.")\n'
    )
    root = _root(tmp_path, text)
    assert (root["line"], root["category"], root["family"]) == (4, "image_dependency", "package-mismatch")


def test_cut_traceback_announced_by_a_named_component(tmp_path):
    # sgl-project/sglang#1087 (second report of the class): the excerpt stops inside the frames.
    text = (
        "Exception in ControllerSingle:\n"
        "Traceback (most recent call last):\n"
        '  File "/opt/tiger/sglang_src/python/sglang/srt/managers/controller_single.py", line 166, in '
        "start_controller_process\n"
        "    controller.loop_for_forward()\n"
        '  File "/opt/tiger/sglang_src/python/sglang/srt/managers/controller_single.py", line 103, in '
        "loop_for_forward\n"
        "    out_pyobjs = self.tp_server.exposed_step(recv_reqs)\n"
    )
    assert _root(tmp_path, text)["line"] == 1
