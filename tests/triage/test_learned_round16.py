"""Blind round 16, learned by class after its one blind score (round16.score.txt). NOT a blind figure.

Each class is driven through `vllm-medic triage --json`: on a report OTHER than the round's where one was
found (named per case, lines as posted), else on the round-16 log that taught it (said so per case).
Round 16's learned level is held by LEARNED_FLOOR in test_accuracy.py; the figures after learning are
tests/data/triage/blind/round16.after-learning.txt. Labels this round that rest on the thread rather than
the log, or contradict earlier rounds, were not learned (tests/data/triage/blind/README.md, "After scoring
(round 16)").
"""

from __future__ import annotations

import pytest
from triage_json import blind_case, root_cause
from triage_json import found_root as _root

from vllm_medic.triage.normalize import normalize_line

# NVIDIA/nvidia-docker#1479: the NGC entrypoint banner of an image newer than the host driver.
_NVIDIA_DOCKER_1479 = (
    "ERROR: This container was built for NVIDIA Driver Release 450.51 or later, but\n"
    "       version 440.33.01 was detected and compatibility mode is UNAVAILABLE.\n"
    "\n"
    "       [[CUDA Driver UNAVAILABLE (cuInit(0) returned 804)]]\n"
)
# NVIDIA/nvidia-docker#1071: the same banner when no driver reached the container.
_NVIDIA_DOCKER_1071 = (
    "WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.\n"
    "   Use the NVIDIA Container Toolkit to start this container with GPU support; see\n"
)
# ollama/ollama#6044: Go's process state of a runner killed by SIGILL (AVX-512 on a CPU without it).
_OLLAMA_6044 = "llama runner process has terminated: signal: illegal instruction (core dumped)\n"
# google-research/deeplab2#66: XLA's cuDNN version check in TensorFlow's C++ log format.
_DEEPLAB2_66 = (
    "2021-10-13 17:19:29.385716: E tensorflow/stream_executor/cuda/cuda_dnn.cc:362] Loaded runtime CuDNN "
    "library: 8.0.4 but source was compiled with: 8.1.0.  CuDNN library needs to have matching major "
    "version and equal or higher minor version. If using a binary install, upgrade your CuDNN library.\n"
)
# xorbitsai/inference#2909: a worker that sees no GPU at all.
_XINFERENCE_2909 = (
    "ValueError: [address=0.0.0.0:10229, pid=136] Worker 0.0.0.0:10229 cannot use the GPUs with these "
    "indexes: [2]. Worker 0.0.0.0:10229 can only see these GPUs: [].\n"
)
# JCSDA/spack-stack#1681: Open MPI's UCC and HCOLL collective components refusing to start.
_SPACK_STACK_1681_UCC = (
    "[u01c13:831195] Error: coll_ucc_module.c:265 - mca_coll_ucc_init_ctx() UCC library doesn't support "
    "MPI_THREAD_MULTIPLE\n"
)
_SPACK_STACK_1681_HCOLL = (
    "[u01c13:831290] Error: coll_hcoll_module.c:310 - mca_coll_hcoll_comm_query() Hcol library init failed\n"
)
# isl-org/Open3D#4679: a CUDA call the GPU does not support (stream-ordered memory pools).
_OPEN3D_4679 = "CUDA runtime error: operation not supported\n"
# skypilot-org/skypilot#7001: a job's final status after its setup failed.
_SKYPILOT_7001 = "✓ Job finished (status: FAILED_SETUP).\n"
# rstrudel/segmenter#60: the old c10d NCCL wrapper whose cause says the same class (it stays the root).
_SEGMENTER_60 = (
    "RuntimeError: NCCL error in: /pytorch/torch/lib/c10d/ProcessGroupNCCL.cpp:825, unhandled system error, "
    "NCCL version 2.7.8\n"
    "ncclSystemError: System call (socket, malloc, munmap, etc) failed.\n"
)


def _case(case_id: str) -> dict:
    return blind_case("round16.jsonl", case_id)


@pytest.mark.parametrize(
    ("log", "line", "category", "why"),
    [
        (_NVIDIA_DOCKER_1479, 1, "driver_cuda", "driver-too-old"),
        (_NVIDIA_DOCKER_1071, 1, "driver_cuda", "cuda-no-device"),
        (_OLLAMA_6044, 1, "image_dependency", "illegal-instruction"),
        (_DEEPLAB2_66, 1, "image_dependency", "Loaded runtime CuDNN library"),
        (_XINFERENCE_2909, 1, "driver_cuda", "GPUs: []"),
        (_SPACK_STACK_1681_UCC, 1, "nccl_network", "coll_ucc_module.c"),
        (_SPACK_STACK_1681_HCOLL, 1, "nccl_network", "coll_hcoll_module.c"),
        (_OPEN3D_4679, 1, "driver_cuda", "operation not suppor"),
        (_SKYPILOT_7001, 1, "other", "failed-status"),
        (_SEGMENTER_60, 1, "nccl_network", "nccl-system-error"),
    ],
    ids=[
        "ngc-driver-too-old",
        "ngc-driver-not-detected",
        "go-sigill",
        "cudnn-runtime-older",
        "empty-gpu-list",
        "mpi-coll-ucc",
        "mpi-coll-hcoll",
        "cuda-not-supported",
        "job-status-failed",
        "old-nccl-wrapper-same-class",
    ],
)
def test_round16_classes_on_other_reports(tmp_path, log, line, category, why):
    rc = _root(tmp_path, log)
    assert (rc["line"], rc["category"]) == (line, category), rc
    assert why in rc["why"], rc["why"]


@pytest.mark.parametrize(
    ("raw", "level", "origin", "message"),
    [
        # TensorFlow/XLA's C++ log line (pytorch/xla#3470 is the round's; the status list's indentation
        # is not code) and its older form with a thread id (pytorch/xla#1965).
        (
            "2022-04-04 00:27:49.642380: E tensorflow/compiler/xla/xla_client/xla_util.cc:88]   (1) "
            "RESOURCE_EXHAUSTED: Attempting to reserve 6.48G",
            "ERROR",
            "tensorflow/compiler/xla/xla_client/xla_util.cc:88",
            "(1) RESOURCE_EXHAUSTED: Attempting to reserve 6.48G",
        ),
        (
            "2020-05-04 09:05:40.719343: E    1578 tensorflow/compiler/xla/xla_client/xla_util.cc:76] StackTrace:",
            "ERROR",
            "tensorflow/compiler/xla/xla_client/xla_util.cc:76",
            "StackTrace:",
        ),
        # SkyPilot's logger (skypilot-org/skypilot#4192 and #2189).
        (
            "E 10-26 12:22:10 provisioner.py:582] ⨯ Failed to set up SkyPilot runtime on cluster.",
            "ERROR",
            "provisioner.py:582",
            "⨯ Failed to set up SkyPilot runtime on cluster.",
        ),
        ("I 07-07 06:09:46 optimizer.py:608] == Optimizer ==", "INFO", "optimizer.py:608", "== Optimizer =="),
    ],
    ids=["tsl", "tsl-tid", "skypilot-error", "skypilot-info"],
)
def test_round16_log_prefixes(raw, level, origin, message):
    ev = normalize_line(raw)
    assert (ev.level, ev.origin, ev.message) == (level, origin, message)


@pytest.mark.parametrize(
    "log",
    [
        # ROCm/ROCR-Runtime#89 and ROCm/legacy-rocm-build#1374: the runtime's optional libraries; the
        # programs (rocminfo, clinfo, hashcat) run on.
        "LoadLib(libhsa-ext-finalize64.so.1) failed: libhsa-ext-finalize64.so.1: cannot open shared object "
        "file: No such file or directory\n",
        "LoadLib(libhsa-amd-aqlprofile64.so) failed: libhsa-amd-aqlprofile64.so: cannot open shared object "
        "file: No such file or directory\n",
        # triton-inference-server/core#324: Triton's shutdown countdown after a stop signal.
        "I0131 00:44:47.201645 760 server.cc:307] Waiting for in-flight requests to complete.\n"
        "I0131 00:44:47.201669 760 server.cc:323] Timeout 30: Found 0 model versions that have in-flight "
        "inferences\n",
        # skypilot-org/skypilot#8928: a job status that did not fail.
        "✓ Job finished (status: SUCCEEDED).\n",
    ],
    ids=["rocr-finalizer", "rocr-aqlprofile", "triton-shutdown-countdown", "job-status-succeeded"],
)
def test_round16_harmless_lines_stay_quiet(tmp_path, log):
    assert root_cause(tmp_path, log) is None


@pytest.mark.parametrize(
    ("case_id", "category", "why"),
    [
        # The ROCr optional-library line above the real failure (HIP's missing code object) is skipped.
        ("rocm-hip-2166", "image_dependency", "no-kernel-image"),
        # Triton's shutdown countdown of one process above another's CUDA `operation not supported`.
        ("tensorrtllm-backend-363", "driver_cuda", "CUDA runtime error in cudaDeviceGetDefau"),
        # The NGC banners beat the later pinned-memory consequences.
        ("triton-2245", "driver_cuda", "driver-too-old"),
        ("kserve-4512", "driver_cuda", "cuda-no-device"),
        # The old c10d NCCL wrapper gives way to the layout detail under `Last error:` (round-16 log:
        # no other report of this torch 2.0 format with a detail of another class was found).
        ("nccl-1241", "parallel_layout", "nccl-duplicate-gpu"),
        # TensorFlow-format E lines reached and scored (round-16 logs; deeplab2#66 above is the other).
        ("jax-16167", "image_dependency", "Loaded runtime CuDNN library"),
        ("pytorch-xla-3470", None, "RESOURCE_EXHAUSTED"),
        # SkyPilot's INFO command line no longer leans the provisioning error to the fabric.
        ("skypilot-7550", "other", "no signature or family matched"),
        ("skypilot-5583", "other", "failed-status"),
        # Go's lowercase SIGILL (the round's log; ollama#6044 above is the other report).
        ("ollama-1603", "image_dependency", "illegal-instruction"),
        # Words learned from the round-16 logs only (no second report of `tp should be` found).
        ("lmdeploy-2249", "parallel_layout", "tp should be"),
        ("tensorrt-llm-4668", "nccl_network", "coll_ucc_module.c"),
        ("xinference-1757", "driver_cuda", "GPUs: []"),
    ],
)
def test_round16_classes_on_the_round_logs(tmp_path, case_id, category, why):
    case = _case(case_id)
    rc = _root(tmp_path, case["log"])
    assert rc["line"] == case["first_anomaly_line"], rc
    if category is not None:
        assert rc["category"] == category, rc
    assert why in rc["why"], rc["why"]
