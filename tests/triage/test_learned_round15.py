"""Blind round 15, learned by class after its one blind score (round15.score.txt). NOT a blind figure.

Each class is driven through `vllm-medic triage --json`: on a report OTHER than the round's where one was
found (named per case, lines as posted), else on the round-15 log that taught it (said so per case).
Round 15's learned level is held by LEARNED_FLOOR in test_accuracy.py; the figures after learning are
tests/data/triage/blind/round15.after-learning.txt. Labels this round that rest on the thread rather than
the log, or contradict earlier rounds, were not learned (tests/data/triage/blind/README.md, "After scoring
(round 15)").
"""

from __future__ import annotations

import pytest
from triage_json import blind_case, root_cause
from triage_json import found_root as _root

from vllm_medic.triage.fields import is_structured_field

# NVIDIA/gpu-operator#1518: `kubectl describe pod` of the toolkit validator, its last state's message
# indented under `Last State:` (a structured-dump field, not code).
_GPU_OPERATOR_1518 = (
    "  toolkit-validation:\n"
    "    Image:         nvcr.io/nvidia/cloud-native/gpu-operator-validator:v24.9.1\n"
    "    State:          Waiting\n"
    "    Last State:     Terminated\n"
    "      Reason:       StartError\n"
    "      Message:      failed to create containerd task: failed to create shim task: OCI runtime create "
    "failed: runc create failed: unable to start container process\n"
)

# Project-HAMi/HAMi#39: the kubelet's device-plugin admission refusing a GPU pod (an Events row).
_HAMI_39 = (
    "  Warning  UnexpectedAdmissionError  73s               kubelet        Allocate failed due to rpc "
    "error: code = Unavailable desc = transport is closing, which is unexpected\n"
)

# meta-llama/llama3#215 is round 14's; ggml's CUDA init failing with another CUDA status (the round's line
# without its compose prefix is the same call; no second report with `unknown error` found).
_GGML_CUDA_UNKNOWN = "ggml_cuda_init: failed to initialize CUDA: unknown error\n"


def _case(case_id: str) -> dict:
    return blind_case("round15.jsonl", case_id)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("  message: Pod Allocate failed due to pod d65f09ad container", True),
        ("      Message:  No runtime found to support specified framework/version", True),
        ("      Reason:       StartError", True),
        ('    "error": "connection refused"', True),
        # Code and wrapped text stay code: a quoted source line, a traceback frame, a continuation.
        ("    assert tensor.shape[split_dim] % tp == 0", False),
        ('  File "/x/y.py", line 3, in f', False),
        ("    wait-gcs-ready unable to find GPU device allocation by scheduler", False),
        ("    self.tp_size: int = 2", False),
        # Not indented: not a dump field (the ordinary scan judges it anyway).
        ("message: hello", False),
    ],
)
def test_structured_field_keys(line, field):
    assert is_structured_field(line) is field


def test_an_indented_describe_field_is_judged_not_skipped(tmp_path):
    """The `Reason:` field of a pod's last state (`StartError`) is the failure, not quoted code; the
    `Message:` below it carries the runtime's words the category leans on."""
    rc = _root(tmp_path, _GPU_OPERATOR_1518)
    assert (rc["line"], rc["category"]) == (5, "driver_cuda"), rc


@pytest.mark.parametrize(
    ("log", "line", "category", "why"),
    [
        (_HAMI_39, 1, "driver_cuda", "UnexpectedAdmissionError"),
        (_GGML_CUDA_UNKNOWN, 1, "driver_cuda", "failed to initialize CUDA"),
    ],
    ids=["kubelet-device-admission", "ggml-cuda-init"],
)
def test_round15_family_words_on_other_reports(tmp_path, log, line, category, why):
    rc = _root(tmp_path, log)
    assert (rc["line"], rc["category"]) == (line, category), rc
    assert why in rc["why"], rc["why"]


@pytest.mark.parametrize(
    ("case_id", "category", "why"),
    [
        # Structured-dump fields: a pod status `message:` (with the kubelet's admission words) and a
        # KServe `Message:` under `Last Failure Info:` (a weak `No … found`; the lean picks the category,
        # the line is what is learned here).
        ("kuberay-1414", "driver_cuda", "Pod Allocate failed"),
        ("kserve-5035", None, "No runtime found"),
        # Weak cues with no failure word: the CUDA driver's core-dump banner, the Mooncake master
        # expiring a client (kvcache-ai/Mooncake#1753 reports the same `action=client_expired`).
        ("sglang-6590", "other", "gpu-coredump"),
        ("mooncake-904", "prefix_cache", "kv-client-expired"),
        # TensorRT-LLM's GPUs-available-vs-required check; the divisibility assert over `tp`.
        ("tensorrt-llm-2594", "parallel_layout", "are available, but"),
        ("lmdeploy-1430", "parallel_layout", "% tp == 0"),
        # ggml's CUDA init failure with CUDA's `unknown error`.
        ("llama-cpp-1866", "driver_cuda", "failed to initialize CUDA"),
    ],
)
def test_round15_classes_on_the_round_logs(tmp_path, case_id, category, why):
    case = _case(case_id)
    rc = _root(tmp_path, case["log"])
    assert rc["line"] == case["first_anomaly_line"], rc
    if category is not None:
        assert rc["category"] == category, rc
    assert why in rc["why"], rc["why"]


def test_xinference_request_call_picks_runtime(tmp_path):
    """Xinference's model actor running a request (`model.py:_call_wrapper`): the model is serving."""
    rc = _root(tmp_path, _case("xinference-912")["log"])
    assert rc["category"] == "oom_runtime", rc
    assert rc["phase"]["value"] == "runtime" and rc["phase"]["evidenced"] is False, rc["phase"]
    assert "_call_wrapper" in rc["phase"]["evidence"][0], rc["phase"]


@pytest.mark.parametrize(
    "log",
    [
        # A healthy Mooncake master's glog lines: mounts and metrics, no expiry.
        "I0419 14:42:04.932854 12703 scoped_vlog_timer.h:42] MountSegment request: buffer=140097034911744, "
        "size=3355443200, segment_name=localhost:13503\n"
        'I0419 14:42:04.934000 12703 scoped_vlog_timer.h:77] MountSegment response: {"error_code":0}, '
        "latency=1163us\n",
        # A healthy pod status dump: fields, but nothing failed.
        "status:\n  phase: Running\n  reason: Started\n  message: container is running\n",
    ],
    ids=["mooncake-master-healthy", "pod-status-healthy"],
)
def test_round15_cues_stay_quiet_on_healthy_lines(tmp_path, log):
    assert root_cause(tmp_path, log) is None
