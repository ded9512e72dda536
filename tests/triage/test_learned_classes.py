"""The classes learned from blind round 6 (issue 10), through the public CLI (`triage --json`).

Each class is held by a real log of a report OTHER than the round-6 one it was learned from where one
was found (the report is named per case; all are listed in tests/data/triage/SOURCES.md, "family
growth"), so the test checks the class, not one log's wording. Lines are as posted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vllm_medic.cli import app
from vllm_medic.triage.normalize import normalize_line

runner = CliRunner()


def _triage(tmp_path: Path, text: str) -> dict:
    log = tmp_path / "x.log"
    log.write_text(text, encoding="utf-8")
    r = runner.invoke(app, ["triage", str(log), "--json"])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)


# vllm-project/vllm#19865: NCCL's wrapper, then the CUDA failure it announces (GPU memory, not NCCL).
NCCL_LAST_ERROR_OOM = """\
(VllmWorker rank=3 pid=15164) ERROR 06-19 07:06:13 [multiproc_executor.py:527] torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.26.2
(VllmWorker rank=3 pid=15164) ERROR 06-19 07:06:13 [multiproc_executor.py:527] ncclUnhandledCudaError: Call to CUDA function failed.
(VllmWorker rank=3 pid=15164) ERROR 06-19 07:06:13 [multiproc_executor.py:527] Last error:
(VllmWorker rank=3 pid=15164) ERROR 06-19 07:06:13 [multiproc_executor.py:527] Cuda failure 2 'out of memory'
(VllmWorker rank=3 pid=15164) ERROR 06-19 07:06:13 [multiproc_executor.py:527]
ERROR 06-19 07:06:13 [core.py:515] EngineCore failed to start.
"""
# vllm-project/vllm#13340: answered once, then every call refused.
TRAILING_400 = """\
INFO:     127.0.0.1:59042 - "POST /v1/chat/completions HTTP/1.1" 200 OK
INFO 02-15 22:09:59 engine.py:275] Added request chatcmpl-803293759b1e415caefd7845b3fa8352.
INFO 02-15 22:10:03 metrics.py:455] Avg prompt throughput: 33.4 tokens/s, Avg generation throughput: 37.8 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%.
INFO:     127.0.0.1:59042 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request
"""
# vllm-project/vllm#11834: an appended log whose first run stops in order and restarts.
RESTART = """\
[2025-01-08 15:00:27] 7cf7b77579-xsp97 >> INFO:     [127.0.0.1:47420](http://127.0.0.1:47420/) - "POST /v1/chat/completions HTTP/1.1" 200 OK
[2025-01-08 15:00:27] 7cf7b77579-xsp97 >> INFO 01-07 23:00:27 launcher.py:57] Shutting down FastAPI HTTP server.
[2025-01-08 15:00:31] 7cf7b77579-xsp97 >> INFO:     Shutting down
[2025-01-08 15:00:39] 7cf7b77579-xsp97 >> INFO:     Application shutdown complete.
[2025-01-08 15:00:50] 7cf7b77579-xsp97 >> INFO 01-07 23:00:50 api_server.py:585] vLLM API server version 0.6.4.post1
"""


def test_a_wrapper_gives_way_to_the_cause_it_announces(tmp_path):
    rc = _triage(tmp_path, NCCL_LAST_ERROR_OOM)["root_cause"]
    assert rc["line"] == 4 and rc["signature"] == "nccl-cuda-oom"
    assert rc["category"] == "oom_startup"
    assert "x.log:1) only announces it" in rc["why"]


def test_a_wrapper_whose_cause_agrees_keeps_the_earlier_line(tmp_path):
    """huggingface/text-embeddings-inference-style Inductor wrapper (corpus `infinity-31`): the
    ImportError it announces is image_dependency too, so the wrapper line stands."""
    text = (
        "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
        "ImportError: cannot import name 'triton_key' from 'triton.compiler.compiler' "
        "(/opt/conda/lib/python3.10/site-packages/triton/compiler/compiler.py)\n"
    )
    rc = _triage(tmp_path, text)["root_cause"]
    assert rc["line"] == 1 and rc["category"] == "image_dependency"


def test_a_file_that_ends_refusing_requests_is_one_low_confidence_finding(tmp_path):
    d = _triage(tmp_path, TRAILING_400)
    rc = d["root_cause"]
    assert rc["line"] == 4 and rc["signature"] == "access-4xx" and rc["confidence"] == 0.25
    assert "none answered 2xx after line 4" in rc["title"]
    assert d["exit_code"] == 1


def test_a_refusal_followed_by_answers_is_not_a_failure(tmp_path):
    lines = TRAILING_400.splitlines()
    healthy = "\n".join([lines[3], lines[0], lines[2]]) + "\n"  # 400, then 200 again
    d = _triage(tmp_path, healthy)
    assert d["root_cause"] is None and d["exit_code"] == 0


def test_an_unexplained_restart_is_reported_with_the_lowest_confidence(tmp_path):
    d = _triage(tmp_path, RESTART)
    rc = d["root_cause"]
    assert rc["line"] == 2 and rc["category"] == "other" and rc["confidence"] == 0.15
    assert "started again" in rc["title"] and "line 5" in rc["why"]
    assert any("kubectl describe pod" in step for step in d["fix"])
    stopped_only = "\n".join(RESTART.splitlines()[:4]) + "\n"  # stopped, never restarted here
    assert _triage(tmp_path, stopped_only)["root_cause"] is None


def test_metrics_zero_hits_count_only_under_nonzero_queries(tmp_path):
    # vllm-project/vllm#51198 (as pasted), and the same counters of a server that saw no request.
    rc = _triage(
        tmp_path, "vllm:prefix_cache_queries_total  1131\nvllm:prefix_cache_hits_total     0      -> 0% hit\n"
    )["root_cause"]
    assert rc["line"] == 2 and rc["category"] == "prefix_cache"
    fresh = _triage(tmp_path, "vllm:prefix_cache_queries_total 0.0\nvllm:prefix_cache_hits_total 0.0\n")
    assert fresh["root_cause"] is None and fresh["exit_code"] == 0


@pytest.mark.parametrize(
    ("text", "line", "category", "decider"),
    [
        # sgl-project/sglang#8102: the hierarchical cache's host pool does not fit.
        (
            "ValueError: Not enough host memory available. Requesting 40.00 GB but only have 44.87 GB "
            "free. Please reduce the size of the hierarchical cache.\n",
            1,
            "prefix_cache",
            "hierarchical cache",
        ),
        # vllm-project/vllm#27697: the offloading connector speaks; only its logger name says so.
        (
            "(EngineCore_DP0 pid=1312) WARNING 10-28 07:03:32 [offloading_connector.py:281] Cannot store 21 blocks\n",
            1,
            "prefix_cache",
            "emitter",
        ),
        # sgl-project/sglang#27215: 320k tokens evictable, 4096 asked: eviction failed, not memory.
        (
            "RuntimeError: Prefill out of memory. Try to lower your batch size. Try to allocate 4096 tokens.\n"
            "Available full tokens: 320512 (full_available_size=192 + full_evictable_size_=320320)\n",
            1,
            "prefix_cache",
            "evictable >= 4096 requested",
        ),
    ],
)
def test_cache_machinery_outranks_memory_on_its_own_evidence(tmp_path, text, line, category, decider):
    rc = _triage(tmp_path, text)["root_cause"]
    assert rc["line"] == line and rc["category"] == category and rc["family"] == "cache-machinery"
    assert decider in rc["why"]


def test_a_pool_that_had_nothing_to_evict_is_memory(tmp_path):
    """sgl-project/sglang#4602: the same SGLang wording, but nothing was evictable: memory ran out."""
    text = (
        "RuntimeError: Decode out of memory. Try to lower your batch size.\n"
        "Try to allocate 148 tokens.\n"
        "Avaliable tokens: 2048\n"
        "self.token_to_kv_pool_allocator.available_size()=2048\n"
        "self.tree_cache.evictable_size()=0\n"
    )
    rc = _triage(tmp_path, text)["root_cause"]
    assert rc["family"] == "memory" and rc["category"] == "oom_runtime"  # "Decode": runtime, picked


def test_the_same_words_without_a_cache_emitter_are_not_cache_machinery(tmp_path):
    """No family verdict without the cache's own emitter; the words may only make it lean (layer
    novelty, low confidence, `why` says so — data/families.yaml `lean_threshold`)."""
    rc = _triage(tmp_path, "WARNING 10-28 07:03:32 [worker.py:281] Cannot store 21 blocks\n")["root_cause"]
    assert rc is not None and rc["family"] is None and rc["layer"] == "novelty"
    if rc["category"] == "prefix_cache":
        assert "leans to family `cache-machinery`" in rc["why"] and rc["confidence"] <= 0.4


@pytest.mark.parametrize(
    ("text", "line", "category", "signature"),
    [
        # vllm-project/vllm-ascend#486 (learned) — the EI code names the cause, the wrapper above does not.
        (
            "[rank1]: RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function "
            "error: HcclAllreduce, error code is 6\n"
            "[rank1]: [ERROR] 2025-04-08-18:07:20 (PID:1292363, Device:1, RankID:1) ERR01100 OPS call acl api failed.\n"
            "[rank1]: EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out. Reason: "
            "Remote Rank did not send the data in time. Please check the reason for the rank being stuck\n",
            3,
            "nccl_network",
            "ascend-hccl-error",
        ),
        # ofsoundof/GRL-Image-Restoration#27: torch's c10d store client cannot reach the master.
        (
            "trainer/0 [1]:[W socket.cpp:558] [c10d] The client socket has failed to connect to "
            "[::ffff:0.0.0.5]:40323 (errno: 110 - Connection timed out).\n",
            1,
            "nccl_network",
            "gloo-socket",
        ),
        # hiyouga/EasyR1#185: Ray's memory monitor — host RAM, not "GPU out of memory". Runtime since
        # round 13 (data/phase.yaml): the monitor kills what grew while tasks ran — here 244 of 320
        # log-prob steps in (the start-up default had called it oom_startup).
        (
            "Compute log probs:  76%|########  | 244/320 [08:56<02:05,  1.65s/it]\n"
            "(raylet) [2025-04-02 15:02:00,117 E 135782 135782] (raylet) node_manager.cc:3069: 1 Workers "
            "(tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at "
            "node (ID: 351e406b196f66bb45eaad02a3b8b4725babfa8cc12949432f7ad7d8, IP: 10.95.143.76) over the "
            "last time period.\n",
            2,
            "oom_runtime",
            "ray-memory-monitor-kill",
        ),
        # sasha0552/pascal-pkgs-ci#13: vLLM installed under another name; "No platform" follows from it.
        (
            "WARNING 03-14 23:02:37 __init__.py:26] The vLLM package was not found, so its version could not "
            "be inspected. This may cause platform detection to fail.\n"
            "INFO 03-14 23:02:38 __init__.py:211] No platform detected, vLLM is running on UnspecifiedPlatform\n",
            1,
            "image_dependency",
            "vllm-package-metadata-missing",
        ),
        # NVIDIA/TensorRT-LLM#1670 form in vllm-project/vllm#18446: GPU memory inside a collective.
        (
            "(VllmWorker rank=7 pid=240) Cuda failure 'out of memory'\n",
            1,
            "oom_startup",
            "nccl-cuda-oom",
        ),
    ],
)
def test_learned_signatures_on_other_reports(tmp_path, text, line, category, signature):
    rc = _triage(tmp_path, text)["root_cause"]
    assert (rc["line"], rc["category"], rc["signature"]) == (line, category, signature)


@pytest.mark.parametrize(
    ("text", "category"),
    [
        # vllm-project/vllm#36802 (T4) and #12498 (MI300X): a Triton kernel over the shared-memory limit.
        (
            "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 66560, "
            "Hardware limit: 65536. Reducing block sizes or `num_stages` may help.\n",
            "image_dependency",
        ),
        # vllm-project/vllm-ascend#2712: HCCL communicator init, as torch_npu words it.
        (
            "(VllmWorker rank=1 pid=7226) ERROR 09-03 03:02:37 [multiproc_executor.py:522] RuntimeError: "
            "create_config:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:148 HCCL function error: "
            "hcclCommInitRootInfoConfig(numRanks, &rootInfo, rank, config, &(comm->hcclComm_)), error code is 1\n",
            "nccl_network",
        ),
    ],
)
def test_learned_family_words_on_other_reports(tmp_path, text, category):
    rc = _triage(tmp_path, text)["root_cause"]
    assert rc["layer"] == "family" and rc["category"] == category


def test_aiter_type_hint_notices_do_not_make_a_healthy_log_fail(tmp_path):
    """vllm-project/vllm#52312: AITER JIT notices around a healthy start-up (ROCm/aiter#354: "just
    aiter internal warning, you can just ignore it")."""
    text = (
        "(APIServer pid=7) INFO:     Application startup complete.\n"
        "(Worker_TP3_EP3 pid=918) [aiter] import [module_gemm_a8w8_blockscale_cktile] under "
        "/usr/local/lib/python3.12/dist-packages/aiter/jit/module_gemm_a8w8_blockscale_cktile.so\n"
        "(Worker_TP3_EP3 pid=918) [aiter] type hints mismatch, override to --> gemm_a8w8_blockscale_cktile("
        "XQ: torch.Tensor, WQ: torch.Tensor, x_scale: torch.Tensor, w_scale: torch.Tensor, Out: torch.Tensor, "
        "preshuffleB: bool = False, splitK: int = 0, kernelName: str = '') -> torch.Tensor\n"
    )
    d = _triage(tmp_path, text)
    assert d["root_cause"] is None and d["exit_code"] == 0


def test_other_servers_ready_lines_evidence_a_runtime_oom(tmp_path):
    """EricLBuehler/mistral.rs#44: "Serving on http://…" before the CUDA driver OOM."""
    text = (
        "Model loaded.\n"
        "Serving on http://0.0.0.0:1234.\n"
        "thread '<unnamed>' panicked at mistralrs-core/src/pipeline/mistral.rs:409:17:\n"
        'Model failed with error `DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")`. Please raise an issue.\n'
    )
    rc = _triage(tmp_path, text)["root_cause"]
    assert rc["category"] == "oom_runtime" and rc["phase"]["evidenced"] is True


def test_syslog_escaped_colour_codes_and_emitters_are_peeled():
    ev = normalize_line("#033[2m#033[33m(raylet)#033[0m node_manager.cc:3007: 2 Workers (tasks /")
    assert ev.message.startswith("(raylet) node_manager.cc")
    ev = normalize_line("[W socket.cpp:697] [c10d] The client socket has failed to connect to x:1")
    assert ev.message.startswith("The client socket") and ev.origin == "socket.cpp:697 [c10d]"
    ev = normalize_line(
        "(EngineCore_DP0 pid=1) WARNING 10-28 07:03:32 [offloading_connector.py:281] Cannot store"
    )
    assert ev.origin == "offloading_connector.py:281"
