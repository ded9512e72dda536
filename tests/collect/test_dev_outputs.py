"""The shared calibration set (eval/dev/tool_outputs), file by file, against what its INDEX.md says.

Every file of that set is copied under tests/data/collect/<kind>/ with the same name; each is put
alone under its canonical file name and read with `collect --from DIR --json`. The expectations
below are the INDEX.md "Key facts" that a snapshot field can hold (power caps, temperatures,
timestamps have no field and are left out). INDEX.md marks EXCERPT / elided / filtered files; those
must come out partial (`!partial` lists the sources recorded in `Snapshot.partial`).

Files of kinds `collect` does not read (nccl-tests, docker-errors) are listed in NOT_COLLECT_SOURCES
with why; `test_dev_set_is_covered` keeps this table in step with the data directory.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from tests.collect.conftest import DATA
from typer.testing import CliRunner

from vllm_medic.cli import app

CANONICAL = {
    "nvidia-smi": "nvidia-smi.txt",
    "nvidia-smi-errors": "nvidia-smi.txt",
    "nvidia-smi-q": "nvidia-smi-q.txt",
    "nvidia-smi-q-x": "nvidia-smi-q.xml",
    "nvidia-smi-query-gpu": "nvidia-smi-query-gpu.csv",
    "nvidia-smi-query-compute-apps": "nvidia-smi-query-compute-apps.csv",
    "nvidia-smi-topo-m": "nvidia-smi-topo-m.txt",
    "ibdev2netdev": "ibdev2netdev.txt",
    "ibstat": "ibstat.txt",
    "ibstatus": "ibstatus.txt",
    "ibv_devinfo": "ibv-devinfo.txt",
    "rdma-link": "rdma-link.txt",
    "ip-link": "ip-link.txt",
    "lsmod": "lsmod.txt",
    "docker-image-inspect": "docker-image-inspect.json",
    "vllm-version": "vllm-version.txt",
    "vllm-collect-env": "vllm-collect-env.txt",
    "rocm-smi": "rocm-smi.txt",
    "amd-smi": "amd-smi.txt",
}

# The dev set's kinds that are not `collect` sources: nothing reads them here.
NOT_COLLECT_SOURCES = {
    "nccl-tests": "benchmark output (all_reduce_perf), not an environment fact: out of collect's scope",
    "docker-errors": "a failed `docker run` message, read by `triage` from logs, not a captured command output",
}

A30 = "vllm-collect-env/vllm-0.11.1.dev-4x-a30-nv4-nic0-driver535.274.02-docker.txt"

# sample (relative to tests/data/collect) -> {path: expected}. Paths: "a.b" digs into dicts,
# "gpus[*].name" maps over a list, "#gpus" is a length, "!errors" / "!partial" list the sources
# recorded in snapshot.errors / snapshot.partial.
DEV: dict[str, dict[str, Any]] = {
    "nvidia-smi/a100-sxm4-40gb-580.126.09-cuda13.0-exclusive-process-bottlerocket-EXCERPT.txt": {
        "driver.version": "580.126.09",
        "driver.cuda_version": "13.0",
        "gpus[*].name": ["NVIDIA A100-SXM4-40GB"] * 2,
        "gpus[*].compute_mode": ["E. Process"] * 2,
        "gpus[*].memory_used_mib": [598, 602],
        "gpus[*].utilization_pct": [11, 7],
        "!partial": ["nvidia-smi"],  # EXCERPT: the table stops inside GPU 1's block
    },
    "nvidia-smi/a100-sxm4-80gb-4gpu-555.42.02-cuda12.5-idle-thamada-gls.txt": {
        "driver.version": "555.42.02",
        "driver.cuda_version": "12.5",
        "gpus[*].name": ["NVIDIA A100-SXM4-80GB"] * 4,
        "gpus[*].memory_used_mib": [1] * 4,
        "gpus[*].memory_total_mib": [81920] * 4,
        "#gpu_processes": 0,
        "extra.gpu_processes_listed": True,  # "No running processes found"
        "!partial": [],
    },
    "nvidia-smi/b200-8gpu-575.57.08-cuda12.9-idle-no-process-section-modal-glossary.txt": {
        "driver.version": "575.57.08",
        "driver.cuda_version": "12.9",
        "gpus[*].name": ["NVIDIA B200"] * 8,
        "gpus[*].memory_used_mib": [0] * 8,
        "gpus[*].memory_total_mib": [183359] * 8,
        "gpus[*].mig_mode": ["Disabled"] * 8,
        "#gpu_processes": 0,
        "extra.gpu_processes_listed": False,  # the Processes section is omitted: unknown, not none
        "!errors": [],
    },
    "nvidia-smi/gb300-4gpu-580.105.08-cuda13.0-oci-bm-gpu-gb300-4.txt": {
        "driver.version": "580.105.08",
        "driver.cuda_version": "13.0",
        "gpus[*].name": ["NVIDIA GB300"] * 4,
        "gpus[*].bus_id": ["00000008:06:00.0", "00000009:06:00.0", "00000018:06:00.0", "00000019:06:00.0"],
        "gpus[*].memory_used_mib": [1] * 4,
        "gpus[*].memory_total_mib": [284208] * 4,
        "#gpu_processes": 0,
        "!partial": [],
    },
    "nvidia-smi/h200-8gpu-570.124.06-cuda12.8-vllm-tp8-8-processes-truncated-names.txt": {
        "driver.version": "570.124.06",
        "driver.cuda_version": "12.8",
        "gpus[*].name": ["NVIDIA H200"] * 8,
        "gpus[*].memory_used_mib": [84474] + [84522] * 6 + [84282],
        "gpus[*].utilization_pct": [1] * 8,
        "gpu_processes[*].pid": [915920, 916338, 916339, 916340, 916341, 916342, 916343, 916344],
        "gpu_processes[*].name": ["...niconda3/envs/vllm/bin/python"] * 8,
        "gpu_processes[*].used_mib": [84464] + [84512] * 6 + [84272],
        "gpu_processes[*].type": ["C"] * 8,
    },
    "nvidia-smi/p100-470.82.01-legacy-narrow-inforom-corrupted-warning.txt": {
        "driver.version": "470.82.01",
        "driver.cuda_version": "11.4",
        "gpus[*].name": ["Tesla P100-PCIE..."],
    },
    "nvidia-smi/rtx6000ada-1gpu-575.57.08-cuda12.9-vllm-enginecore-process-truncated-gpu-name.txt": {
        "driver.version": "575.57.08",
        "driver.cuda_version": "12.9",
        "gpus[*].name": ["NVIDIA RTX 6000 Ada Gene..."],
        "gpus[*].memory_used_mib": [44578],
        "gpus[*].memory_total_mib": [49140],
        "gpu_processes[*].pid": [86711],
        "gpu_processes[*].name": ["VLLM::EngineCore"],
        "gpu_processes[*].used_mib": [44568],
    },
    "nvidia-smi-errors/no-driver-couldnt-communicate-curly-quote-two-lines.txt": {
        "driver.status": "no_driver",
        "#gpus": 0,
    },
    "nvidia-smi-errors/nvml-version-mismatch-570.124.txt": {
        "driver.status": "version_mismatch",
        "driver.nvml_library_version": "570.124",
        "driver.kernel_module_version": None,
    },
    "nvidia-smi-errors/nvml-version-mismatch-580.178-plus-proc-driver-version.txt": {
        "driver.status": "version_mismatch",
        "driver.nvml_library_version": "580.178",
        "driver.kernel_module_version": "580.173.02",
    },
    "nvidia-smi-q/h100-1gpu-545.23.08-cuda12.3-nvidia-smi-a-full-della.txt": {
        "driver.version": "545.23.08",
        "driver.cuda_version": "12.3",
        "extra.nvidia_smi_attached_gpus": 1,
        "gpus[*].name": ["NVIDIA H100 80GB HBM3"],
        "gpus[*].bus_id": ["00000000:19:00.0"],
        "gpus[*].memory_total_mib": [81559],
        "gpus[*].memory_used_mib": [2],
        "gpus[*].ecc_mode": ["Enabled"],
        "gpus[*].ecc_volatile_uncorrectable": [0],
        "gpus[*].ecc_aggregate_uncorrectable": [0],
        "gpus[*].remapped_rows_uncorrectable": [0],
        "gpus[*].remapped_rows_pending": [False],
        "gpus[*].remapped_rows_failure": [False],
        "gpus[*].fabric_state": ["Completed"],
        "gpus[*].fabric_status": ["Success"],
        "#gpu_processes": 0,
        "!partial": [],
    },
    "nvidia-smi-q/h200-1gpu-550.90.12-nvidia-smi-a-full.txt": {
        "driver.version": "550.90.12",
        "driver.cuda_version": "12.4",
        "gpus[*].name": ["NVIDIA H200"],
        "gpus[*].memory_total_mib": [143771],
        "gpus[*].memory_used_mib": [1],
        "gpus[*].ecc_mode": ["Enabled"],
        "gpus[*].remapped_rows_correctable": [0],
        "gpus[*].remapped_rows_uncorrectable": [0],
        "gpus[*].fabric_state": ["Completed"],
        "gpus[*].fabric_status": ["Success"],
        "#gpu_processes": 0,
    },
    "nvidia-smi-q-x/a100-sxm4-40gb-mig-510.47.03-v11-netdata.xml": {
        "driver.version": "510.47.03",
        "driver.cuda_version": "11.6",
        "extra.nvidia_smi_attached_gpus": 1,
        "gpus[*].uuid": ["GPU-27b94a00-ed54-5c24-b1fd-1054085de32a"],
        "mig_devices[*].mig_dev": [0, 1],
        "mig_devices[*].gi_id": [1, 2],
        "#gpu_processes": 0,
    },
    "nvidia-smi-query-gpu/h100-pcie-switch-8gpu-clocks.sm-alias-header-590.48.01-elided.csv": {
        "gpus[*].index": [0],
        "gpus[*].name": ["NVIDIA H100 80GB HBM3"],
        "gpus[*].memory_total_mib": [81559],
        "driver.version": "590.48.01",
        "!partial": ["nvidia-smi-query-gpu"],  # "... 8 identical rows ..." is not data
    },
    "nvidia-smi-query-gpu/rtx3090-a6000-used-util-power-plus-empty-compute-apps-header.csv": {
        "gpus[*].name": ["NVIDIA GeForce RTX 3090", "NVIDIA RTX A6000"],
        "gpus[*].memory_used_mib": [1, 1],
        "gpus[*].utilization_pct": [0, 0],
        "#gpu_processes": 0,  # the compute-apps header alone: no processes
    },
    "nvidia-smi-query-compute-apps/rtx3090-timestamp-gpu_name-pid-name-used-noheader-nounits.csv": {
        "gpu_processes[*].pid": [1106871],
        "gpu_processes[*].name": ["/app/llama-server"],
        "gpu_processes[*].used_mib": [23342],
        "!partial": ["nvidia-smi-query-compute-apps"],  # columns inferred: no header, no command
    },
    "nvidia-smi-topo-m/a100-8gpu-nv12-stas00.txt": {
        "#topology.devices": 8,
        "topology.matrix.GPU0.GPU7": "NV12",
        "topology.matrix.GPU7.GPU0": "NV12",
        "topology.matrix.GPU3.GPU4": "NV12",
        "topology.cpu_affinity.GPU0": "0-23",
        "topology.cpu_affinity.GPU4": "24-47",
        "topology.numa_affinity.GPU3": "0",
        "topology.numa_affinity.GPU7": "1",
        "topology.nic_legend": {},
        "!partial": [],
    },
    "nvidia-smi-topo-m/gb200-4gpu-nv18-8nic-mlx5-numa-ranges-openshift.txt": {
        "#topology.devices": 12,
        "topology.matrix.GPU0.GPU3": "NV18",
        "topology.matrix.GPU0.NIC0": "SYS",
        "topology.matrix.GPU3.NIC7": "SYS",
        "topology.matrix.NIC2.NIC3": "PIX",
        "topology.matrix.NIC6.NIC7": "PIX",
        "topology.cpu_affinity.GPU0": "0-71",
        "topology.cpu_affinity.GPU2": "72-143",
        "topology.numa_affinity.GPU0": "0,2-17",
        "topology.numa_affinity.GPU3": "1,18-33",
        "topology.nic_legend.NIC7": "mlx5_7",
        "!partial": [],
    },
    "nvidia-smi-topo-m/h100-8gpu-6nic-empty-cpu-affinity-slurm-cgroup-della.txt": {
        "#topology.devices": 14,
        "topology.cpu_affinity.GPU0": None,  # the empty cell under a Slurm cgroup
        "topology.cpu_affinity.GPU4": "1",
        "topology.numa_affinity.GPU0": "0",
        "topology.matrix.GPU0.NIC0": "PIX",
        "topology.matrix.GPU0.NIC1": "PIX",
        "topology.matrix.GPU4.NIC3": "PIX",
        "topology.matrix.GPU4.NIC4": "PIX",
        "topology.matrix.GPU1.NIC0": "NODE",
        "topology.matrix.GPU7.NIC5": "NODE",
        "!partial": [],
    },
    "nvidia-smi-topo-m/hgx-8gpu-nv18-12nic-pix-single-numa-aihub0007.txt": {
        "#topology.devices": 20,
        "topology.matrix.GPU0.NIC0": "PIX",
        "topology.matrix.GPU3.NIC5": "PIX",
        "topology.matrix.GPU4.NIC6": "PIX",
        "topology.matrix.GPU7.NIC11": "PIX",
        "topology.matrix.GPU3.NIC3": "NODE",
        "topology.matrix.NIC3.NIC4": "PIX",
        "topology.matrix.NIC9.NIC10": "PIX",
        "topology.cpu_affinity.GPU5": "0-191",
        "topology.numa_affinity.GPU7": "0",
        "topology.nic_legend.NIC11": "mlx5_11",
        "!partial": [],
    },
    "ibdev2netdev/hgx-12hca-roce-ens-naming-bond0-aihub0009.txt": {
        "#rdma": 12,
        "rdma[*].netdev": [
            "ens108np0",
            "bond0",
            "ens114np0",
            "ens115np0",
            "ens12f1np1",
            "ens109np0",
            "ens110np0",
            "ens111np0",
            "ens112np0",
            "bond0",
            "ens20f1np1",
            "ens113np0",
        ],
        "rdma[*].state": ["Up"] * 4 + ["Down"] + ["Up"] * 5 + ["Down", "Up"],
    },
    "ibstat/bf3-roce-mlx5_bond_0-1-ethernet-link-layer-excerpt-pplx.txt": {
        "ib_ports[*].device": ["mlx5_bond_0", "mlx5_bond_1"],
        "ib_ports[*].link_layer": ["Ethernet"] * 2,
        "ib_ports[*].state": ["Active"] * 2,
        "ib_ports[*].rate_gbps": [200.0] * 2,
        "ib_ports[*].ca_type": ["MT41692"] * 2,
        "ib_ports[*].firmware": ["32.39.3804"] * 2,
        "ib_ports[*].lid": [0, 0],
        "ib_ports[*].sm_lid": [0, 0],
    },
    "ibstat/h-series-12ca-cx7-ndr400-ib-plus-cx6dx-ethernet-mooncake.txt": {
        "#ib_ports": 12,
        "ib_ports[*].device": [f"mlx5_{n}" for n in (0, 1, 10, 11, 2, 3, 4, 5, 6, 7, 8, 9)],
        "ib_ports[*].link_layer": ["InfiniBand", "Ethernet"]
        + ["InfiniBand"] * 2
        + ["Ethernet"]
        + ["InfiniBand"] * 2
        + ["InfiniBand"] * 2
        + ["Ethernet"] * 2
        + ["InfiniBand"],
        "ib_ports[*].state": ["Active", "Down", "Active", "Active", "Down"] + ["Active"] * 7,
        "ib_ports[*].physical_state": ["LinkUp", "Disabled", "LinkUp", "LinkUp", "Disabled"] + ["LinkUp"] * 7,
        "ib_ports[*].rate_gbps": [
            400.0,
            40.0,
            400.0,
            400.0,
            40.0,
            400.0,
            400.0,
            400.0,
            400.0,
            100.0,
            100.0,
            400.0,
        ],
        "ib_ports[*].sm_lid": [1024, 0, 1024, 1024, 0, 1024, 1024, 1024, 1024, 0, 0, 1024],
        "!partial": [],
    },
    "ibv_devinfo/mixed-cx6dx-cx7-roce-port-down-deepep-60-EXCERPT.txt": {
        "ib_ports[*].device": ["mlx5_12"],
        "ib_ports[*].state": ["Down"],
        "ib_ports[*].link_layer": ["Ethernet"],
        "ib_ports[*].firmware": ["22.38.1900"],
        "ib_ports[*].ca_type": ["MT4125"],
        "!partial": ["ibv-devinfo"],  # mlx5_13's port block is not in the excerpt
    },
    "ip-link/ip-br-link-tun-wg-no-mac-veth-at-ifN-docker.txt": {
        "net_links[*].name": [
            "lo",
            "ens3",
            "tun-mihomo",
            "wg0",
            "amn0",
            "docker0",
            "veth0fbd50e",
            "veth131d347",
        ],
        "net_links[*].state": ["UNKNOWN", "UP", "UNKNOWN", "UNKNOWN", "UP", "UP", "UP", "UP"],
    },
    "lsmod/lsmod-grep-nvidia-rhel8-no-uvm-no-peermem-data-science-stack-90.txt": {
        "kernel_modules": ["nvidia_drm", "nvidia_modeset", "nvidia", "drm_kms_helper", "drm"],
        "lsmod_grep.patterns": ["nvidia"],  # nvidia_uvm / nvidia_peermem would match: proven not loaded
        "!partial": ["lsmod"],
    },
    "lsmod/lsmod-grep-nvidia_peermem-and-nv_peer_mem-both-empty-not-loaded.txt": {
        "kernel_modules": [],
        "lsmod_grep.patterns": ["nvidia_peermem", "nv_peer_mem"],
        "!partial": ["lsmod"],
        "!errors": [],
    },
    "docker-image-inspect/local-build-empty-repodigests-samples-docker.json": {
        "image.tag": "samples-docker/1.1.dockerfile_hello:v1.0",
        "image.repo_digests": [],
        "image.digest": None,
        "image.labels": {},
        "image.created": "2025-06-10T00:00:00Z",
        "image.present": True,
        "!partial": [],
    },
    "vllm-version/local-version-suffix-0.23.0+cu129.txt": {
        "vllm.version": "0.23.0",
        "vllm.variant": "cu129",
        "vllm.raw": "0.23.0+cu129",
    },
    A30: {
        "gpus[*].name": ["NVIDIA A30"] * 4,
        "driver.version": "535.274.02",
        "vllm.version": "0.11.1.dev12",
        "vllm.git_sha": "5ded9e9aa",
        "python.nccl_version": "2.27.3",
        "env.NCCL_VERSION": "2.25.1-1",
        "env.CUDA_VERSION": "12.8.1",
        "topology.matrix.GPU0.GPU1": "NV4",
        "topology.matrix.GPU2.GPU3": "NV4",
        "topology.matrix.GPU2.NIC0": "PXB",
        "topology.matrix.GPU3.NIC0": "PIX",
        "topology.nic_legend.NIC0": "mlx5_0",
    },
    "rocm-smi/mi300x-4gpu-concise-model-revision-name20chars-partitions-thamada.txt": {
        "gpus[*].name": ["AMD Instinct MI300X"] * 4,
        "gpus[*].vendor": ["amd"] * 4,
        "driver.version": None,
        "driver.status": "unknown",
    },
    "rocm-smi/mi300x-oam-rocm-smi-i-id-tab-separated-rocm6.3.3.txt": {
        "gpus[*].name": ["AMD Instinct MI300X OAM"],
        "gpus[*].vendor": ["amd"],
        "driver.status": "unknown",
    },
    "rocm-smi/mi355x-8gpu-concise-idle-node-ids-did-guid-pwrcap1400w-oci-bm.txt": {
        "gpus[*].name": ["AMD Instinct MI355X"] * 8,
        "gpus[*].index": list(range(8)),
        "driver.status": "unknown",
    },
    "amd-smi/amd-smi-version-24.7.1-rocm6.3.3.txt": {
        "extra.rocm_version": "6.3.3",
        "extra.amd_smi_version": "24.7.1+8dc45db",
        "#gpus": 0,
        "driver.status": "unknown",
    },
    "amd-smi/mi3xx-cpx-32-logical-gpus-monitor-p-t-v-rocm6.3-changelog.txt": {
        "#gpus": 32,
        "gpus[*].memory_total_mib": [196300] * 32,
        "gpus[*].vendor": ["amd"] * 32,
        "gpus[*].name": [""] * 32,  # the model is not printed
        "driver.status": "unknown",
    },
}


def dig(obj: Any, path: str) -> Any:
    if path.startswith("#"):
        value = dig(obj, path[1:])
        return len(value) if value is not None else None
    if path == "!errors":
        return sorted({e["source"] for e in obj.get("errors", [])})
    if path == "!partial":
        return sorted(obj.get("partial", {}))
    head, _, rest = path.partition(".")
    if head.endswith("[*]"):
        items = (obj.get(head[:-3]) if isinstance(obj, dict) else None) or []
        return [dig(item, rest) for item in items]
    value = obj.get(head) if isinstance(obj, dict) else None
    return dig(value, rest) if rest and value is not None else value


def snapshot_of(rel: str, tmp_path: Path) -> dict[str, Any]:
    kind = rel.split("/", 1)[0]
    captured = tmp_path / "captured"
    captured.mkdir()
    shutil.copy(DATA / rel, captured / CANONICAL[kind])
    result = CliRunner().invoke(app, ["collect", "--from", str(captured), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("rel", sorted(DEV), ids=lambda s: s.split("/")[-1][:60])
def test_dev_output_facts(rel: str, tmp_path: Path) -> None:
    snap = snapshot_of(rel, tmp_path)
    wrong = {p: (dig(snap, p), want) for p, want in DEV[rel].items() if dig(snap, p) != want}
    assert not wrong, (
        f"(got, expected) per fact: {wrong}; errors: {snap.get('errors')}; partial: {snap.get('partial')}"
    )


def test_dev_set_is_covered() -> None:
    """Every dev-set kind is either read (and each of its files checked) or named as not read."""
    index = Path("/work/shared/eval/dev/tool_outputs/INDEX.md")
    if not index.exists():
        pytest.skip("the shared calibration set is not on this machine")
    files = sorted(
        str(p.relative_to(index.parent))
        for p in index.parent.rglob("*")
        if p.is_file() and p.name != "INDEX.md"
    )
    unread = {f for f in files if f.split("/", 1)[0] in NOT_COLLECT_SOURCES}
    assert sorted(set(files) - unread) == sorted(DEV)
