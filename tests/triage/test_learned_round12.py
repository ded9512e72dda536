"""Blind round 12, learned by class after its one blind score (round12.score.txt). NOT a blind figure.

Each class is driven through `vllm-medic triage --json` on the round-12 log that taught it (no second
report was looked for in this pass; blind/README.md "After scoring (round 12)" says so), plus the
horovod report that holds the duplicate-GPU signature's example.
"""

from __future__ import annotations

import pytest
from triage_json import blind_case
from triage_json import found_root as _root


def _case(case_id: str) -> dict:
    return blind_case("round12.jsonl", case_id)


@pytest.mark.parametrize(
    ("case_id", "category", "why"),
    [
        # A refusal in the active voice: "does not support" (llama.cpp's K-shift assert), no other failure word.
        ("ollama-8614", "other", "failure word"),
        # A type check's "Expected a value of type X … but instead found type Y" in a compiled op.
        ("sglang-1522", "image_dependency", "leans to family `package-mismatch`"),
        # An error code printed as `err: 999` by the CUDA runtime's device call.
        ("ollama-6647", "driver_cuda", "leans to family `driver-runtime`"),
        # vLLM's KV budget that came out negative, on an INFO line.
        ("vllm-13882", "oom_startup", "leans to family `memory`"),
    ],
)
def test_round12_wordings_without_the_old_failure_words_are_reached(tmp_path, case_id, category, why):
    case = _case(case_id)
    rc = _root(tmp_path, case["log"])
    assert (rc["line"], rc["category"]) == (case["first_anomaly_line"], category), rc
    assert why in rc["why"], rc["why"]


def test_two_ranks_on_one_gpu_is_the_layout_not_the_fabric(tmp_path):
    case = _case("tensorrtllm-backend-170")
    rc = _root(tmp_path, case["log"])
    assert (rc["line"], rc["category"], rc["signature"]) == (1, "parallel_layout", "nccl-duplicate-gpu")
    horovod = (  # horovod/horovod#3929, the signature's example
        "smc-gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on "
        "CUDA device 1000\n"
    )
    assert _root(tmp_path, horovod)["signature"] == "nccl-duplicate-gpu"


def test_a_negative_size_that_is_not_memory_is_not_a_failure_word(tmp_path):
    """The negative-memory word needs a unit: a delta of `-64` tokens (LMCache's `need to load`) is not one."""
    rc = _root(
        tmp_path,
        "ERROR 01-01 00:00:00 [x.py:1] boom\nReqid: r1, Total tokens 836, LMCache hit tokens: 768, need to load: -64\n",
    )
    assert rc["line"] == 1
