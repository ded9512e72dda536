"""The classes learned from blind round 7 (issue 10), through the public CLI (`triage --json`).

Each class is held by a real log from a report OTHER than the round-7 one it was learned from (the
report is named per case; lines are as posted, an excerpt trimmed at most). Round 7's own score
before learning is tests/data/triage/blind/round7.score.txt.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vllm_medic.cli import app

runner = CliRunner()


def _root(tmp_path: Path, text: str) -> dict:
    log = tmp_path / "x.log"
    log.write_text(text, encoding="utf-8")
    r = runner.invoke(app, ["triage", str(log), "--json"])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)["root_cause"]


CASES = [
    # ggml-org/llama.cpp#14421 (title line): rocBLAS has no Tensile library for gfx1036.
    (
        "rocBLAS error: Cannot read /opt/rocm-6.4.1/lib/llvm/bin/../../../lib/rocblas/library/"
        "TensileLibrary.dat: No such file or directory for GPU arch : gfx1036\n",
        1,
        "image_dependency",
    ),
    # vllm-project/vllm-ascend#750 (title line): torch_npu op plugin built against another ATB.
    (
        "OSError: /home/ma-user/anaconda3/envs/MindSpore/lib/python3.9/site-packages/torch_npu/lib/"
        "libop_plugin_atb.so: undefined symbol: _ZN3atb15CreateOperationINS_5infer14GroupTopkParamEEEiRKT_PPNS\n",
        1,
        "image_dependency",
    ),
    # google-research/t5x#1004: the TPU runtime driver is not found.
    (
        "I0106 20:23:28.534243 140414174514240 xla_bridge.py:355] Unable to initialize backend 'tpu_driver': "
        "NOT_FOUND: Unable to find driver in registry given worker: \n",
        1,
        "driver_cuda",
    ),
]


@pytest.mark.parametrize("text,line,category", CASES, ids=[c[2] + str(i) for i, c in enumerate(CASES)])
def test_round7_class_on_another_report(tmp_path, text, line, category):
    rc = _root(tmp_path, text)
    assert rc is not None, "no root cause"
    assert (rc["line"], rc["category"]) == (line, category), rc
    assert rc["why"], rc
