"""Blind round 17, learned by class after its one blind score (round17.score.txt). NOT a blind figure.

Each class is driven through `vllm-medic triage --json`: on a report OTHER than the round's where one was
found (named per case, lines as posted), else on the round-17 log that taught it (said so per case).
Round 17's learned level is held by LEARNED_FLOOR in test_accuracy.py; the figures after learning are
tests/data/triage/blind/round17.after-learning.txt. Labels this round that rest on the thread rather than
the log, or contradict earlier rounds, were not learned (the text for the blind README's "After scoring
(round 17)" section lists them).
"""

from __future__ import annotations

import pytest
from triage_json import blind_case, root_cause
from triage_json import found_root as _root

from vllm_medic.errors import UsageError
from vllm_medic.triage.catalogue import parse_signature
from vllm_medic.triage.computed import evaluate, load_checks, parse_side

# sgl-project/sglang#1693: newer PyTorch prints the teardown before the watchdog line that says what
# timed out (here another rank's, interleaved).
_SGLANG_1693 = (
    "[rank0]:[E1016 03:31:38.877036871 ProcessGroupNCCL.cpp:621] [Rank 0] Some NCCL operations have failed "
    "or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on "
    "corrupted/incomplete data.\n"
    "[rank0]:[E1016 03:31:38.877040580 ProcessGroupNCCL.cpp:627] [Rank 0] To avoid data inconsistency, we "
    "are taking the entire process down.\n"
    "[rank5]:[E1016 03:31:38.877368433 ProcessGroupNCCL.cpp:607] [Rank 5] Watchdog caught collective "
    "operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, "
    "Timeout(ms)=600000) ran for 600020 milliseconds before timing out.\n"
)
# NVIDIA/nccl#342 (tests/data/health/logs/nccl-shm-posix-fallocate-nccl-342.txt): NCCL's shm segment
# under a full /dev/shm; its errno is the disk's `No space left on device`.
_NCCL_342 = (
    "include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device\n"
    "include/shm.h:48 NCCL WARN Error while creating shared memory segment "
    "nccl-shm-recv-250a7cc850ba9298-0-1-3 (size 9637888)\n"
)
# 0xPolygon/zkevm-prover#468: gRPC's sync server that could not create a worker thread.
_ZKEVM_PROVER_468 = (
    "E0703 22:28:58.239805292 3779900 thread_manager.cc:38]       Could not create grpc_sync_server "
    "worker-thread\n"
)
# ai-dynamo/nixl#380: UCX's crash handler, the stack inside NIXL's UCX libraries.
_NIXL_380 = (
    "[beaker:594314:0:594797] Caught signal 11 (Segmentation fault: invalid permissions for mapped object at "
    "address 0x7a80e6008000)\n"
    "==== backtrace (tid: 594797) ====\n"
    " 0  /home/rshaw/vllm/my-venv/lib/python3.12/site-packages/.nixl.mesonpy.libs/plugins/../../nixl.libs/"
    "libucs-97f10f8d.so.0.0.0(ucs_handle_error+0x294) [0x7a84380adba4]\n"
    " 1  /home/rshaw/vllm/my-venv/lib/python3.12/site-packages/.nixl.mesonpy.libs/plugins/../../nixl.libs/"
    "libucs-97f10f8d.so.0.0.0(+0x38d65) [0x7a84380add65]\n"
)
# sgl-project/sglang#23489 (blind round 10's log, lines 11-15): TVM-FFI's segfault banner and its stack
# through UCX's transport layer.
_SGLANG_23489 = (
    "!!!!!!! Segfault encountered !!!!!!\n"
    '  File "<unknown>", line 0, in gsignal\n'
    '  File "<unknown>", line 0, in cuEventQuery\n'
    '  File "<unknown>", line 0, in uct_cuda_base_iface_event_fd_arm\n'
    '  File "<unknown>", line 0, in ucp_worker_arm\n'
)

# pytorch/pytorch#121899: a Jupyter cell's traceback (IPython's header names the exception; `---> 3` marks
# the cell's current line); the exception line at its end is the root.
_PYTORCH_121899 = (
    "RuntimeError                              Traceback (most recent call last)\n"
    "Cell In[9], line 3\n"
    "      1 size = 30000\n"
    "      2 a = torch.randn(size, size, device=device)\n"
    "----> 3 b = torch.randn(size, size, device=device)\n"
    "      5 # Perform matrix multiplication on GPU\n"
    "      6 start_time = torch.cuda.Event(enable_timing=True)\n"
    "\n"
    'RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at "/opt/builds/pytorch/c10/cuda/'
    'CUDACachingAllocator.cpp":830, please report a bug to PyTorch.\n'
)


def _case(case_id: str) -> dict:
    return blind_case("round17.jsonl", case_id)


@pytest.mark.parametrize(
    ("log", "line", "category", "signature"),
    [
        (_SGLANG_1693, 3, "nccl_network", "nccl-watchdog-timeout"),
        (_NCCL_342, 1, "nccl_network", "shm-too-small"),
        (_ZKEVM_PROVER_468, 1, "other", "thread-create-failed"),
        (_NIXL_380, 1, "nccl_network", "segfault"),
        (_SGLANG_23489, 1, "nccl_network", "segfault"),
    ],
    ids=[
        "nccl-teardown-first",
        "nccl-shm-fallocate",
        "grpc-thread",
        "ucx-segfault-stack",
        "tvm-ffi-segfault",
    ],
)
def test_round17_classes_on_other_reports(tmp_path, log, line, category, signature):
    rc = _root(tmp_path, log)
    assert (rc["line"], rc["category"], rc["signature"]) == (line, category, signature), rc


def test_an_ipython_traceback_is_reported_on_its_exception_line(tmp_path):
    rc = _root(tmp_path, _PYTORCH_121899)
    assert rc["line"] == 9, rc


def test_a_segfault_stack_that_names_the_fabric_says_so(tmp_path):
    rc = _root(tmp_path, _NIXL_380)
    assert "the stack printed below it leans to family `collective-fabric`" in rc["why"], rc["why"]


@pytest.mark.parametrize(
    ("log", "category", "signature"),
    [
        # A disk that is full is still a full disk (no NCCL, no shm).
        (
            "OSError: [Errno 28] No space left on device: '/root/.cache/huggingface/hub/tmpabc'\n",
            "other",
            "disk-full",
        ),
        # Any program's fallocate on a disk is not NCCL's /dev/shm (aria2, hanwckf/rt-n56u#144's words).
        (
            "posix_fallocate failed. cause: No space left on device\n",
            "other",
            "disk-full",
        ),
        # A crash whose printed stack names no family stays an unexplained crash (round 17's
        # tensorrt-llm-11294: Open MPI's group code; its TP-vs-ranks label rests on the PR).
        (
            '  !!!!!!! Segfault encountered !!!!!!!\n    File "../ompi/group/group.h", line 405, in '
            'ompi_group_get_proc_name\n    File "dpm/dpm.c", line 1268, in ompi_dpm_group_is_dyn\n',
            "other",
            "segfault",
        ),
    ],
    ids=["disk-full", "fallocate-on-disk", "segfault-stack-no-family"],
)
def test_round17_near_misses_keep_their_class(tmp_path, log, category, signature):
    rc = _root(tmp_path, log)
    assert (rc["line"], rc["category"], rc["signature"]) == (1, category, signature), rc


@pytest.mark.parametrize(
    ("case_id", "line", "category", "why"),
    [
        # The round's own logs (no second report of these wordings was found).
        ("openrlhf-1126", 3, "nccl_network", "nccl-watchdog-timeout"),
        ("nccl-525", 1, "nccl_network", "shm-too-small"),
        ("skypilot-2510", 6, "driver_cuda", "cuda.is_available(): False"),
        ("llama-cpp-23280", 2, "prefix_cache", "failed to remove sequence 0 with p0=1739"),
        ("dynamo-9312", 1, "image_dependency", "Failed to load CuPy for GPU acceleration"),
        ("ray-41432", 4, "other", "thread-create-failed"),
        ("sglang-6694", 2, "nccl_network", "the stack printed below it leans to family `collective-fabric`"),
        ("tensorrt-llm-11294", 1, "other", "segfault"),
        ("sglang-6455", 2, "parallel_layout", "8 items, 4 different"),
        ("aibrix-874", 4, "other", "pod-restarted"),
        # IPython's header and `---> 85 raise` current line are not the root; the category is round 9's
        # convention for a program that needs CUDA and did not get it (the label's image_dependency
        # rests on the thread's platform build).
        ("unsloth-3553", 23, "driver_cuda", "only works on NVIDIA GPUs"),
    ],
)
def test_round17_logs_that_taught_a_class(tmp_path, case_id, line, category, why):
    rc = _root(tmp_path, _case(case_id)["log"])
    assert (rc["line"], rc["category"]) == (line, category), rc
    assert why in rc["why"], rc["why"]


def test_an_error_on_a_request_id_picks_runtime(tmp_path):
    """vllm-omni-2128 (the round's log): the NPU OOM of a stage and, next to it, the orchestrator's `Stage 0
    error on request video_gen_…`: a request was being served. Picked, not evidenced."""
    rc = _root(tmp_path, _case("vllm-omni-2128")["log"])
    assert (rc["line"], rc["category"]) == (1, "oom_runtime"), rc
    assert rc["phase"]["value"] == "runtime" and rc["phase"]["evidenced"] is False, rc["phase"]
    assert "on request video_gen_" in rc["phase"]["evidence"][0]


@pytest.mark.parametrize(
    "log",
    [
        # A check that CUDA is there, and one whose answer is on the next line (no value on the line).
        "torch.cuda.is_available(): True\ntorch.cuda.device_count(): 8\n",
        ">>> print(torch.cuda.is_available())\n",
        # Another program's sequence (phpPgAdmin's message) is not llama.cpp's KV memory.
        "Failed to remove sequence from replication set.\n",
        # A request id in a healthy access line, and a CuPy that did load.
        "INFO 03-23 04:09:00 [async_omni.py:310] Received request video_gen_955d6ab1abf64d14b897986aa449f518\n",
        "dynamo.nixl_connect: Utilizing CuPy to enable GPU acceleration.\n",
        # A pod table whose containers never restarted.
        "NAME                       READY   STATUS    RESTARTS   AGE\n"
        "vllm-7f9b789b85-bkgth      1/1     Running   0          6m2s\n",
    ],
    ids=[
        "cuda-present",
        "check-without-value",
        "other-sequence",
        "request-received",
        "cupy-loaded",
        "pods-fine",
    ],
)
def test_round17_words_do_not_fire_on_healthy_lines(tmp_path, log):
    rc = root_cause(tmp_path, log)
    # The replication-set line carries a failure word (a novel line, `other`); none is one of these classes.
    assert rc is None or (rc["signature"], rc["category"]) == ("novel-line", "other"), rc


def test_distinct_counts_the_different_items_of_a_list():
    (term,) = parse_side("distinct(visible)")
    assert term.distinct == "visible"
    check = next(c for c in load_checks() if c.id == "visible-devices-repeated")
    assert evaluate(check, "CUDA_VISIBLE_DEVICES='0,1,2,3,0,1,2,3'") is not None
    assert evaluate(check, "CUDA_VISIBLE_DEVICES='4,5,6,7'") is None
    assert evaluate(check, "export CUDA_VISIBLE_DEVICES=0,1,1") is not None


def test_stack_leans_must_be_a_boolean():
    entry = {"id": "x", "category": "other", "title": "x", "patterns": ["boom"], "stack_leans": "yes"}
    with pytest.raises(UsageError, match="stack_leans"):
        parse_signature(entry, "t.yaml", 0)
