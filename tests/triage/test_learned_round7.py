"""The classes learned from blind round 7 (issue 10), through the public CLI (`triage --json`).

Each class is held by a real log from a report OTHER than the round-7 one it was learned from (the
report is named per case; lines are as posted, an excerpt trimmed at most). Round 7's own score
before learning is tests/data/triage/blind/round7.score.txt.
"""

from __future__ import annotations

import pytest
from triage_json import root_cause as _root

CASES = [
    # ggml-org/llama.cpp#14421 (title line): rocBLAS has no Tensile library for gfx1036.
    (
        "rocBLAS error: Cannot read /opt/rocm-6.4.1/lib/llvm/bin/../../../lib/rocblas/library/"
        "TensileLibrary.dat: No such file or directory for GPU arch : gfx1036\n",
        1,
        "image_dependency",
    ),
    # vllm-project/vllm-ascend#750 (title line): torch_npu op plugin built against another ATB.
    (
        "OSError: /home/ma-user/anaconda3/envs/MindSpore/lib/python3.9/site-packages/torch_npu/lib/"
        "libop_plugin_atb.so: undefined symbol: _ZN3atb15CreateOperationINS_5infer14GroupTopkParamEEEiRKT_PPNS\n",
        1,
        "image_dependency",
    ),
    # google-research/t5x#1004: the TPU runtime driver is not found.
    (
        "I0106 20:23:28.534243 140414174514240 xla_bridge.py:355] Unable to initialize backend 'tpu_driver': "
        "NOT_FOUND: Unable to find driver in registry given worker: \n",
        1,
        "driver_cuda",
    ),
]


# Classes learned after the round was re-scored (helper i10-general): a second real report of each.
CASES += [
    # torchtune#2676: a traceback cut at its raise statement, the frame line hard-wrapped by the
    # terminal (`line 11` / `9, in _call_store`); the c10d rendezvous frames say what failed.
    (
        '    base64_state: bytes = self._call_store("get", self._key)                                                                               \n'
        '  File "/home/users/vs-venv/lib/python3.10/site-packages/torch/distributed/elastic/rendezvous/'
        'c10d_rendezvous_backend.py", line 11\n'
        "9, in _call_store                 \n"
        "    raise RendezvousConnectionError(\n",
        4,
        "nccl_network",
    ),
    # pytorch/pytorch#67581: torchelastic's error file, the exception quoted inside the JSON dump.
    (
        "ERROR:torch.distributed.elastic.multiprocessing.errors.error_handler:{\n"
        '  "message": {\n'
        '    "message": "RendezvousConnectionError: The connection to the C10d store has failed. See inner '
        'exception for details.",\n',
        3,
        "nccl_network",
    ),
    # huggingface/text-generation-inference#1356: the router's request spans put the OOM at runtime.
    (
        "2023-12-18T02:36:47.730476Z ERROR batch{batch_size=1}:prefill:prefill{id=7570 size=1}:"
        "prefill{id=7570 size=1}: text_generation_client: router/client/src/lib.rs:33: Server error: CUDA out "
        "of memory. Tried to allocate 18.00 MiB. GPU 0 has a total capacty of 79.11 GiB of which 14.62 MiB is "
        "free. Process 124797 has 79.08 GiB memory in use.\n",
        1,
        "oom_runtime",
    ),
    # NVIDIA/nccl-tests#166: NCCL's INFO error-return trace, with no WARN kept in the excerpt.
    (
        "ubuntu:39964:40044 [0] NCCL INFO transport/net.cc:288 -> 3\n"
        "ubuntu:39964:40044 [0] NCCL INFO transport.cc:148 -> 3\n"
        "ubuntu:39964:40044 [0] NCCL INFO init.cc:1089 -> 3\n",
        1,
        "nccl_network",
    ),
    # agentgateway/agentgateway#1719: a Go panic; the SIGSEGV line under it is its detail.
    (
        "panic: runtime error: invalid memory address or nil pointer dereference\n"
        "[signal SIGSEGV: segmentation violation code=0x1 addr=0x0 pc=0x2a02837]\n",
        1,
        "other",
    ),
    # intel/ipex-llm#12922: SIGILL, the build uses instructions the CPU lacks.
    (
        "start-vllm-service.sh: line 18:  1669 Illegal instruction     (core dumped) python -m "
        "ipex_llm.vllm.cpu.entrypoints.openai.api_server --served-model-name $served_model_name --port 8001\n",
        1,
        "image_dependency",
    ),
    # vllm-project/vllm-ascend#2210: torch_npu's ACL init rejects the installed CANN.
    (
        "Traceback (most recent call last):\n"
        '  File "<stdin>", line 1, in <module>\n'
        '  File "/home/xxx/miniconda3/envs/atb/lib/python3.10/site-packages/torch_npu/npu/utils.py", line 64, '
        "in set_device\n"
        "    torch_npu._C._npu_setDevice(device_id)\n"
        "RuntimeError: SetPrecisionMode:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:155 NPU function error: "
        "at_npu::native::AclSetCompileopt(aclCompileOpt::ACL_PRECISION_MODE, precision_mode), error code is 500001\n"
        "[ERROR] 2025-08-05-08:05:26 (PID:504068, Device:0, RankID:-1) ERR00100 PTA call acl api failed\n",
        5,
        "image_dependency",
    ),
]


@pytest.mark.parametrize("text,line,category", CASES, ids=[c[2] + str(i) for i, c in enumerate(CASES)])
def test_round7_class_on_another_report(tmp_path, text, line, category):
    rc = _root(tmp_path, text)
    assert rc is not None, "no root cause"
    assert (rc["line"], rc["category"]) == (line, category), rc
    assert rc["why"], rc


def test_tgi_request_span_is_runtime_evidence(tmp_path):
    rc = _root(tmp_path, CASES[-5][0])
    assert rc["phase"]["evidenced"] and rc["phase"]["value"] == "runtime", rc["phase"]


def test_served_traffic_of_other_engines_is_runtime_evidence(tmp_path):
    # Synthetic join of two real lines: SGLang's decode log with running requests
    # (sgl-project/sglang#26248), then an OOM line (vllm-project/vllm#1614).
    text = (
        "[03:51:54] Decode batch, #running-req: 6, #full token: 2435072, full token usage: 0.92, "
        "swa token usage: 0.09, gen throughput (token/s): 24.33\n"
        "RuntimeError: CUDA error: out of memory\n"
    )
    rc = _root(tmp_path, text)
    assert (rc["line"], rc["category"]) == (2, "oom_runtime"), rc
    assert rc["phase"]["evidenced"] and "Decode batch" in rc["phase"]["evidence"][0]


def test_import_time_frames_are_not_the_entry_point_of_python_dash_m():
    from vllm_medic.triage.families import load_families

    book = load_families()
    frames_m = [
        "<frozen runpy>:_run_module_as_main",
        "<frozen runpy>:_run_code",
        "/x/site-packages/vllm/entrypoints/openai/api_server.py:<module>",
        "/x/site-packages/uvloop/__init__.py:run",
    ]
    verdict = book.score("ValueError: something else", frames_m, cut=True)
    assert verdict is None or verdict.family.id != "package-mismatch", verdict
    frames_import = ["/app/main.py:<module>", "/x/site-packages/vllm/__init__.py:<module>"]
    verdict = book.score("ValueError: a version must be given", frames_import, cut=True)
    assert verdict is not None and verdict.family.id == "package-mismatch", verdict
