"""40-health.yaml in the triage catalogue: Xid / fabric / limits lines from real logs get a health signature,
and a hardware Xid before vLLM's CUDA error is the root cause, the CUDA error its cascade."""

from __future__ import annotations

import json

import pytest
from healthkit import data

from vllm_medic.triage.catalogue import load_catalogue

_IN_CORE = {"cuda-802-fabric-not-ready", "shm-too-small"}  # shm: ahead of disk-full (round 17)


@pytest.fixture(scope="module")
def cat():
    return load_catalogue()


@pytest.mark.parametrize(
    ("rel", "line_no", "sig"),
    [
        ("kernel/dmesg-T-xid-119-gsp-timeout-xe9680-gpud.log", 3, "xid-gpu-hardware-fault"),
        ("kernel/journal-xid-79-fallen-off-bus-rtx5080-ogkm-1151.txt", 2, "xid-gpu-fallen-off-bus"),
        ("kernel/dmesg-fallen-off-bus-no-xid-nvsentinel-155.txt", 3, "xid-gpu-fallen-off-bus"),
        ("kernel/xid-63-row-remapper-stas00.txt", 1, "xid-informational"),
        ("logs/nccl-shm-torchtitan-853.txt", 4, "shm-too-small"),
        ("logs/cuda-802-system-not-ready-pytorch-35710.txt", 2, "cuda-802-fabric-not-ready"),
        ("logs/cuda-802-system-not-ready-pytorch-35710.txt", 3, "cuda-802-fabric-not-ready"),
        ("fabric/systemctl-status-fm-version-mismatch-akash-632.txt", 3, "fabric-manager-version-mismatch"),
        ("fabric/journal-fm-nothing-to-do-gpu-operator-610.txt", 2, "fabric-manager-nothing-to-do"),
    ],
)
def test_real_lines_get_health_signatures(cat, rel, line_no, sig):
    line = data(rel).splitlines()[line_no - 1]
    got = cat.classify(line, [])
    assert got is not None and got.id == sig, (line, got)
    # cuda-802 sits in 00-core, ahead of the generic cuda-no-device that torch's "Unexpected error
    # from cudaGetDeviceCount() ... Error 802" wording would otherwise hit (issue 10).
    assert got.origin == ("catalogue/00-core.yaml" if sig in _IN_CORE else "catalogue/40-health.yaml")


def test_catalogue_loads_health_after_core(cat):
    assert cat.files[:2] == ["catalogue/00-core.yaml", "catalogue/40-health.yaml"]
    ours = [s for s in cat.signatures if s.origin == "catalogue/40-health.yaml"]
    assert all(s.fix for s in ours) and len(ours) >= 10


def test_xid_before_cuda_error_is_the_root(fake_host, tmp_path):
    log = tmp_path / "node0.log"
    kernel = data("kernel/dmesg-T-xid-119-gsp-timeout-xe9680-gpud.log").splitlines()[2]
    vllm = (
        "(VllmWorkerProcess pid=232) ERROR 08-26 09:12:30 [multiproc_executor.py:520] "
        "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)"
    )
    log.write_text(kernel + "\n" + vllm + "\n")  # synthetic composition of two real lines
    proc = fake_host.run_cli("triage", str(log), "--json")
    out = json.loads(proc.stdout)
    assert proc.returncode == 1
    assert out["root_cause"]["signature"] == "xid-gpu-hardware-fault" and out["root_cause"]["line"] == 1
    assert [c["signature"] for c in out["cascade"]] == ["nccl-cuda-error"]
    assert out["fix"][0].startswith("A hardware or driver fault explains a `CUDA error`")


def test_triage_follows_the_xid_catalogue(cat):
    """Triage and `health` judge an Xid the same way: a `fail` Xid is a strong root, anything else is not."""
    from vllm_medic.collect.health.xid import catalogue

    for xid, info in catalogue().items():
        sig = cat.classify(f"[    1.0] NVRM: Xid (PCI:0000:01:00): {xid}, pid=1, name=python3, detail", [])
        assert sig is not None and sig.origin == "catalogue/40-health.yaml", xid
        assert sig.strong == (info.severity == "fail"), (xid, info.severity, sig.id)
    unknown = cat.classify("NVRM: Xid (PCI:0000:01:00): 999, something new", [])
    assert unknown.id == "xid-not-in-catalogue" and not unknown.strong
