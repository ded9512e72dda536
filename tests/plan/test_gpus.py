"""The GPU table's driver-reported memory is data with a real capture behind each figure."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources
from pathlib import Path

import pytest
import yaml

from vllm_medic.checks.facts import hardware_from_name
from vllm_medic.collect.parsers.nvidia_smi import parse_nvidia_smi_table
from vllm_medic.plan.gpus import GIB, MIB, lookup_gpu

ROOT = Path(__file__).resolve().parents[2]
TABLE = yaml.safe_load(resources.files("vllm_medic.plan").joinpath("gpus.yaml").read_text(encoding="utf-8"))
WITH_CAPTURE = [(name, e) for name, e in TABLE["gpus"].items() if e.get("capture")]


def test_every_driver_figure_has_a_capture():
    missing = [name for name, e in TABLE["gpus"].items() if e.get("reported_mib") and not e.get("capture")]
    assert not missing
    assert {"B300", "H200", "B200", "GB300", "GB200", "H100"} <= {name for name, _ in WITH_CAPTURE}


@pytest.mark.parametrize(("name", "entry"), WITH_CAPTURE, ids=[n for n, _ in WITH_CAPTURE])
def test_reported_mib_is_what_the_captured_nvidia_smi_shows(name, entry):
    table = parse_nvidia_smi_table((ROOT / entry["capture"]).read_text(encoding="utf-8"))
    totals = {g.memory_total_mib for g in table.gpus}
    assert totals == {entry["reported_mib"]}, (name, totals)
    # the captured GPU is this entry's GPU (name -> the recipe hardware key the checks use)
    keys = {hardware_from_name(g.name) for g in table.gpus if g.name}
    own = hardware_from_name(name) or name.lower()
    assert keys <= {own, None}, (name, keys)


def test_b300_is_275040_mib_not_268_gb():
    b300 = lookup_gpu("B300")
    assert b300.memory_bytes == 275_040 * MIB
    assert round(b300.memory_bytes / GIB, 1) == 268.6
    assert b300.memory_bytes - 268 * 10**9 > 18 * GIB  # the old "268 GB" understated it by ~19 GiB


def test_plan_budgets_from_the_driver_figure():
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_medic.cli", "plan", "--weights-gib", "100", "--gpu", "B300", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = json.loads(proc.stdout)
    assert out["inputs"]["gpu_memory_bytes"] == 275_040 * MIB
    assert "275,040 MiB = 268.6 GiB" in out["assumptions"][0]
