"""The classes learned from blind round 9 (issue 10), through the public CLI (`triage --json`).

Each class is held by a real log from a report OTHER than the round-9 one it was learned from where
one was found (the report is named per case; lines are as posted, an excerpt trimmed at most,
inline-code backticks removed). Classes with no second report found are held by the round-9 logs
themselves through the learned-round floor in test_accuracy.py. Round 9's own blind scores are
tests/data/triage/blind/round9.score*.txt.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from triage_json import root_cause as _root

from vllm_medic.triage.families import load_families
from vllm_medic.triage.normalize import normalize_line

_TINYZERO_75 = (
    "02-16 16:05:50,467 INFO worker.py:1636 -- Connecting to existing Ray cluster at address: "
    "172.23.15.13:20000...\n"
    "[2025-02-16 16:05:55,537 E 350061 350061] gcs_rpc_client.h:179: Failed to connect to GCS at address "
    "172.23.15.13:20000 within 5 seconds.\n"
    "[2025-02-16 16:06:26,552 W 350061 350061] gcs_client.cc:178: Failed to get cluster ID from GCS server: "
    "TimedOut: Timed out while waiting for GCS to become available.\n"
)

_MOONCAKE_1207 = (
    "E1212 12:06:27.217456   909 rdma_context.cpp:205] Failed to register memory 0x7fd3e6e00000: Bad address [14]\n"
    "E1212 12:06:27.217484   915 rdma_context.cpp:205] Failed to register memory 0x7fd3e6fb0000: Bad address [14]\n"
)

_JAX_23989 = (
    "Traceback (most recent call last):\n"
    '  File "/usr/local/lib/python3.10/dist-packages/jax/_src/compiler.py", line 266, in backend_compile\n'
    "    return backend.compile(built_c, compile_options=options)\n"
    "jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Mosaic failed to compile TPU kernel: Unsupported input "
    "data type in matrix multiplication.\n"
)

_LLAMA_CPP_14938 = (
    "srv  update_slots: failed to find free space in the KV cache, retrying with smaller batch size, i = 0, "
    "n_batch = 1024, ret = 1\n"
    "decode: failed to find a memory slot for batch of size 1024\n"
)

_MEGATRON_381 = (
    "assert args.num_layers % args.transformer_pipeline_model_parallel_size == 0, \\\n"
    "                'num_layers must be divisible by transformer_pipeline_model_parallel_size'\n"
)

CASES = [
    # Jiayi-Pan/TinyZero#75: a Ray worker that cannot reach the cluster's GCS (Ray's C++ log layout,
    # `[time L pid tid] file.h:N:`), the rendezvous of the cluster.
    ("ray-gcs-connect", _TINYZERO_75, 2, "nccl_network"),
    # kvcache-ai/Mooncake#1207: the transfer engine's RDMA memory registration fails (glog E lines).
    ("rdma-register-memory", _MOONCAKE_1207, 1, "nccl_network"),
    # jax-ml/jax#23989: JAX's Mosaic compiler cannot build a Pallas TPU kernel for this input type.
    ("mosaic-compile", _JAX_23989, 4, "image_dependency"),
    # ggml-org/llama.cpp#14938: llama-server finds no free KV cells for the batch (no ERROR marker).
    ("kv-cells-exhausted", _LLAMA_CPP_14938, 1, "oom_runtime"),
    # verl-project/verl#2515 (the error as its title quotes it): more GPUs asked for than the cluster
    # has, in words the Ray placement-group signature does not know.
    (
        "gpus-exceed-cluster",
        "ValueError: Total available GPUs 8.0 is less than total desired GPUs 16\n",
        1,
        "parallel_layout",
    ),
    # ROCm/legacy-rocm-build#1339 (the message as its title quotes it): ROCm's kernel memory fault.
    (
        "rocm-memory-access-fault",
        "Memory access fault by GPU node-4 (Agent handle: 0x152e220) on address (nil). Reason: Page not "
        "present or supervisor privilege.\n",
        1,
        "other",
    ),
    # sgl-project/sglang#33773 (the crash as the PR quotes it): the mamba state cache cannot get a slot;
    # cache machinery that "can not alloc" is the cache's failure first (it outranks memory).
    ("mamba-cache-alloc", "AssertionError: Can not alloc mamba cache\n", 1, "prefix_cache"),
    # NVIDIA/Megatron-LM#381 (the check as the issue quotes it): a quoted `assert n % pp_size == 0`
    # with its message continued on the next line and no AssertionError after it.
    ("assert-divisible-by-parallel-size", _MEGATRON_381, 1, "parallel_layout"),
    # huggingface/text-generation-inference#531 (the error as its title quotes it): no CUDA for the
    # process, the driver/runtime did not give it a GPU.
    ("cuda-not-available", "ImportError: CUDA is not available\n", 1, "driver_cuda"),
    # Accelerator memory in XLA's words (google-research/albert#168, erfanzar/EasyDeL#166): already
    # memory through "out of memory"; held here because the round-9 brief names the class.
    (
        "xla-hbm-exhausted",
        "Compilation failure: Ran out of memory in memory space hbm. Used 12.34G of 8.00G hbm. Exceeded hbm "
        "capacity by 4.34G.\n",
        1,
        "oom_startup",
    ),
    (
        "xla-hbm-exhausted-jax",
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of "
        "memory in memory space hbm. Used 63.80G of 30.75G hbm. Exceeded hbm capacity by 33.05G.\n",
        1,
        "oom_startup",
    ),
]


@pytest.mark.parametrize(("name", "text", "line", "category"), CASES, ids=[c[0] for c in CASES])
def test_learned_round9_class(tmp_path: Path, name: str, text: str, line: int, category: str):
    rc = _root(tmp_path, text)
    assert rc is not None, name
    assert rc["line"] == line, (name, rc)
    assert rc["category"] == category, (name, rc["category"], rc["why"])


def test_cpp_collector_layouts_are_peeled():
    # Ray's C++ components (Jiayi-Pan/TinyZero#75) and spdlog's `[logger] [level] [file:N]`
    # (LMCache/LMCache#422, InfiniStore's server log): level and emitter, not part of the message.
    ev = normalize_line(
        "[2025-02-16 16:05:55,537 E 350061 350061] gcs_rpc_client.h:179: Failed to connect to GCS at "
        "address 172.23.15.13:20000 within 5 seconds."
    )
    assert ev.level == "ERROR" and ev.origin == "gcs_rpc_client.h:179"
    assert ev.message.startswith("Failed to connect to GCS")
    ev = normalize_line(
        "[2025-03-25 18:33:40.891] [infini] [info] register mr done for base_ptr: 800078304, size: 4096"
    )
    assert ev.level == "INFO" and ev.origin == "infini" and ev.message.startswith("register mr done")
    # A Ray Serve replica's prefix names its deployment with colons (blind round 9's lmcache-1150).
    ev = normalize_line("(ServeReplica:llm:vllm_serve pid=4073258) Traceback (most recent call last):")
    assert ev.pid == 4073258 and ev.message == "Traceback (most recent call last):"


def test_a_cause_listed_as_possible_does_not_decide_the_family():
    # Ray's dead-node message lists "OOM" among the things that can cause it; the raylet word keeps
    # the memory family from winning on that hint alone (blind round 9's ray-45179).
    line = (
        "(raylet) The node with node id: 0f21 and address: 10.0.0.51 and node name: 10.0.0.51 has been "
        "marked dead because the detector has missed too many heartbeats from it. This can happen when a "
        "\t(1) raylet crashes unexpectedly (OOM, preempted node, etc.) "
    )
    assert load_families().score(line) is None


def test_outranking_family_needs_no_margin_when_it_leads():
    # The cache family outranks memory when its own words reach 3; leading by less than the margin
    # must not turn that into "no family" (blind round 9's sglang-36770 layout: frames printed as
    # `file.py, line N, in f` below the exception, read as neighbours).
    v = load_families().score(
        "AssertionError: Can not alloc mamba cache",
        [],
        ["  unified_radix_cache.py, line 927, in cache_unfinished_req"],
    )
    assert v is not None and v.family.category == "prefix_cache", v
