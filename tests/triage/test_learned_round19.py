"""Blind round 19, learned by class after its one blind score (round19.score.txt). NOT a blind figure.

Each class is driven through `vllm-medic triage --json`: on a report OTHER than the round's where one was
found (named per case, lines as posted), else on the round-19 log that taught it (said so per case).
Round 19's learned level is held by LEARNED_FLOOR in test_accuracy.py; the figures after learning are
tests/data/triage/blind/round19.after-learning.txt. Labels this round that rest on the thread rather than
the log, or contradict earlier rounds, were not learned (tests/data/triage/blind/README.md, "After scoring
(round 19)").
"""

from __future__ import annotations

import pytest
from triage_json import blind_case, root_cause
from triage_json import found_root as _root

# NVIDIA/nccl-tests#208: a cu118 NCCL on RTX 4090s, its CUDACHECK naming CUDA's error 500.
_NCCL_TESTS_208 = (
    "noodle-4090-0:1896106:1896106 [0] NCCL INFO Bootstrap : Using eno2:10.33.48.72<0>\n"
    "noodle-4090-0:1896106:1896106 [1] NCCL INFO cudaDriverVersion 12020\n"
    "NCCL version 2.21.5+cuda11.8\n"
    "\n"
    "noodle-4090-0:1896106:1896121 [1] enqueue.cc:47 NCCL WARN Cuda failure 'named symbol not found'\n"
    "\n"
    "noodle-4090-0:1896106:1896121 [1] enqueue.cc:58 NCCL WARN Cuda failure 'named symbol not found'\n"
)
# NVIDIA/stdexec#888: a build with CMAKE_CUDA_ARCHITECTURES for one GPU of two.
_STDEXEC_888 = (
    "CUDA error cudaErrorSymbolNotFound [/home/eniebler/Code/stdexec/include/nvexec/stream/bulk.cuh:239]: "
    "named symbol not found\n"
)
# ai-dynamo/nixl#1841 (a CI log quoted in a comment): UCX's GDA transport enumerating devices.
_NIXL_1841 = "gdaki.c:1227 UCX ERROR cuDeviceGetCount(&cuda_dev_count) failed: initialization error\n"
# ccsb-scripps/AutoDock-GPU#192.
_AUTODOCK_192 = (
    "Running 1 docking calculation\n"
    "\n"
    "cudaGetDeviceCount failed initialization error\n"
    "autodock_gpu_128wi: ./host/src/performdocking.cpp:128: void setup_gpu_for_docking(GpuData&, "
    "GpuTempData&): Assertion `0' failed.\n"
    "Aborted\n"
)
# scale-lab/DRiLLS#9: TensorFlow's CPU feature guard on a CPU without AVX.
_DRILLS_9 = (
    "F tensorflow/core/platform/cpu_feature_guard.cc:37] The TensorFlow library was compiled to use AVX "
    "instructions, but these aren't available on your machine.\n"
    "Aborted (core dumped)\n"
)
# llSourcell/deep_dream_challenge#6: the guard's advice when the CPU has MORE than the build uses.
_DEEP_DREAM_6 = (
    "2018-03-19 14:44:16.835465: W C:\\tf_jenkins\\home\\workspace\\rel-win\\M\\windows\\PY\\36\\tensorflow\\core"
    "\\platform\\cpu_feature_guard.cc:45] The TensorFlow library wasn't compiled to use AVX instructions, but "
    "these are available on your machine and could speed up CPU computations.\n"
)
# pytorch/pytorch#103417: torch.compile's Triton launcher linked without libcuda.so.
_PYTORCH_103417 = (
    '  File "/home/alex/.local/lib/python3.10/site-packages/torch/_inductor/debug.py", line 239, in inner\n'
    "/usr/bin/ld: cannot find -lcuda: No such file or directory\n"
    "collect2: error: ld returned 1 exit status\n"
)
# Softcatala/whisper-ctranslate2#74: CTranslate2 built for CUDA 11 on a CUDA 12 image.
_WHISPER_CT2_74 = (
    '  File "/usr/local/lib/python3.10/dist-packages/faster_whisper/transcribe.py", line 629, in encode\n'
    "    return self.model.encode(features, to_cpu=to_cpu)\n"
    "RuntimeError: Library libcublas.so.11 is not found or cannot be loaded\n"
)
# sipie800/ComfyUI-PuLID-Flux-Enhanced#34: xFormers with no operator for bf16 on a T4-class GPU.
_PULID_34 = (
    "NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:\n"
    "     query       : shape=(1, 577, 16, 64) (torch.bfloat16)\n"
    "     key         : shape=(1, 577, 16, 64) (torch.bfloat16)\n"
    "     value       : shape=(1, 577, 16, 64) (torch.bfloat16)\n"
    "     attn_bias   : <class 'NoneType'>\n"
    "     p           : 0.0\n"
    "`fa2F@v2.6.3-24-gbdf733b` is not supported because:\n"
    "    requires device with capability > (8, 0) but your GPU has capability (7, 5) (too old)\n"
)
# zjunlp/MolGen#25: DeepSpeed's launcher with `--include localhost:1` on a one-GPU host.
_MOLGEN_25 = (
    '  File "/root/miniconda3/envs/my_env/lib/python3.9/site-packages/deepspeed/launcher/runner.py", line 296,'
    " in parse_resource_filter\n"
    "    raise ValueError(f\"No slot '{slot}' specified on host '{hostname}'\")\n"
    "ValueError: No slot '1' specified on host 'localhost'\n"
)
# tomorrow1238/Ultraman#10: diffusers' fp8 code on torch 1.12.
_ULTRAMAN_10 = (
    '  File "/opt/conda/envs/ultraman/lib/python3.9/site-packages/diffusers/quantizers/torchao/'
    'torchao_quantizer.py", line 57, in <module>\n'
    "    torch.float8_e4m3fn,\n"
    "AttributeError: module 'torch' has no attribute 'float8_e4m3fn'\n"
)

# bitsandbytes-foundation/bitsandbytes#589: rich's traceback box (its numbered source rows are quoted code),
# then bitsandbytes' bare `RuntimeError:` with the message on the lines below.
_BNB_589 = (
    "│   17 │   if lib is None and torch.cuda.is_available():                                           │\n"
    "│   18 │   │   CUDASetup.get_instance().generate_instructions()                                    │\n"
    "│   19 │   │   CUDASetup.get_instance().print_log_stack()                                          │\n"
    "│ ❱ 20 │   │   raise RuntimeError('''                                                              │\n"
    "│   21 │   │   CUDA Setup failed despite GPU being available. Please run the following command     │\n"
    "│   22 │   │                                                                                       │\n"
    "│   23 │   │   python -m bitsandbytes                                                              │\n"
    "╰──────────────────────────────────────────────────────────────────────────────────────────────────╯\n"
    "RuntimeError:\n"
    "        CUDA Setup failed despite GPU being available. Please run the following command to get more "
    "information:\n"
    "\n"
    "        python -m bitsandbytes\n"
)


def _case(case_id: str) -> dict:
    return blind_case("round19.jsonl", case_id)


@pytest.mark.parametrize(
    ("log", "line", "category", "why"),
    [
        (_NCCL_TESTS_208, 5, "image_dependency", "kernel-symbol-not-found"),
        (_STDEXEC_888, 1, "image_dependency", "kernel-symbol-not-found"),
        (_NIXL_1841, 1, "driver_cuda", "cuda-call-initialization-error"),
        (_AUTODOCK_192, 3, "driver_cuda", "cuda-call-initialization-error"),
        (_DRILLS_9, 1, "image_dependency", "illegal-instruction"),
        (_PYTORCH_103417, 2, "image_dependency", "shared-lib-missing"),
        (_WHISPER_CT2_74, 3, "image_dependency", "shared-lib-missing"),
        (_PULID_34, 1, "image_dependency", "No operator found for `memory_efficient_"),
        (_MOLGEN_25, 3, "parallel_layout", "No slot '1' specified on host"),
        (_ULTRAMAN_10, 3, "image_dependency", "torch-attribute-missing"),
        (_BNB_589, 9, "image_dependency", "bitsandbytes-cuda-setup-failed"),
    ],
    ids=[
        "nccl-named-symbol",
        "cuda-symbol-not-found",
        "ucx-cuda-init-error",
        "cuda-init-error",
        "tensorflow-cpu-isa",
        "ld-cannot-find-lib",
        "ctranslate2-library",
        "xformers-no-operator",
        "deepspeed-no-slot",
        "torch-attribute-missing",
        "bitsandbytes-under-rich-box",
    ],
)
def test_round19_classes_on_other_reports(tmp_path, log, line, category, why):
    rc = _root(tmp_path, log)
    assert (rc["line"], rc["category"]) == (line, category), rc
    assert why in rc["why"], rc["why"]


def test_round19_cpu_feature_advice_is_not_a_root(tmp_path):
    rc = root_cause(tmp_path, _DEEP_DREAM_6)
    assert rc is None or "illegal-instruction" not in rc["why"], rc


@pytest.mark.parametrize(
    ("case_id", "category", "why"),
    [
        # The round's own logs for the classes above (a second report is named where one was found).
        ("pytorch-152077", "image_dependency", "kernel-symbol-not-found"),
        ("nccl-1372", "image_dependency", "kernel-symbol-not-found"),
        ("nixl-1743", "driver_cuda", "cuda-call-initialization-error"),
        ("vllm-15992", "image_dependency", "shared-lib-missing"),
        ("ctranslate2-862", "image_dependency", "shared-lib-missing"),
        ("xformers-1191", "image_dependency", "No operator found for `memory_efficient_"),
        ("deepspeed-5818", "parallel_layout", "No slot '2' specified on host"),
        ("llm-compressor-1164", "image_dependency", "torch-attribute-missing"),
        ("koboldcpp-1535", "oom_runtime", "failed to find KV cache slot"),
        ("bitsandbytes-492", "image_dependency", "bitsandbytes-cuda-setup-failed"),
        # Learned from the round-19 logs only (no second report with the posted line was found): UCX's CPU
        # check (ucs_check_cpu_flags), cuda-gdb's failed peer-access call, TensorRT-LLM's kvCacheManager.cpp
        # assertion (round 14's tensorrt-llm-2708 is the same file: held by round 14's floor), AIBrix's
        # KV-event subscriber (zmq_client.go's applyEventBatch), Mooncake's metadata client `http=400`.
        ("nixl-2119", "image_dependency", "illegal-instruction"),
        ("nccl-258", "nccl_network", "gpu-peer-access"),
        ("trtllm-699", "prefix_cache", "kvCacheManager.cpp"),
        ("aibrix-1720", "prefix_cache", "failed to decode event batch"),
        ("mooncake-2296", "nccl_network", "mooncake"),
    ],
)
def test_round19_classes_on_the_round_logs(tmp_path, case_id, category, why):
    case = _case(case_id)
    rc = _root(tmp_path, case["log"])
    assert (rc["line"], rc["category"]) == (case["first_anomaly_line"], category), rc
    assert why in rc["why"], rc["why"]


def test_round19_llamacpp_kv_shift_notice_is_noise(tmp_path):
    # The round-19 log (llama.cpp's common_init notice, printed at every start of a context that cannot
    # shift; ggml-org/llama.cpp#11053 made it a warning): the GGML_ASSERT below it is the root.
    case = _case("llamacpp-27515")
    rc = _root(tmp_path, case["log"])
    assert rc["line"] == case["first_anomaly_line"] == 3, rc
    assert rc["category"] != "prefix_cache", rc
    only_notice = case["log"].splitlines()[0] + "\n"
    assert root_cause(tmp_path, only_notice) is None
