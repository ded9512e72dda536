"""Absence only from whole sources: what issue 11 found on real pastes, through `check --from` / `--snapshot`.

Snapshots marked partial stand for what collect's parsers record for a `lsmod | grep X` paste or an EXCERPT
(Snapshot.partial); the files are real captures (tests/data/collect, sources in its SOURCES.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from vllm_medic.cli import app

DATA = Path(__file__).parents[1] / "data" / "collect"
IB_DOWN_ROCE_UP = DATA / "ibdev2netdev" / "12hca-column-t-with-comments-ib-down-roce-up-cluster-health-4.txt"
B200_TABLE = DATA / "nvidia-smi" / "b200-8gpu-575.57.08-cuda12.9-idle-no-process-section-modal-glossary.txt"
MULTI_NODE = (
    "vllm serve moonshotai/Kimi-K3 --trust-remote-code -tp 8 --data-parallel-size 16 "
    "--data-parallel-size-local 8 --enable-expert-parallel"
)
runner = CliRunner()


def from_snapshot(tmp_path: Path, snap: dict, *args: str) -> dict[str, dict]:
    p = tmp_path / "snapshot.json"
    p.write_text(json.dumps(snap))
    res = runner.invoke(app, ["check", "--snapshot", str(p), "--json", *args])
    assert res.exit_code in (0, 1), res.output
    return {f["id"]: f for f in json.loads(res.stdout)["findings"]}


def from_dir(tmp_path: Path, files: dict[str, str | Path], *args: str) -> dict[str, dict]:
    d = tmp_path / "captured"
    d.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (d / name).write_text(content.read_text() if isinstance(content, Path) else content)
    res = runner.invoke(app, ["check", "--from", str(d), "--json", *args])
    assert res.exit_code in (0, 1), res.output
    return {f["id"]: f for f in json.loads(res.stdout)["findings"]}


GREP_PEERMEM = {"kernel_modules": ["nvidia_peermem"], "partial": {"lsmod": "`lsmod | grep peermem` paste"}}


def test_a_grepped_lsmod_never_says_mlx5_is_not_loaded_nor_that_there_is_no_mellanox_device(tmp_path):
    fs = from_snapshot(tmp_path, {"kernel_modules": [], "partial": {"lsmod": "`lsmod | grep peermem` paste"}})
    net5 = fs["NET005"]
    assert net5["severity"] == "not_checked", net5
    text = net5["title"] + " ".join(net5["evidence"])
    assert "not loaded" not in text and "No Mellanox" not in text
    assert "lsmod: partial" in text and "(the whole list, not a grep)" in net5["fix"][-1]
    # with RDMA devices listed, the grepped paste still cannot show mlx5_ib missing
    snap = dict(GREP_PEERMEM, rdma=[{"ib_dev": "mlx5_0", "port": 1, "netdev": "ibp26s0", "state": "Up"}])
    net5 = from_snapshot(tmp_path, snap)["NET005"]
    assert net5["severity"] == "not_checked" and "whether mlx5_core, mlx5_ib is loaded" in net5["title"]


def test_a_grepped_lsmod_that_shows_peermem_is_evidence_of_peermem(tmp_path):
    fs = from_snapshot(tmp_path, dict(GREP_PEERMEM, env={"NCCL_DMABUF_ENABLE": "0"}))
    assert fs["NET004"]["severity"] == "pass" and "nvidia_peermem loaded" in fs["NET004"]["title"]


def test_rdma_host_without_peermem_gets_a_finding_even_with_dmabuf_on(tmp_path):
    mods = ["nvidia", "nvidia_uvm", "mlx5_core", "mlx5_ib", "ib_core"]
    # open modules and a new kernel: dma-buf carries GPUDirect RDMA, said with the facts
    snap = {
        "kernel_modules": mods,
        "host": {"kernel": "6.8.0-1015-nvidia"},
        "extra": {"open_kernel_module": True},
        "driver": {"version": "580.65.06", "status": "ok"},
    }
    f = from_snapshot(tmp_path, snap)["NET004"]
    assert f["severity"] == "info" and "relies on dma-buf" in f["title"], f
    ev = " ".join(f["evidence"])
    assert "kernel 6.8.0-1015-nvidia (>= 5.12)" in ev and "open NVIDIA kernel modules" in ev
    assert "errno 524" in f["fix"][0]
    # proprietary modules: no dma-buf, no peermem -> no GPUDirect RDMA; a multi-node launch makes it a fail
    snap["extra"]["open_kernel_module"] = False
    f = from_snapshot(tmp_path, snap, "--launch", MULTI_NODE)["NET004"]
    assert f["severity"] == "fail" and "No GPUDirect RDMA path" in f["title"], f
    assert "proprietary NVIDIA kernel modules (dma-buf needs the open ones)" in " ".join(f["evidence"])
    assert "modprobe nvidia_peermem" in f["fix"][0]
    # kernel and flavour not captured: a warning that says what to capture
    f = from_snapshot(tmp_path, {"kernel_modules": mods})["NET004"]
    assert f["severity"] == "warn" and "whose needs were not captured" in f["title"]
    assert "uname -r" in f["fix"][0]


def test_ipoib_down_on_a_pure_ib_port_is_not_a_link_state(tmp_path):
    # real 12-HCA ibdev2netdev: 8 InfiniBand ports with a Down IPoIB netdev, 4 Ethernet ports (2 Down)
    fs = from_dir(tmp_path, {"ibdev2netdev.txt": IB_DOWN_ROCE_UP}, "--launch", MULTI_NODE)
    f = fs["NET006"]
    assert f["severity"] == "warn" and f["title"] == "2 of 12 RDMA (RoCE/Ethernet) ports are not Up", f
    ev = " ".join(f["evidence"])
    assert "mlx5_2 port 1 ==> enp27s0f1np1 (Down)" in ev and "ibp26s0" not in ev.split("more InfiniBand")[0]
    assert "8 more InfiniBand port(s) show a Down IPoIB netdev" in ev
    # the IB ports alone: not checked, never a warning
    only_ib = "\n".join(line for line in IB_DOWN_ROCE_UP.read_text().splitlines() if "==>  ib" in line) + "\n"
    f = from_dir(tmp_path / "ib", {"ibdev2netdev.txt": only_ib}, "--launch", MULTI_NODE)["NET006"]
    assert f["severity"] == "not_checked" and "8 of 8 InfiniBand ports" in f["title"], f
    assert "ibstat" in f["fix"][0]


def test_port_state_from_ibstat_facts_decides(tmp_path):
    ports = [
        {
            "device": f"mlx5_{i}",
            "port": 1,
            "state": "Active",
            "physical_state": "LinkUp",
            "link_layer": "InfiniBand",
            "source": "ibstat",
        }
        for i in range(8)
    ]
    rdma = [{"ib_dev": f"mlx5_{i}", "port": 1, "netdev": f"ibp{i}s0", "state": "Down"} for i in range(8)]
    f = from_snapshot(tmp_path, {"ib_ports": ports, "rdma": rdma})["NET006"]
    assert f["severity"] == "pass" and "All 8 RDMA ports Active / LinkUp" in f["title"], f
    ports[3].update(state="Down", physical_state="Polling")
    f = from_snapshot(tmp_path, {"ib_ports": ports, "rdma": rdma}, "--launch", MULTI_NODE)["NET006"]
    assert f["severity"] == "warn" and "1 of 8" in f["title"]
    assert "mlx5_3 port 1: State Down, Physical state Polling (InfiniBand)" in " ".join(f["evidence"])


def test_nothing_captured_about_rdma_is_not_checked_not_none_listed(tmp_path):
    fs = from_dir(tmp_path, {"nvidia-smi.txt": B200_TABLE})
    for rule_id in ("NET005", "NET006"):
        f = fs[rule_id]
        assert f["severity"] == "not_checked", f
        assert "none listed" not in f["title"] and "No RDMA" not in f["title"]


def test_an_empty_image_inspect_is_not_a_pass(tmp_path):
    files = {
        "docker-image-inspect.json": "[]\n",
        "launch.txt": "docker run --gpus all vllm/vllm-openai:v0.11.0 --model m\n",
    }
    fs = from_dir(tmp_path, files)
    f = fs["IMG001"]
    assert f["severity"] == "not_checked" and "whether it exists was not checked" in f["title"], f
    assert any("empty list: image not present locally" in e for e in f["evidence"])
    # an inspect with an Id is evidence the image exists
    inspect = '[{"Id": "sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff", "RepoTags": ["vllm/vllm-openai:v0.11.0"]}]'
    f = from_dir(tmp_path / "b", {**files, "docker-image-inspect.json": inspect})["IMG001"]
    assert f["severity"] == "pass" and "exists where it was inspected" in f["title"], f
