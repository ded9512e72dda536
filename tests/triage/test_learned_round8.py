"""The classes learned from blind round 8 (issue 10), through the public CLI (`triage --json`).

Each class is held by a real log from a report OTHER than the round-8 one it was learned from (the
report is named per case; lines are as posted, an excerpt trimmed at most, markdown emphasis
removed). Round 8's own blind scores are tests/data/triage/blind/round8.score*.txt.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from triage_json import root_cause as _root

from vllm_medic.triage.normalize import normalize_line

_LMCACHE_1063 = (
    '  File "/vllm-workspace/LMCache/lmcache/v1/cache_engine.py", line 742, in get_or_create\n'
    "    memory_allocator = cls._Create_memory_allocator(config, metadata)\n"
    "                       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    '  File "/vllm-workspace/LMCache/lmcache/v1/cache_engine.py", line 714, in _Create_memory_allocator\n'
    "    return MixedMemoryAllocator(int(max_local_cpu_size * 1024**3))\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    '  File "/vllm-workspace/LMCache/lmcache/v1/memory_management.py", line 1285, in __init__\n'
    "    buffer = torch.empty(size, dtype=torch.uint8, pin_memory=True)\n"
    "             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "RuntimeError: CUDA error: invalid argument\n"
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
    "might be incorrect.\n"
)

_NCCL_TESTS_41 = (
    "# nThread 1 nGpus 4 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
    "#\n"
    "# Using devices\n"
    "#   Rank  0 Pid 108039 on ip-0AB85F07 device  0 [0x00] Tesla V100-PCIE-16GB\n"
    "#   Rank  1 Pid 108039 on ip-0AB85F07 device  1 [0x00] Tesla V100-PCIE-16GB\n"
    "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0\n"
    "ip-0AB85F07: Test NCCL failure common.cu:775 'internal error'\n"
)

_MINICPM_312 = (
    "Loading checkpoint shards:  14%|███████                                          | 1/7 [00:13<01:22, "
    "13.68s/it]W0629 00:06:21.246000 140229302286144 torch/distributed/elastic/multiprocessing/api.py:851] "
    "Sending process 29734 closing signal SIGTERM\n"
    "E0629 00:06:24.298000 140229302286144 torch/distributed/elastic/multiprocessing/api.py:826] failed "
    "(exitcode: -9) local_rank: 2 (pid: 29736) of binary: /opt/conda/bin/python3.10\n"
)

CASES = [
    # LMCache/LMCache#1063: a paste that starts inside the traceback (no header); the pinned-buffer
    # allocation of LMCache's CPU backend fails with a CUDA error whose words say nothing of the cache.
    ("lmcache-allocator", _LMCACHE_1063, 10, "prefix_cache", None),
    # sgl-project/sglang#23696 (the crash as the PR names it): the radix tree's invariant broken.
    (
        "radix-tree-invariant",
        "AssertionError: parent does not have child key\n",
        1,
        "prefix_cache",
        None,
    ),
    # bennettoxford/openprescribing#5431: systemd reports the OOM killer in its own words.
    (
        "systemd-oom-killer",
        "2026-02-08T00:40:07.136582+00:00 largeweb2 systemd[1]: user-1021.slice: A process of this unit has "
        "been killed by the OOM killer.\n",
        1,
        "oom_",
        None,
    ),
    # showlab/EgoVLP#21: torchrun's child SIGKILLed (exit code -9).
    (
        "torchrun-sigkill",
        "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 "
        "(pid: 407727) of binary: /fs/nexus-scratch/sanjoyc/anaconda/envs/egovlp/bin/python\n",
        1,
        "oom_",
        None,
    ),
    # OpenBMB/MiniCPM-V#312: the same kill while the checkpoint shards load (the bar is glued to the
    # first log line): start-up, evidenced by the loading line above it.
    ("sigkill-while-loading", _MINICPM_312, 2, "oom_startup", "startup"),
    # modelscope/ms-swift#3739: ranks launched do not match TP x PP (torch's `[rank1]:` prefix).
    (
        "world-size-vs-tp-pp",
        "[rank1]: RuntimeError: world_size (8) is not equal to tensor_model_parallel_size (4) x "
        "pipeline_model_parallel_size (1)\n",
        1,
        "parallel_layout",
        None,
    ),
    # vllm-project/vllm-ascend#486: HCCL's EI0006 socket timeout, the code first and the Ascend
    # `[PID: n] YYYY-MM-DD-HH:MM:SS.mmm.uuu` stamp after it.
    (
        "ascend-ei0006",
        "[rank1]: EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out. Reason: Remote "
        "Rank did not send the data in time. Please check the reason for the rank being stuck\n",
        1,
        "nccl_network",
        None,
    ),
    # NVIDIA/nccl-tests#41: nccl-tests' own failure line after its device table.
    ("nccl-tests-failure", _NCCL_TESTS_41, 7, "nccl_network", None),
    # TideDra/lmm-r1#60: the installed transformers does not know the model's config class.
    (
        "unrecognized-config-class",
        "ValueError: Unrecognized configuration class <class 'transformers.models.qwen2_5_vl."
        "configuration_qwen2_5_vl.Qwen2_5_VLConfig'> for this kind of AutoModel: AutoModelForCausalLM\n",
        1,
        "image_dependency",
        None,
    ),
    # kousw/stable-diffusion-webui-daam#4: the kernel's device-side assertion, before any RuntimeError.
    (
        "kernel-device-assert",
        "C:\\actions-runner\\_work\\pytorch\\pytorch\\builder\\windows\\pytorch\\aten\\src\\ATen\\native\\cuda\\"
        'IndexKernel.cu:91: block: [26,0,0], thread: [32,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && "index '
        'out of bounds"` failed.\n'
        "RuntimeError: CUDA error: device-side assert triggered\n",
        1,
        "other",
        None,
    ),
]


@pytest.mark.parametrize(("name", "text", "line", "category", "phase"), CASES, ids=[c[0] for c in CASES])
def test_learned_round8_class(tmp_path: Path, name: str, text: str, line: int, category: str, phase):
    rc = _root(tmp_path, text)
    assert rc is not None, name
    assert rc["line"] == line, (name, rc)
    assert rc["category"].startswith(category), (name, rc["category"], rc["why"])
    if phase:
        assert rc["phase"]["value"] == phase and rc["phase"]["evidenced"], (name, rc["phase"])


def test_collector_prefixes_are_peeled():
    # Ascend's "[PID: n]" and its dashed stamp (vllm-project/vllm-ascend#5461's layout), srun --label's
    # task number before torch's rank prefix (NVIDIA-NeMo/Speech#14838), OpenMPI's --tag-output.
    ev = normalize_line("[PID: 749] 2025-12-29-03:16:15.787.356 Get_Socket_Timeout(EI0006): Getting socket")
    assert ev.pid == 749 and ev.timestamp is not None and ev.timestamp.microsecond == 787356
    assert ev.message.startswith("Get_Socket_Timeout(EI0006)")
    ev = normalize_line(
        '1:   File "/opt/venv/lib/python3.12/site-packages/lightning/pytorch/trainer/trainer.py", line 974'
    )
    assert ev.rank == 1 and ev.message.startswith('  File "')
    ev = normalize_line("[1,3]<stderr>:RuntimeError: NCCL error")
    assert ev.rank == 3 and ev.message == "RuntimeError: NCCL error"
    # A line that merely starts with a number and a colon keeps it.
    assert normalize_line("404: Not Found").message == "404: Not Found"


def test_an_exception_line_indented_by_the_paste_is_still_a_root(tmp_path: Path):
    # vllm-project/vllm#13640's message, quoted with a two-space indent and hard-wrapped as prose
    # quotes do (the layout of round 8's vllm-42384); a traceback's code lines stay indented.
    rc = _root(
        tmp_path,
        "  ValueError: Weight input_size_per_partition = 14784 is not divisible by\n"
        "  min_thread_k = 128. Consider reducing tensor_parallel_size or running with --quantization gptq.\n",
    )
    assert rc is not None and rc["line"] == 1 and rc["category"] == "parallel_layout", rc
    assert normalize_line("    raise ValueError(msg)").message == "    raise ValueError(msg)"
