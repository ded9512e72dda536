"""Blind round 20, learned by class after its one blind score (round20.score.txt). NOT a blind figure.

Each class is driven through `vllm-medic triage --json`: on a report OTHER than the round's where one was
found (named per case, lines as posted), else on the round-20 log that taught it (said so per case).
Round 20's learned level is held by LEARNED_FLOOR in test_accuracy.py; the figures after learning are
tests/data/triage/blind/round20.after-learning.txt. Labels this round that rest on the thread rather than
the log, or contradict earlier rounds, were not learned (tests/data/triage/blind/README.md, "After scoring
(round 20)").
"""

from __future__ import annotations

import pytest
from triage_json import blind_case, root_cause
from triage_json import found_root as _root

# sgl-project/sglang#15453: torch_npu's caching allocator on a 910B3 (PyTorch's template, the device renamed).
_SGLANG_15453 = (
    "RuntimeError: NPU out of memory. Tried to allocate 226.00 MiB (NPU 2; 60.96 GiB total capacity; 58.13 GiB "
    "already allocated; 58.13 GiB current active; 97.16 MiB free; 58.42 GiB reserved in total by PyTorch) If "
    "reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.\n"
)
# ggml-org/llama.cpp#20431: ggml's CUDA buffer type failing its cudaMalloc while the weights load.
_LLAMACPP_20431 = (
    "print_info: EOG token             = 248065 '<|file_sep|>'\n"
    "print_info: max token length      = 256\n"
    "load_tensors: loading model tensors, this can take a while... (mmap = true, direct_io = false)\n"
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 144817.04 MiB on device 0: cudaMalloc failed: "
    "out of memory\n"
    "alloc_tensor_range: failed to allocate CUDA0 buffer of size 151851674624\n"
    "llama_model_load: error loading model: unable to allocate CUDA0 buffer\n"
)
# moby/moby#37713: runc's wording of a command the image does not have.
_MOBY_37713 = (
    "docker: Error response from daemon: OCI runtime create failed: container_linux.go:348: starting container "
    'process caused "exec: \\"/registry\\": executable file not found in $PATH": unknown.\n'
)
# abetlen/llama-cpp-python#1692: a wheel built without a GPU backend, asked to split over two 3090s.
_LLAMA_CPP_PYTHON_1692 = "ValueError: Attempt to split tensors that exceed maximum supported devices. Current LLAMA_MAX_DEVICES=1\n"
# NVIDIA/apex#482: Open MPI's mapper under `srun ... horovodrun -np 8 -H localhost:8` with one task.
_APEX_482 = (
    "-------------------------------------------------------------------------- \n"
    "There are not enough slots available in the system to satisfy the 8 slots\n"
    "that were requested by the application:\n"
    "  python\n"
    "\n"
    "Either request fewer slots for your application, or make more slots available\n"
    "for use.\n"
    "--------------------------------------------------------------------------\n"
)
# NVIDIA/TensorRT-LLM#1864: the older wording of the attention plugin's FP8 FMHA check (as its title quotes it).
_TRTLLM_1864 = "[TensorRT-LLM][ERROR] Assertion failed: FP8 FMHA cannot be enabled on Pre-Hopper Arch.\n"

# vllm-project/vllm#19853: an NVFP4 checkpoint on a vLLM whose compressed-tensors layer has no scheme for it.
_VLLM_19853 = (
    'ERROR 06-19 09:53:50 [core.py:515]   File "/home/ubuntu/git/polywhirl/.venv_temp/lib/python3.11/site-packages/'
    'vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py", line 414, in '
    "_get_scheme_from_parts\n"
    "ERROR 06-19 09:53:50 [core.py:515]     raise NotImplementedError(\n"
    "ERROR 06-19 09:53:50 [core.py:515] NotImplementedError: No compressed-tensors compatible scheme was found.\n"
)


def _case(case_id: str) -> dict:
    return blind_case("round20.jsonl", case_id)


@pytest.mark.parametrize(
    ("log", "line", "category", "why"),
    [
        (_SGLANG_15453, 1, "oom_startup", "cuda-oom"),
        (_LLAMACPP_20431, 4, "oom_startup", "cuda-oom"),
        (_MOBY_37713, 1, "image_dependency", "container-executable-not-found"),
        (_LLAMA_CPP_PYTHON_1692, 1, "image_dependency", "llama-cpp-cpu-only-build"),
        (_APEX_482, 2, "parallel_layout", "not enough slots available in the system"),
        (_TRTLLM_1864, 1, "image_dependency", "cannot be enabled"),
        (_VLLM_19853, 3, "image_dependency", "No compressed-tensors compatible scheme"),
    ],
    ids=[
        "torch-npu-oom",
        "ggml-cudamalloc-oom",
        "runc-executable-not-found",
        "llama-cpp-cpu-only-build",
        "open-mpi-not-enough-slots",
        "trtllm-fp8-fmha-arch",
        "compressed-tensors-no-scheme",
    ],
)
def test_round20_classes_on_other_reports(tmp_path, log, line, category, why):
    rc = _root(tmp_path, log)
    assert (rc["line"], rc["category"]) == (line, category), rc
    assert why in rc["why"], rc["why"]


def test_round20_llama_max_devices_of_a_gpu_build_is_not_the_class(tmp_path):
    # The same check with a GPU build's limit (16) is a tensor split longer than the devices: not a CPU build.
    text = "ValueError: Attempt to split tensors that exceed maximum supported devices. Current LLAMA_MAX_DEVICES=16\n"
    rc = root_cause(tmp_path, text)
    assert rc is None or "llama-cpp-cpu-only-build" not in rc["why"], rc


@pytest.mark.parametrize(
    ("case_id", "category", "why"),
    [
        # The round's own logs for the classes above.
        ("vllm-ascend-1127", "oom_startup", "cuda-oom"),
        ("ollama-8447", "oom_startup", "cuda-oom"),
        ("production-stack-869", "image_dependency", "container-executable-not-found"),
        ("llama-cpp-python-1166", "image_dependency", "llama-cpp-cpu-only-build"),
        ("horovod-978", "parallel_layout", "not enough slots available in the system"),
        ("trtllm-2855", "image_dependency", "cannot be enabled"),
        ("llm-compressor-1427", "image_dependency", "No compressed-tensors compatible scheme"),
        # Learned from the round-20 logs only (no second report with the posted line was found): CANN's HCCL
        # task timeout (device_error_proc.cc), Mooncake's `Sync batch data transfer timeout` (an INFO line of
        # transfer_engine_py.cpp, above the connector's ERROR), Ascend's SoC-mismatched kernel package,
        # vLLM's kv_offload `hash_block_size` check and a block hash missing from its cache, mistral.rs'
        # prefix cacher panicking in its own file, dash's `sh: 1: X: not found`, torch_npu's bare error code
        # above CANN's message.
        ("vllm-ascend-16646", "nccl_network", "ascend-hccl-error"),
        ("vllm-ascend-7846", "nccl_network", "Sync batch data transfer timeout"),
        ("vllm-ascend-2725", "image_dependency", "socversion"),
        ("vllm-43093", "prefix_cache", "hash_block_size"),
        ("vllm-54914", "prefix_cache", "decided by 'Block b"),
        ("mistralrs-121", "prefix_cache", "prefix_cache"),
        ("kthena-487", "other", ""),
        ("vllm-ascend-11052", "driver_cuda", ""),
    ],
)
def test_round20_classes_on_the_round_logs(tmp_path, case_id, category, why):
    case = _case(case_id)
    rc = _root(tmp_path, case["log"])
    assert (rc["line"], rc["category"]) == (case["first_anomaly_line"], category), rc
    assert why in rc["why"], rc["why"]


def test_round20_mooncake_store_path_is_not_the_fabric(tmp_path):
    # The round-20 log (vllm-54870; its prefix_cache label rests on the reporter's analysis): the store
    # connector's package path on the line under the assertion (`mooncake/store/scheduler.py`) keeps the
    # transfer-engine reading of `mooncake` from calling it fabric; too weak as a neighbour to name the cache.
    rc = _root(tmp_path, _case("vllm-54870")["log"])
    assert rc["line"] == 1 and rc["category"] != "nccl_network", rc


def test_round20_envoy_initial_fetch_timeout_is_a_consequence(tmp_path):
    # The round-20 log (aibrix-881): the xDS stream's own failure record is the root, the `initial fetch timed
    # out` warnings above it are its consequence; alone, the warning is still reported (at low confidence).
    case = _case("aibrix-881")
    rc = _root(tmp_path, case["log"])
    assert (rc["line"], rc["category"]) == (case["first_anomaly_line"], "other"), rc
    alone = case["log"].splitlines()[1] + "\n"
    rc = _root(tmp_path, alone)
    assert (rc["signature"], rc["line"]) == ("envoy-initial-fetch-timeout", 1), rc


def test_round20_rust_panic_header_gives_way_to_its_message(tmp_path):
    # Blind round 6's mistralrs-44 (held by round 6's floor as well): the header borrows the OOM's class from
    # the message under it, and gives way to that message; mistral.rs' round-20 panic whose message does
    # not classify stays on its header (mistralrs-1376), which is now a root at all.
    case = blind_case("round6.jsonl", "mistralrs-44")
    rc = _root(tmp_path, case["log"])
    assert (rc["line"], rc["category"]) == (4, "oom_runtime"), rc
    rc = _root(tmp_path, _case("mistralrs-1376")["log"])
    assert rc["line"] == 1, rc


@pytest.mark.parametrize(
    ("case_id", "value", "evidenced", "why"),
    [
        # Training-loop frames (Megatron's train_step), the exception's own traceback two lines under it
        # (ZeRO's optimizer step, wandb's lines between), the loop's start lines just above the root
        # (Megatron's `training ...`, the Trainer banner as Unsloth prints it), and start-up frames of a
        # training framework (DeepSpeed's ZeRO constructing Adam's states with one `optimizer.step()`).
        ("megatron-lm-60", "runtime", False, "train_step"),
        ("colossalai-3509", "runtime", False, "step"),
        ("megatron-bridge-771", "runtime", True, "Training ..."),
        ("unsloth-465", "runtime", True, "Number of trainable parameters"),
        ("deepspeed-237", "startup", True, "_configure_zero_optimizer"),
    ],
)
def test_round20_training_phase(tmp_path, case_id, value, evidenced, why):
    case = _case(case_id)
    rc = _root(tmp_path, case["log"])
    assert rc["line"] == case["first_anomaly_line"], rc
    phase = rc["phase"]
    assert (phase["value"], phase["evidenced"]) == (value, evidenced), phase
    assert any(why in e for e in phase["evidence"]), phase
    assert rc["category"] == case["category"], rc
