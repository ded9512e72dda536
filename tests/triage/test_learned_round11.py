"""The classes learned from blind round 11 (issue 10), through the public CLI (`triage --json`).

Each class is held by a real log from a report OTHER than the round-11 one it was learned from where
one was found (the report is named per case; lines are as posted, an excerpt trimmed at most, markdown
quote markers `> ` removed). Where none was found the round's own line stands in, said so per case.
Round 11's blind scores are tests/data/triage/blind/round11.score.txt (after the round 9-10 learning)
and round11.score.before-round9-10-learning.txt; its learned level is held by LEARNED_FLOOR in
test_accuracy.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from triage_json import root_cause as _root

# vllm-project/vllm-ascend#2083 (blind round 6, learned): Python 3.11+ underlines the failing `assert`
# with carets; the bare AssertionError below it is the exception line the labels choose.
_VLLM_ASCEND_2083 = (
    '  File "/code/vllm/vllm/v1/core/block_pool.py", line 145, in cache_full_blocks\n'
    "    assert blk.block_hash is None\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^\n"
    "AssertionError\n"
)

# TuSimple/mx-maskrcnn#98: an uncaught C++ exception; its message is the indented `what():` line
# (hard-wrapped by the terminal as posted).
_MX_MASKRCNN_98 = (
    "terminate called after throwing an instance of 'dmlc::Error'\n"
    "  what():  [10:44:35] src/engine/./threaded_engine.h:359: [10:44:35] src/storage/./pooled_storage_manager.h"
    ":107: cudaMalloc fail\n"
    "ed: out of memory\n"
)

# ai-dynamo/nixl#747: Mooncake's topology discovery finds no RDMA adapter (a W line, no failure word
# before round 11) and falls back to TCP.
_NIXL_747 = (
    "I0829 17:47:10.868765 566135 transfer_engine.cpp:146] Transfer Engine RPC using P2P handshake, listening on "
    "192.168.100.63:15987\n"
    "I0829 17:47:10.869144 566135 transfer_engine.cpp:184] Auto-discovering topology...\n"
    "W0829 17:47:10.869227 566135 topology.cpp:58] No RDMA devices found, check your device installation\n"
    "I0829 17:47:10.869350 566135 transfer_engine.cpp:199] Topology discovery complete. Found 0 HCAs.\n"
    "I0829 17:47:10.869481 566135 tcp_transport.cpp:303] TcpTransport: listen on port 16765\n"
)

# google/paxml#77: JAX's coordination service times out registering a task (the status line of the
# quoted block, its gRPC detail lines above it trimmed).
_PAXML_77 = (
    "2024-04-12 23:39:41.656900: E external/xla/xla/pjrt/distributed/client.cc:96] Coordination service agent in "
    "error status: DEADLINE_EXCEEDED: Deadline Exceeded\n"
)

# gpustack/gpustack#2500: a Ray placement-group bundle index past the group's bundles (vLLM's engine).
_GPUSTACK_2500 = (
    'ERROR 07-15 14:23:15 [core.py:396]   File "/home/root123/anaconda3/envs/gpustack/lib/python3.12/site-packages'
    '/ray/util/placement_group.py", line 337, in check_placement_group_index\n'
    "ERROR 07-15 14:23:15 [core.py:396]     raise ValueError(\n"
    "ERROR 07-15 14:23:15 [core.py:396] ValueError: placement group bundle index 4 is invalid. Valid placement "
    "group indexes: 0-4\n"
)

CASES = [
    ("caret-underlined-bare-assert", _VLLM_ASCEND_2083, 4, "prefix_cache"),
    ("cxx-terminate-what", _MX_MASKRCNN_98, 2, "oom_startup"),
    ("no-rdma-devices-found", _NIXL_747, 3, "nccl_network"),
    ("coordination-service-deadline", _PAXML_77, 1, "nccl_network"),
    ("placement-group-bundle-index", _GPUSTACK_2500, 3, "parallel_layout"),
    # OpenBMB/MiniCPM-V#760: Envoy's reply when no upstream answers: the gateway's, not the fabric's.
    (
        "gateway-no-upstream",
        "upstream connect error or disconnect/reset before headers. retried and the latest reset reason: "
        "connection failure, transport failure reason: delayed connect error: 111\n",
        1,
        "other",
    ),
    # ggml-org/llama.cpp#13194 (a commenter's line): the prompt is re-processed because the cache had
    # nothing to reuse (an INFO-less llama-server line).
    (
        "full-prompt-reprocessing",
        "slot update_slots: id  2 | task 319 | forcing full prompt re-processing due to lack of cache data "
        "(likely due to SWA or hybrid/recurrent memory, see https://github.com/ggml-org/llama.cpp/pull/13194"
        "#issuecomment-2868343055)\n",
        1,
        "prefix_cache",
    ),
    # ggml-org/llama.cpp#19915 (journald prefix as posted): an assertion of llama.cpp's KV-cache sequence
    # bookkeeping, GGML_ASSERT naming the KV cache source file.
    (
        "ggml-assert-kv-cache",
        "Feb 25 23:33:35 love llama-server[3855557]: [43189] /app/src/llama-kv-cache.cpp:403: GGML_ASSERT("
        'hparams.n_pos_per_embd() == 1 && "seq_add() is only supported for n_pos_per_embd() == 1") failed\n',
        1,
        "prefix_cache",
    ),
    # vllm-project/vllm#37270 (the round's own line; no second report found): LMCache's cache key class.
    (
        "cache-engine-key",
        "KeyError: LayerCacheEngineKey(model_name='...', world_size=1, worker_id=0, ...)\n",
        1,
        "prefix_cache",
    ),
    # vllm-project/vllm-ascend#1440 (the round's own line; no second report found): the NPU driver's HAL.
    (
        "accelerator-driver-library",
        "libascend_hal.so: cannot open shared object file: No such file or directory\n"
        "RuntimeError: Failed to load the backend extension: torch_npu. You can disable extension auto-loading "
        "with TORCH_DEVICE_BACKEND_AUTOLOAD=0.\n",
        1,
        "driver_cuda",
    ),
    # vllm-project/vllm-ascend#152 (its title): a CANN toolkit library, not the driver's: stays the image's.
    (
        "toolkit-library-stays-image",
        "ImportError: libatb.so: cannot open shared object file: No such file or directory\n",
        1,
        "image_dependency",
    ),
    # ollama/ollama#7300 (the round's own line; no second report found): a model file whose keys this
    # runtime version requires are missing (a newer model than the runtime).
    (
        "model-missing-required-key",
        "Error: llama runner process has terminated: error:Missing required key: clip.has_text_encoder\n",
        1,
        "image_dependency",
    ),
]


@pytest.mark.parametrize(("name", "text", "line", "category"), CASES, ids=[c[0] for c in CASES])
def test_learned_round11_class(tmp_path: Path, name: str, text: str, line: int, category: str):
    rc = _root(tmp_path, text)
    assert rc is not None, name
    assert rc["line"] == line, (name, rc)
    assert rc["category"] == category, (name, rc["category"], rc["why"])


def test_a_reporters_sentence_alone_is_not_an_anomaly(tmp_path: Path):
    # vllm-project/aibrix#1103 (a commenter): a sentence with a failure word that no program wrote.
    assert _root(tmp_path, "I'm also getting this error with 0.2.1. How do I fix this?\n") is None


def test_a_sentence_that_quotes_the_error_stays_the_anomaly(tmp_path: Path):
    # NVIDIA/TensorRT-LLM#108 (blind round 11, kept as a guard): the exception glued to the prose.
    rc = _root(
        tmp_path,
        "I try to Build LLaMA 7B using 2-way tensor parallelism.\n"
        "But when I execute run.py I got this error.AssertionError: Engine world size (2) != Runtime world size (1)\n",
    )
    assert rc is not None and rc["line"] == 2 and rc["category"] == "parallel_layout", rc


_NIXL_96 = (
    "Loaded plugin UCX\n"
    "Traceback (most recent call last):\n"
    '  File "/home/ubuntu/jiayi/nixl/test/python/nixl_api_test.py", line 32, in <module>\n'
    '    nixl_agent1 = nixl_agent("target")\n'
    "                  ^^^^^^^^^^^^^^^^^^^^\n"
    "nixl._bindings.nixlBackendError: NIXL_ERR_BACKEND\n"
)


def test_a_bindings_lower_camel_exception_ends_its_traceback(tmp_path: Path):
    # ai-dynamo/nixl#96 (the round's own excerpt, frames trimmed; no second report found): pybind11's
    # `nixlBackendError` is the exception line, not the `Traceback` header above it.
    rc = _root(tmp_path, _NIXL_96)
    assert rc is not None and rc["line"] == 6, rc


_VLLM_9290 = (
    "ERROR 10-11 12:27:29 engine.py:157] OutOfMemoryError('CUDA out of memory. Tried to allocate 138.00 MiB. GPU 0 "
    "has a total capacity of 79.15 GiB of which 2.19 MiB is free.')\n"
    "ERROR 10-11 12:27:29 engine.py:157] Traceback (most recent call last):\n"
    'ERROR 10-11 12:27:29 engine.py:157]   File "/home/varun/code/vllm-bench/vllm/vllm/engine/multiprocessing/engine'
    '.py", line 155, in start\n'
    "ERROR 10-11 12:27:29 engine.py:157]     self.run_engine_loop()\n"
    'ERROR 10-11 12:27:29 engine.py:157]   File "/home/varun/code/vllm-bench/vllm/vllm/engine/multiprocessing/engine'
    '.py", line 218, in run_engine_loop\n'
    "ERROR 10-11 12:27:29 engine.py:157]     request_outputs = self.engine_step()\n"
)


def test_the_traceback_printed_under_a_logged_exception_gives_its_phase(tmp_path: Path):
    # vllm-project/vllm#9290 (the round's own excerpt, its message shortened; no second report found):
    # the OOM is logged first and its own traceback under it runs through `engine_step`.
    rc = _root(tmp_path, _VLLM_9290)
    assert rc is not None and rc["line"] == 1 and rc["category"] == "oom_runtime", rc
    assert rc["phase"]["value"] == "runtime", rc["phase"]


def test_triton_inference_server_is_not_the_kernel_compiler(tmp_path: Path):
    # vllm-project/vllm#1647 (the round's own line): Triton Inference Server's vLLM backend, not triton-lang.
    rc = _root(
        tmp_path,
        "UNAVAILABLE: Internal: AssertionError: vLLM Triton backend must be configured to use decoupled model "
        "transaction policy\n",
    )
    assert rc is not None and rc["category"] == "other", rc


def test_the_gateways_reply_is_its_own_signature(tmp_path: Path):
    # vllm-project/aibrix#1449 (the round's own line): "Connection refused" here is HTTP, not NCCL.
    rc = _root(
        tmp_path,
        "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure, "
        "transport failure reason: delayed connect error: Connection refused\n",
    )
    assert rc is not None and rc["signature"] == "gateway-no-upstream" and rc["category"] == "other", rc
