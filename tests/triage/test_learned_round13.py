"""Blind round 13, learned by class after its one blind score (round13.score.txt). NOT a blind figure.

Each class is driven through `vllm-medic triage --json`: on a report OTHER than the round's where one was
found (named per case, lines as posted), else on the round-13 log that taught it (said so per case).
The phase cues are data (data/phase.yaml); tests/triage/test_phase_data.py holds their measured default.
Round 13's learned level is held by LEARNED_FLOOR in test_accuracy.py; the figures after learning are
tests/data/triage/blind/round13.after-learning.txt.
"""

from __future__ import annotations

import pytest
from triage_json import blind_case
from triage_json import found_root as _root

# xanmod/linux#411: the NVIDIA kernel module refused by the host kernel's modpost (DKMS build).
_XANMOD_411 = (
    "# MODPOST /var/lib/dkms/nvidia/545.29.06/build/Module.symvers\n"
    "ERROR: modpost: GPL-incompatible module nvidia.ko uses GPL-only symbol '__rcu_read_lock'\n"
    "ERROR: modpost: GPL-incompatible module nvidia.ko uses GPL-only symbol '__rcu_read_unlock'\n"
    "make[3]: *** [scripts/Makefile.modpost:145: /var/lib/dkms/nvidia/545.29.06/build/Module.symvers] Error 1\n"
)

# lamikr/rocm_sdk_builder#246 (AMD_LOG_LEVEL output): HIP's loader names the ISA it has no code object
# for, lines before its hipErrorNoBinaryForGpu.
_ROCM_SDK_BUILDER_246 = (
    ":1:hip_fatbin.cpp           :272 : 3169196830 us: [pid:9111  tid:0x79a41865cb80] Cannot find CO in the "
    "bundle /opt/rocm_sdk_612/lib/libmagma.so for ISA: amdgcn-amd-amdhsa--gfx1101\n"
    ":1:hip_fatbin.cpp           :125 : 3169196832 us: [pid:9111  tid:0x79a41865cb80] Missing CO for these ISAs - \n"
    ":1:hip_fatbin.cpp           :128 : 3169196833 us: [pid:9111  tid:0x79a41865cb80]      amdgcn-amd-amdhsa--gfx1036\n"
    ":3:hip_platform.cpp         :703 : 3169196836 us: [pid:9111  tid:0x79a41865cb80] init: Returned "
    "hipErrorNoBinaryForGpu : continue parsing remaining modules\n"
)

# ollama/ollama#6513: a model file whose hyperparameters the installed runtime's loader refuses.
_OLLAMA_6513 = (
    "[root@ubuntu]$ ollama run magnum-v2:12b-fp16\n"
    "Error: exception error loading model hyperparameters: iinvalid n_rot: 160, expected 128\n"
)


def _case(case_id: str) -> dict:
    return blind_case("round13.jsonl", case_id)


@pytest.mark.parametrize(
    ("log", "line", "category", "why"),
    [
        (_XANMOD_411, 2, "driver_cuda", "nvidia.ko"),
        (_OLLAMA_6513, 2, "image_dependency", "error loading model hyperparameters"),
    ],
    ids=["driver-kernel-module-build", "model-hyperparameters-the-runtime-refuses"],
)
def test_round13_family_words_on_other_reports(tmp_path, log, line, category, why):
    rc = _root(tmp_path, log)
    assert (rc["line"], rc["category"]) == (line, category), rc
    assert why in rc["why"], rc["why"]


def test_the_hip_loader_names_the_missing_code_object_before_its_error_code(tmp_path):
    """The loader's first words for the refusal are the root, not the `hipErrorNoBinaryForGpu` it returns."""
    rc = _root(tmp_path, _ROCM_SDK_BUILDER_246)
    assert (rc["line"], rc["category"], rc["signature"]) == (1, "image_dependency", "no-kernel-image")
    case = _case("rocm-build-4208")
    rc = _root(tmp_path, case["log"])
    assert (rc["line"], rc["category"]) == (case["first_anomaly_line"], case["category"]), rc


@pytest.mark.parametrize(
    ("case_id", "category", "why"),
    [
        # Mooncake's KV store (HiCache's L3 tier) is the cache, not Mooncake's transfer engine (fabric).
        ("sglang-8668", "prefix_cache", "'MooncakeStore'"),
        # ... and a store class without the method the cache calls is the install (package mismatch).
        ("lmcache-1514", "image_dependency", "package-mismatch"),
        # A serving image the manager could not get (gpustack#3802 words it "failed to get vLLM image").
        ("gpustack-3969", "image_dependency", "Failed to get vLLM backend image"),
        # llama.cpp restoring a saved prompt's KV state (`state_read_meta`, with round 10's `state_seq_*`).
        ("llama-cpp-17118", "prefix_cache", "state_read_meta"),
        # The round's own line for the wrapped `not divisible` (its `by` on the next line): the lean.
        ("vllm-48173", "parallel_layout", "not divisible"),
        ("gpu-operator-751", "driver_cuda", "nvidia.ko"),
        ("ollama-6016", "image_dependency", "error loading model hyperparameters"),
    ],
)
def test_round13_classes_on_the_round_logs(tmp_path, case_id, category, why):
    case = _case(case_id)
    rc = _root(tmp_path, case["log"])
    assert (rc["line"], rc["category"]) == (case["first_anomaly_line"], category), rc
    assert why in rc["why"], rc["why"]


def test_a_module_attribute_a_backend_probe_misses_is_not_the_install(tmp_path):
    """JAX probes every backend and logs a missing module attribute for the GPU it does not have (blind
    round 7's jax-22070): only a package CLASS named with its module path says the install differs."""
    case = blind_case("round7.jsonl", "jax-22070")
    assert _root(tmp_path, case["log"])["line"] == case["first_anomaly_line"]
    rc = _root(tmp_path, "ERROR boom: 'NoneType' object has no attribute 'cpu'\n")
    assert rc["category"] != "image_dependency", rc


def test_a_failed_image_of_a_request_is_not_a_serving_image(tmp_path):
    rc = _root(tmp_path, "ERROR 01-01 00:00:00 [x.py:1] Failed to find image tokens in the prompt\n")
    assert rc["category"] != "image_dependency", rc


@pytest.mark.parametrize("case_id", ["vllm-1160", "vllm-2669"])
def test_rays_memory_monitor_kill_picks_runtime(tmp_path, case_id):
    """Ray's memory monitor kills a task once the node's usage crosses its threshold: memory that grew
    while tasks ran. Both labelled cases (blind rounds 6, 7) are runtime by their threads; picked, not
    evidenced."""
    case = blind_case("round6.jsonl" if case_id == "vllm-1160" else "round7.jsonl", case_id)
    rc = _root(tmp_path, case["log"])
    assert rc["category"] == "oom_runtime", rc
    assert rc["phase"]["value"] == "runtime" and rc["phase"]["evidenced"] is False, rc["phase"]


def test_an_rl_trainers_log_prob_step_picks_runtime(tmp_path):
    """verl's `compute_log_prob` / `_forward_micro_batch` recompute log-probabilities of generated
    responses: the run is past its start. The round's excerpt as posted starts below its traceback header,
    which the scan does not fold onto a signature root; with the header the frames count."""
    case = _case("verl-2828")
    rc = _root(tmp_path, "Traceback (most recent call last):\n" + case["log"])
    assert rc["category"] == "oom_runtime", rc
    assert rc["phase"] == {
        "value": "runtime",
        "evidence": ["the traceback runs through `compute_log_prob`, but no served request is shown"],
        "evidenced": False,
    }
