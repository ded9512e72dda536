"""Blind round 18, learned by class after its one blind score (round18.score.txt). NOT a blind figure.

Each class is driven through `vllm-medic triage --json`: on a report OTHER than the round's where one was
found (named per case, lines as posted), else on the round-18 log that taught it (said so per case).
Round 18's learned level is held by LEARNED_FLOOR in test_accuracy.py; the figures after learning are
tests/data/triage/blind/round18.after-learning.txt. Labels this round that rest on the thread rather than
the log, or contradict earlier rounds, were not learned (tests/data/triage/blind/README.md, "After scoring
(round 18)").
"""

from __future__ import annotations

import pytest
from triage_json import blind_case, root_cause
from triage_json import found_root as _root

from vllm_medic.triage.computed import evaluate, parse_checks, parse_side

# arrayfire/arrayfire#2527: the driver refusing a kernel image (CUDA error 200).
_ARRAYFIRE_2527 = (
    "ERROR: ArrayFire Error (998) : Internal error\n"
    "In file src/backend/cuda/nvrtc/cache.cpp:191\n"
    "CU Error CUDA_ERROR_INVALID_IMAGE(200): device kernel image is invalid\n"
)
# infiniflow/ragflow#12090: TEI's kernels built for another compute capability (an RTX 2060, cc 7.5).
_RAGFLOW_12090 = (
    "Could not start backend: Runtime compute cap 75 is not compatible with compile time compute cap 80\n"
)
# coqui-ai/STT#1936: the NGC image's banner for a GPU generation it was no longer built for (a K80).
_COQUI_STT_1936 = (
    "ERROR: Detected NVIDIA Tesla K80 GPU, which is not supported by this container\n"
    "ERROR: No supported GPU(s) detected to run this container\n"
    "\n"
    "NOTE: Legacy NVIDIA Driver detected.  Compatibility mode ENABLED.\n"
)
# wang-xinyu/tensorrtx#2: a build that cannot find the CUDA toolkit's header.
_TENSORRTX_2 = (
    "project/resnet/resnext50_32x4d.cpp:2:10: fatal error: cuda_runtime_api.h: No such file or directory\n"
    ' #include "cuda_runtime_api.h"\n'
    "          ^~~~~~~~~~~~~~~~~~~~\n"
    "compilation terminated.\n"
)
# chelsea0x3b/cudarc#274: cudarc that cannot load a CUDA library the image does not ship under that name.
_CUDARC_274 = (
    'Unable to dynamically load the "cublas" shared library - searched for library names: ["cublas", '
    '"cublas64", "cublas64_12", "cublas64_125", "cublas64_125_0", "cublas64_120_5", "cublas64_10", '
    '"cublas64_120_0", "cublas64_9"]. Ensure that `LD_LIBRARY_PATH` has the correct path to the installed '
    "library. If the shared library is present on the system under a different name than one of those listed "
    "above, please open a GitHub issue.\n"
)
# EricLBuehler/mistral.rs#1529: the same loader missing the driver's libcuda in a container.
_MISTRALRS_1529 = (
    'Unable to dynamically load the "cuda" shared library - searched for library names: ["libcuda.so", '
    '"libcuda64.so", "libcuda64_12.so", "libcuda.so.12", "libcuda.so.11", "libcuda.so.10", "libcuda.so.1", '
    '"libnvcuda.so", "libnvcuda.so.1"]. Ensure that `LD_LIBRARY_PATH` has the correct path to the installed '
    "library.\n"
    "stack backtrace:\n"
)
# Project-HAMi/HAMi-core#94: HAMi-core's allocation hook refused with CUDA_ERROR_OUT_OF_MEMORY (2).
_HAMI_CORE_94 = (
    "[HAMI-core ERROR (pid:208 thread=139663880746752 allocator.c:121)]: cuMemoryAllocate failed res=2\n"
)
# skypilot-org/skypilot#8128: SkyServe's load balancer with no replica to route to (the gateway class).
_SKYPILOT_8128 = (
    '{"detail":"No ready replicas. Use \\"sky serve status [SERVICE_NAME]\\" to check the replica status."}\n'
)
# vllm-project/vllm#20682 and #37403: a weight loader that did not shard a parameter at TP 2.
_VLLM_20682 = (
    "RuntimeError: The size of tensor a (1280) must match the size of tensor b (2560) at non-singleton "
    "dimension 1\n"
)
_VLLM_37403 = (
    "RuntimeError: The size of tensor a (3072) must match the size of tensor b (1536) at non-singleton "
    "dimension 1\n"
)
# AUTOMATIC1111/stable-diffusion-webui#12221: the same broadcast check between sizes that are not
# multiples (an SD 1.5 LoRA on SDXL): not a parallel split.
_SDWEBUI_12221 = (
    "RuntimeError: The size of tensor a (768) must match the size of tensor b (2048) at non-singleton "
    "dimension 1\n"
)
# meta-llama/llama-cookbook#320 ("Training running out of memory on 1st backward pass of 2nd epoch"): an
# OOM raised inside autograd's backward pass.
_LLAMA_COOKBOOK_320 = (
    '  File "/home/sagemaker-user/finetuning-llama2/vendor/llama-recipes/src/llama_recipes/utils/train_utils.py",'
    " line 104, in train\n"
    "    loss.backward()\n"
    '  File "/opt/conda/lib/python3.10/site-packages/torch/_tensor.py", line 492, in backward\n'
    "    torch.autograd.backward(\n"
    '  File "/opt/conda/lib/python3.10/site-packages/torch/autograd/__init__.py", line 251, in backward\n'
    "    Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass\n"
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 10.08 GiB. GPU 0 has a total capacty "
    "of 22.20 GiB of which 687.12 MiB is free. Process 40666 has 21.53 GiB memory in use.\n"
)


def _case(case_id: str) -> dict:
    return blind_case("round18.jsonl", case_id)


@pytest.mark.parametrize(
    ("log", "line", "category", "why"),
    [
        (_ARRAYFIRE_2527, 3, "image_dependency", "CUDA_ERROR_INVALID_IMAGE"),
        (_RAGFLOW_12090, 1, "image_dependency", "Runtime compute cap 75 is not compatibl"),
        (_COQUI_STT_1936, 1, "image_dependency", "Detected NVIDIA Tesla K80 GPU"),
        (_TENSORRTX_2, 1, "image_dependency", "fatal error: cuda_runtime_api.h"),
        (_CUDARC_274, 1, "image_dependency", 'Unable to dynamically load the "cublas"'),
        (_MISTRALRS_1529, 1, "driver_cuda", 'Unable to dynamically load the "cuda"'),
        (_SKYPILOT_8128, 1, "other", "gateway-no-upstream"),
        (_VLLM_20682, 1, "parallel_layout", "tensor-size-b-split-by-a"),
        (_VLLM_37403, 1, "parallel_layout", "tensor-size-a-split-by-b"),
    ],
    ids=[
        "cuda-invalid-kernel-image",
        "tei-compute-cap",
        "ngc-gpu-not-supported",
        "build-header-missing",
        "cudarc-library",
        "cudarc-driver-library",
        "no-ready-replicas",
        "tensor-b-split",
        "tensor-a-split",
    ],
)
def test_round18_classes_on_other_reports(tmp_path, log, line, category, why):
    rc = _root(tmp_path, log)
    assert (rc["line"], rc["category"]) == (line, category), rc
    assert why in rc["why"], rc["why"]


def test_round18_hami_allocation_failure_is_memory(tmp_path):
    rc = _root(tmp_path, _HAMI_CORE_94)
    assert rc["line"] == 1 and rc["category"].startswith("oom_"), rc
    assert "cuMemoryAllocate failed res=2" in rc["why"], rc["why"]


def test_round18_sizes_that_are_not_multiples_are_not_a_split(tmp_path):
    rc = root_cause(tmp_path, _SDWEBUI_12221)
    assert rc is None or rc["category"] != "parallel_layout", rc


def test_round18_backward_pass_picks_runtime(tmp_path):
    rc = _root(tmp_path, _LLAMA_COOKBOOK_320)
    assert (rc["line"], rc["category"]) == (7, "oom_runtime"), rc
    assert rc["phase"]["value"] == "runtime" and rc["phase"]["evidenced"] is False, rc["phase"]
    assert "backward" in rc["phase"]["evidence"][0], rc["phase"]


def test_round18_mod_term():
    assert parse_side("mod(a, b)")[0].mod == ("a", "b")
    (check,) = parse_checks(
        {
            "checks": [
                {
                    "id": "m",
                    "category": "other",
                    "pattern": r"(?P<a>\d+) (?P<b>\d+)",
                    "compare": "mod(a, b) == 0",
                }
            ]
        },
        "test",
    )
    assert evaluate(check, "6 3") is not None
    assert evaluate(check, "7 3") is None
    assert evaluate(check, "6 0") is None  # no division by zero: the check does not hold


@pytest.mark.parametrize(
    ("case_id", "category", "why"),
    [
        # The round's own logs for the classes above (a second report is named where one was found).
        ("deepspeed-mii-75", "image_dependency", "fatal error: cuda_runtime_api.h"),
        ("triton-server-8279", "image_dependency", "Detected Tesla V100S-PCIE-32GB GPU"),
        ("text-embeddings-inference-640", "image_dependency", "Runtime compute cap 120"),
        ("sglang-25117", "parallel_layout", "tensor-size-b-split-by-a"),
        ("skypilot-4907", "other", "gateway-no-upstream"),
        ("mistralrs-596", "driver_cuda", 'Unable to dynamically load the "cuda"'),
        # Words learned from the round-18 logs only (no second report found): vllm-omni's connector whose
        # package did not import, and vLLM's placement-group wait cut by the poster after its first words.
        ("vllm-omni-3513", "image_dependency", "create connector MooncakeTransferEngineC"),
        ("kserve-4946", "parallel_layout", "ray-placement-group"),
    ],
)
def test_round18_classes_on_the_round_logs(tmp_path, case_id, category, why):
    case = _case(case_id)
    rc = _root(tmp_path, case["log"])
    assert (rc["line"], rc["category"]) == (case["first_anomaly_line"], category), rc
    assert why in rc["why"], rc["why"]


@pytest.mark.parametrize(
    ("case_id", "line", "category", "why"),
    [
        # Category learned, line not: round 6's mistralrs-44 labels the message under Rust's `panicked at`
        # header (line 6 here); this round's label takes the header (line 5).
        ("mistralrs-1005", 6, "image_dependency", 'Unable to dynamically load the "cudnn"'),
        # The memory class learned; the label's `oom_runtime` rests on the thread (phase unknown in the log).
        ("hami-585", 1, "oom_startup", "cuMemoryAllocate failed res=2"),
    ],
)
def test_round18_classes_learned_where_the_label_goes_further(tmp_path, case_id, line, category, why):
    rc = _root(tmp_path, _case(case_id)["log"])
    assert (rc["line"], rc["category"]) == (line, category), rc
    assert why in rc["why"], rc["why"]


def test_round18_backward_frames_on_the_round_log(tmp_path):
    case = _case("llamafactory-4263")
    rc = _root(tmp_path, case["log"])
    assert (rc["line"], rc["category"]) == (case["first_anomaly_line"], "oom_runtime"), rc
    assert rc["phase"]["value"] == case["phase"] == "runtime", rc["phase"]


# NVIDIA/TensorRT-LLM#2268: a healthy KV sizing (about half of the GPU free): no root.
_TRTLLM_2268 = (
    "[TensorRT-LLM][INFO] Memory usage when calculating max tokens in paged kv cache: total: 39.39 GiB, "
    "available: 21.89 GiB\n"
    "[TensorRT-LLM][INFO] Number of blocks in KV cache primary pool: 631\n"
)


def test_round18_kv_sizing_with_memory_free_stays_quiet(tmp_path):
    assert root_cause(tmp_path, _TRTLLM_2268) is None


def test_round18_kv_sizing_with_no_memory_free_on_the_round_log(tmp_path):
    # The round-18 log (no second report with a posted line was found).
    case = _case("tensorrt-llm-2398")
    rc = _root(tmp_path, case["log"])
    assert (rc["line"], rc["category"]) == (case["first_anomaly_line"], "oom_startup"), rc
    assert "kv-cache-sized-with-no-free-memory" in rc["why"], rc["why"]


def test_round18_cause_under_caused_by_is_read_on_the_round_log(tmp_path):
    # The round-18 log (TEI's anyhow chain: `Error: Could not create backend`, `Caused by:`, the cause
    # indented below). huggingface/text-embeddings-inference#306 posts the same chain with a cause no
    # family knows (`cannot find tensor …`): there the top line stays the root (test below).
    case = _case("text-embeddings-inference-34")
    rc = _root(tmp_path, case["log"])
    assert (rc["line"], rc["category"]) == (case["first_anomaly_line"], "image_dependency"), rc
    assert "Runtime compute cap 75" in rc["why"], rc["why"]


# huggingface/text-embeddings-inference#306.
_TEI_306 = (
    "Error: Could not create backend\n"
    "\n"
    "Caused by:\n"
    "    Could not start backend: cannot find tensor encoder.layer.0.mlp.gated_layers.weight\n"
)


def test_round18_cause_without_a_class_leaves_the_top_line(tmp_path):
    assert _root(tmp_path, _TEI_306)["line"] == 1


def test_round18_indented_code_under_other_lines_stays_code():
    from vllm_medic.triage.scanner import _under_cause_header

    lines = [b"Error: x", b"", b"Caused by:", b"    0: creating primary lease", b"    1: grpc request error"]
    assert _under_cause_header(lines, 3) and _under_cause_header(lines, 4)
    tb = [b"Traceback (most recent call last):", b'  File "a.py", line 1, in <module>', b"    f()"]
    assert not _under_cause_header(tb, 1) and not _under_cause_header(tb, 2)
    # The header at the end of the block before.
    assert _under_cause_header([b"    Could not start backend"], 0, [b"Error: x", b"", b"Caused by:"])
