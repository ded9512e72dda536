"""Blind round 14, learned by class after its one blind score (round14.score.txt). NOT a blind figure.

Each class is driven through `vllm-medic triage --json`: on a report OTHER than the round's where one was
found (named per case, lines as posted), else on the round-14 log that taught it (said so per case).
The phase cues are data (data/phase.yaml); tests/triage/test_phase_data.py holds their measured default.
Round 14's learned level is held by LEARNED_FLOOR in test_accuracy.py; the figures after learning are
tests/data/triage/blind/round14.after-learning.txt. Labels this round that contradict earlier rounds
were not learned (tests/data/triage/blind/README.md, "After scoring (round 14)").
"""

from __future__ import annotations

import pytest
from triage_json import blind_case
from triage_json import found_root as _root

# kvcache-ai/Mooncake#456: the store's client whose put its master would not start (master unreachable).
_MOONCAKE_456 = (
    "E0606 09:39:00.285498   382 master_client.cpp:136] Failed to start put operation: \n"
    "2025-06-06 09:39:00.285457 ERROR    [382] [coro_rpc_client.hpp:923] client has been closed, please re-connect\n"
    "E0606 09:39:00.285537   382 client.cpp:323] Failed to start put operation: RPC_FAIL\n"
)

# meta-llama/llama3#215 (Ollama's log): ggml could not initialise CUDA.
_LLAMA3_215 = "ggml_cuda_init: failed to initialize CUDA: initialization error\n"

# pytorch/xla#9604: the TPU runtime cannot open its device node on a fresh TPU VM.
_TORCH_XLA_9604 = (
    ">>> print(xm.get_xla_supported_devices())\n"
    "Traceback (most recent call last):\n"
    '  File "<stdin>", line 1, in <module>\n'
    '  File "/home/scd/.local/lib/python3.10/site-packages/torch_xla/core/xla_model.py", line 79, '
    "in get_xla_supported_devices\n"
    "    devices = torch_xla._XLAC._xla_get_devices()\n"
    "RuntimeError: Bad StatusOr access: UNKNOWN: TPU initialization failed: open(/dev/accel2): "
    "Operation not permitted\n"
)

# huggingface/optimum-nvidia#68 and NVIDIA/TensorRT-LLM#1992: an engine built for TP x PP GPUs run with
# another number of MPI ranks (TensorRT-LLM's world check).
_OPTIMUM_NVIDIA_68 = (
    "RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: mpiSize == tp * pp "
    "(/opt/optimum-nvidia/third-party/tensorrt-llm/cpp/tensorrt_llm/runtime/worldConfig.cpp:89)\n"
    "1       0x7f6fe2659212 /usr/local/lib/python3.10/dist-packages/tensorrt_llm/bindings.cpython-310-x86_64-"
    "linux-gnu.so(+0x7c212) [0x7f6fe2659212]\n"
)
_TRTLLM_1992 = "RuntimeError: [TensorRT-LLM][ERROR] Assertion failed: MPI size 1 != TP size 2 * PP size 1\n"

# vllm-project/aibrix#696 (another reporter in the round's thread): Vineyard's client retrying its daemon.
_AIBRIX_696_IPC = (
    "INFO 03-24 01:06:39 vineyard_llm_cache.py:306] VineyardLLMCache from_envs None\n"
    "[info] Connection to IPC socket failed for pathname /var/run/vineyard.sock with ret = IOError: Cannot "
    "connect to /var/run/vineyard.sock: No such file or directory, retrying 10 more times.\n"
)

# kuberay#3151: Ray Serve's controller, a replica still unscheduled (a weak cue: no failure word).
_KUBERAY_3151 = (
    "WARNING 2025-03-04 01:04:33,560 controller 306 -- Deployment 'demoRetrievalVoyagerIndexServiceHandler' "
    "in application 'demo_recsys_retrieval_voyager_index_service' has 1 replicas that have taken more than "
    "30s to be scheduled. This may be due to waiting for the cluster to auto-scale or for a runtime "
    'environment to be installed. Resources required for each replica: {"CPU": 2.0}, total resources '
    'available: {"CPU": 10.0}. Use `ray status` for more details.\n'
)

# tensorflow/tensorflow#45238: TensorFlow's spaced `Resource exhausted:` status.
_TF_45238 = (
    "2020-11-28 09:40:14.685870: W tensorflow/core/framework/op_kernel.cc:1763] OP_REQUIRES failed at "
    "cast_op.cc:109 : Resource exhausted: OOM when allocating tensor with shape[1,512,647,3] and type float "
    "on /job:localhost/replica:0/task:0/device:CPU:0 by allocator cpu\n"
)

# triton-inference-server/server#8284: Triton's crash handler, before its stack.
_TRITON_8284 = (
    "Signal (11) received.\n"
    " 0# 0x000060322740904D in /opt/tritonserver/bin/tritonserver\n"
    " 1# 0x000071FB7C344520 in /usr/lib/x86_64-linux-gnu/libc.so.6\n"
    "/workspace/start.sh: line 15:   341 Segmentation fault      (core dumped) /opt/tritonserver/bin/tritonserver\n"
)

# golang/go#32228: the Go runtime's announcement of a fatal signal, its SIGSEGV detail on the next line.
_GOLANG_32228 = (
    "fatal error: unexpected signal during runtime execution\n"
    "[signal SIGSEGV: segmentation violation code=0x1 addr=0xffffffffffffffe4 pc=0x7f2cc6e3b5c6]\n"
    "runtime stack:\n"
    "runtime.throw(0xf2701c, 0x2a)\n"
)


def _case(case_id: str) -> dict:
    return blind_case("round14.jsonl", case_id)


@pytest.mark.parametrize(
    ("log", "line", "category", "why"),
    [
        (_MOONCAKE_456, 1, "prefix_cache", "start put operation"),
        (_LLAMA3_215, 1, "driver_cuda", "initialization error"),
        (_TORCH_XLA_9604, 6, "driver_cuda", "TPU initialization failed"),
        (_TF_45238, 1, "oom_startup", "Resource exhausted:"),
        (_OPTIMUM_NVIDIA_68, 1, "parallel_layout", "mpiSize == tp * pp"),
        (_TRTLLM_1992, 1, "parallel_layout", "MPI size 1 != TP size"),
        (_AIBRIX_696_IPC, 2, "prefix_cache", "Connection to IPC socket failed"),
        (_KUBERAY_3151, 1, "other", "stalled-start"),
    ],
    ids=[
        "mooncake-store-put",
        "cuda-initialization-error",
        "tpu-device-node",
        "tf-resource-exhausted",
        "trtllm-mpi-world",
        "trtllm-mpi-size",
        "vineyard-client",
        "ray-serve-unscheduled-replica",
    ],
)
def test_round14_family_words_on_other_reports(tmp_path, log, line, category, why):
    rc = _root(tmp_path, log)
    assert (rc["line"], rc["category"]) == (line, category), rc
    assert why in rc["why"], rc["why"]


@pytest.mark.parametrize("log", [_TRITON_8284, _GOLANG_32228], ids=["triton", "go-runtime"])
def test_a_crash_handlers_announcement_is_the_segfaults_first_line(tmp_path, log):
    """The signal announced before the stack (and before `Segmentation fault` / `SIGSEGV`) is the root."""
    rc = _root(tmp_path, log)
    assert (rc["line"], rc["category"], rc["signature"]) == (1, "other", "segfault"), rc


@pytest.mark.parametrize(
    ("case_id", "category", "why"),
    [
        # The Mooncake store: a put refused for want of space, a RealClient that could not be created
        # (its retries logged as W lines before the E one), and SGLang's HiCache IO kernels (`kvcacheio`,
        # the round's own traceback; no second report found).
        ("mooncake-197", "prefix_cache", "start put operation"),
        ("vllm-ascend-9841", "prefix_cache", "real_client.cpp"),
        ("sglang-28396", "prefix_cache", "kvcacheio"),
        # CUDA error 3 in ggml (Ollama's runner) and the TPU device node (the round's own lines).
        ("ollama-1083", "driver_cuda", "CUDA error 3"),
        ("pytorch-xla-3165", "driver_cuda", "/dev/accel"),
        # XLA's status cut after its first words.
        ("jax-788", "oom_runtime", "Resource exhausted:"),
        # JAX's sharding check cut before `divisible`: the final message, not IPython's header above it.
        ("jax-27808", "parallel_layout", "was given the sharding of"),
        # TensorRT-LLM's world check, wrapped onto the next row of Triton's model table: the lean.
        ("tensorrtllm_backend-33", "parallel_layout", "mpiSize == tp * pp"),
        # Vineyard's RPC client (AIBrix's KV cache): not the fabric its `No RDMA endpoint` line suggests.
        ("aibrix-696", "prefix_cache", "Connection to RPC socket failed"),
        # Weak cues: Envoy's access log with a 5xx, Ray Serve's unscheduled replica.
        ("aibrix-916", "other", "http-error-status"),
        ("ray-48471", "other", "stalled-start"),
        # The crash announcement before its detail (Triton, the Go runtime).
        ("tensorrtllm_backend-273", "other", "segfault"),
        ("localai-660", "other", "segfault"),
    ],
)
def test_round14_classes_on_the_round_logs(tmp_path, case_id, category, why):
    case = _case(case_id)
    rc = _root(tmp_path, case["log"])
    assert (rc["line"], rc["category"]) == (case["first_anomaly_line"], category), rc
    assert why in rc["why"], rc["why"]


def test_a_transfer_that_fails_inside_a_put_stays_fabric(tmp_path):
    """Mooncake's `Put operation failed with error: TRANSFER_FAIL` is the transfer engine's failure (blind
    round 11's mooncake-397, labelled fabric): only the store's own refusals are the cache."""
    case = blind_case("round11.jsonl", "mooncake-397")
    rc = _root(tmp_path, case["log"])
    assert (rc["line"], rc["category"]) == (case["first_anomaly_line"], "nccl_network"), rc


@pytest.mark.parametrize(
    ("case_id", "header", "cue"),
    [
        # Executing an already compiled JAX computation (the round's own traceback, as posted).
        ("jax-13428", False, "_execute_compiled"),
        # vLLM's sleep-mode wake-up; the round's excerpt starts below its traceback header, which the scan
        # does not fold onto a family root; with the header the frames count (TideDra/lmm-r1#43 posts the
        # same frames).
        ("vllm-13941", True, "wake_up"),
    ],
)
def test_runtime_frames_of_round14_pick_runtime(tmp_path, case_id, header, cue):
    case = _case(case_id)
    log = ("Traceback (most recent call last):\n" if header else "") + case["log"]
    rc = _root(tmp_path, log)
    assert rc["category"] == "oom_runtime", rc
    assert rc["phase"]["value"] == "runtime" and rc["phase"]["evidenced"] is False, rc["phase"]
    assert cue in rc["phase"]["evidence"][0], rc["phase"]


def test_xla_execution_of_a_replica_picks_runtime(tmp_path):
    """XLA's client saying that running a compiled computation failed: executing, not compiling."""
    rc = _root(tmp_path, _case("jax-788")["log"])
    assert rc["phase"]["value"] == "runtime" and rc["phase"]["evidenced"] is False, rc["phase"]
    assert "Execution of replica 0 failed" in rc["phase"]["evidence"][0], rc["phase"]
