"""Topology judged (NET009 NVLink pairs, NET010 GPU-to-NIC rails), missing GPUs (LAY005 hardware path first,
LAY003 never "TP 7"), GPU memory health (DRV008) - through `check --from DIR` and `check --snapshot`.

Inputs are real captures (tests/data/collect/*, sources in tests/data/collect/SOURCES.md). Where a case
needs a fault the real capture does not show, the test derives it from the real file in tmp_path and says
so (SYNTHETIC: one row turned to SYS, one GPU removed, one 'Pending : No' turned to 'Yes').
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from vllm_medic.cli import app

DATA = Path(__file__).parents[1] / "data" / "collect"
TOPO = DATA / "nvidia-smi-topo-m"
SMI = DATA / "nvidia-smi"
H200_TABLE = SMI / "h200-8gpu-570.124.06-cuda12.8-vllm-tp8-8-processes-truncated-names.txt"
B200_TABLE = SMI / "b200-8gpu-575.57.08-cuda12.9-idle-no-process-section-modal-glossary.txt"
GB300_TABLE = SMI / "gb300-4gpu-580.105.08-cuda13.0-oci-bm-gpu-gb300-4.txt"
HGX_TOPO = TOPO / "hgx-8gpu-nv18-12nic-pix-single-numa-aihub0007.txt"
DELLA_TOPO = TOPO / "h100-8gpu-6nic-empty-cpu-affinity-slurm-cgroup-della.txt"
GB200_TOPO = TOPO / "gb200-4gpu-nv18-8nic-mlx5-numa-ranges-openshift.txt"
H100_Q = DATA / "nvidia-smi-q" / "h100-1gpu-545.23.08-cuda12.3-nvidia-smi-a-full-della.txt"
MULTI_NODE = (
    "vllm serve moonshotai/Kimi-K3 --trust-remote-code -tp 8 --data-parallel-size 16 "
    "--data-parallel-size-local 8 --enable-expert-parallel"
)
runner = CliRunner()


def bundle(tmp_path: Path, files: dict[str, str | Path]) -> Path:
    d = tmp_path / "captured"
    d.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        text = content.read_text() if isinstance(content, Path) else content
        (d / name).write_text(text)
    return d


def check(path: Path, *args: str) -> dict[str, dict]:
    res = runner.invoke(app, ["check", "--from", str(path), "--json", *args])
    assert res.exit_code in (0, 1), res.output
    return {f["id"]: f for f in json.loads(res.stdout)["findings"]}


def _cut_nvlink(topo: str, gpu: int, peers: list[int] | None = None) -> str:
    """SYNTHETIC fault on a real matrix: GPU<gpu>'s NVLink to `peers` (default: all) becomes SYS."""
    lines = topo.splitlines()
    header = lines[0].split("\t")
    out = []
    for line in lines:
        cells = line.split("\t")
        row = cells[0].strip()
        m = re.fullmatch(r"GPU(\d+)", row)
        if m:
            idx = int(m.group(1))
            for col, name in enumerate(header):
                cm = re.fullmatch(r"GPU(\d+)", name.strip())
                if not cm or int(cm.group(1)) == idx:
                    continue
                other = int(cm.group(1))
                if (idx == gpu and (peers is None or other in peers)) or (
                    other == gpu and (peers is None or idx in peers)
                ):
                    cells[col] = "SYS"
        out.append("\t".join(cells))
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- NET009: NVLink between every pair


def test_nvlink_board_with_every_pair_nv18_passes(tmp_path):
    # real H200 8-GPU table + real HGX 8-GPU NV18 matrix (two captures, one board kind)
    fs = check(bundle(tmp_path, {"nvidia-smi.txt": H200_TABLE, "nvidia-smi-topo-m.txt": HGX_TOPO}))
    f = fs["NET009"]
    assert f["severity"] == "pass" and "All 28 GPU pairs NVLink-connected (NV18)" in f["title"], f
    assert f["evidence"][0].startswith("nvidia-smi-topo-m.txt:2 GPU0")
    assert any("HGX H200" in e for e in f["evidence"])


def test_a_gpu_whose_row_is_all_sys_has_its_nvlink_down(tmp_path):
    topo = _cut_nvlink(HGX_TOPO.read_text(), 3)
    fs = check(bundle(tmp_path, {"nvidia-smi.txt": H200_TABLE, "nvidia-smi-topo-m.txt": topo}))
    f = fs["NET009"]
    assert f["severity"] == "fail" and f["title"].startswith("NVLink down on GPU3"), f
    assert f["evidence"][0].startswith("nvidia-smi-topo-m.txt:5 GPU3")
    assert "GPU0-GPU3 SYS" in " ".join(f["evidence"])
    fix = " ".join(f["fix"])
    assert "nvidia-smi nvlink -s -i 3" in fix and "fabricmanager" in fix and "Xid 74" in fix


def test_one_pair_off_nvlink_is_named(tmp_path):
    topo = _cut_nvlink(HGX_TOPO.read_text(), 1, peers=[6])
    f = check(bundle(tmp_path, {"nvidia-smi.txt": H200_TABLE, "nvidia-smi-topo-m.txt": topo}))["NET009"]
    assert f["severity"] == "fail" and "GPU1-GPU6 SYS" in f["title"], f


def test_pcie_boards_are_not_judged_and_a_missing_matrix_is_not_checked(tmp_path):
    pcie = SMI / "a100-pcie-40gb-525.105.17-cuda12.4-in-pod-nccl-1564-EXCERPT.txt"
    fs = check(bundle(tmp_path, {"nvidia-smi.txt": pcie}))
    assert fs["NET009"]["severity"] == "info" and "not every GPU pair is NVLink" in fs["NET009"]["title"]
    fs = check(bundle(tmp_path / "b", {"nvidia-smi.txt": H200_TABLE}))
    assert fs["NET009"]["severity"] == "not_checked" and fs["NET010"]["severity"] == "not_checked"


# ---------------------------------------------------------------- NET010: a local NIC per GPU


def test_each_gpu_with_a_pix_nic_passes(tmp_path):
    fs = check(bundle(tmp_path, {"nvidia-smi.txt": H200_TABLE, "nvidia-smi-topo-m.txt": HGX_TOPO}))
    f = fs["NET010"]
    assert f["severity"] == "pass" and "Each of the 8 GPUs" in f["title"], f
    assert "GPU0: nearest NIC NIC0 (mlx5_0) via PIX" in f["evidence"]


def test_gpus_without_a_local_nic_warn_on_a_multi_node_launch(tmp_path):
    # real della matrix: 6 NICs for 8 GPUs, GPU1/2/5/7 reach theirs only via NODE
    files = {"nvidia-smi.txt": H200_TABLE, "nvidia-smi-topo-m.txt": DELLA_TOPO}
    fs = check(bundle(tmp_path, files), "--launch", MULTI_NODE)
    f = fs["NET010"]
    assert f["severity"] == "warn" and f["title"] == "4 of 8 GPUs have no NIC on their own PCIe switch", f
    assert "GPU1: nearest NIC NIC0 (mlx5_0) via NODE" in f["evidence"]
    assert "NCCL_IB_HCA" in f["fix"][0]
    # the same node serving alone: nothing to judge
    fs = check(tmp_path / "captured", "--launch", "vllm serve m -tp 8")
    assert fs["NET010"]["severity"] == "info"
    # launch unknown: not a warning, not a pass
    assert check(tmp_path / "captured")["NET010"]["severity"] == "not_checked"


def test_grace_trays_route_nics_otherwise_and_are_not_judged(tmp_path):
    # real GB300 4-GPU table + real GB200 4-GPU matrix (NICs SYS to every GPU by design)
    fs = check(
        bundle(tmp_path, {"nvidia-smi.txt": GB300_TABLE, "nvidia-smi-topo-m.txt": GB200_TOPO}),
        "--launch",
        MULTI_NODE,
    )
    assert fs["NET009"]["severity"] == "pass" and "6 GPU pairs" in fs["NET009"]["title"]
    assert fs["NET010"]["severity"] == "info" and "GB300 NVL72" in fs["NET010"]["title"]


# ---------------------------------------------------------------- LAY005 / LAY003: a GPU missing from the board


def _drop_gpu(table: str, index: int, name: str | None = None) -> str:
    """SYNTHETIC: a real 8-GPU table with GPU <index>'s three-line block removed (fallen off the bus); the
    driver enumerates what is left from 0, so the GPUs after it are renumbered (a gap means a cut paste)."""
    lines = table.splitlines()
    out, skip = [], 0
    for line in lines:
        if skip:
            skip -= 1
            continue
        if re.match(rf"\|\s+{index}\s+NVIDIA", line):
            skip = 3  # the two other lines of the block and its separator
            continue
        m = re.match(r"(\|\s+)(\d+)(\s+NVIDIA)", line)
        if m and int(m.group(2)) > index:
            line = f"{m.group(1)}{int(m.group(2)) - 1}{m.group(3)}{line[m.end() :]}"
        out.append(line)
    text = "\n".join(out) + "\n"
    return text.replace("NVIDIA B200      ", name.ljust(len("NVIDIA B200      "))) if name else text


def test_a_table_with_a_gap_in_its_indices_is_a_cut_paste_not_a_missing_gpu(tmp_path):
    table = B200_TABLE.read_text()
    cut = re.sub(r"\|\s+5\s+NVIDIA.*?\n(.*\n){3}", "", table, count=1)
    assert cut.count("NVIDIA B200") == 7
    fs = check(bundle(tmp_path, {"nvidia-smi.txt": cut}), "--launch", "vllm serve m -tp 8")
    assert fs["LAY005"]["severity"] == "not_checked" and "partial" in fs["LAY005"]["title"], fs["LAY005"]


def test_b300_board_showing_7_gpus_gives_the_hardware_path_first(tmp_path):
    table = _drop_gpu(B200_TABLE.read_text(), 5, "NVIDIA B300 SXM6 AC")
    assert table.count("NVIDIA B300") == 7
    d = bundle(tmp_path, {"nvidia-smi.txt": table})
    fs = check(
        d, "--launch", "vllm serve moonshotai/Kimi-K3 --trust-remote-code -tp 8", "--recipe", "kimi-k3"
    )
    f = fs["LAY005"]
    assert f["severity"] == "fail" and f["title"].startswith("7 of the board's 8 GPUs are seen"), f
    assert f["fix"][0].startswith("Is every GPU still on the PCI bus? `lspci -d 10de:")
    assert "Xid 79" in f["fix"][1] and "fallen off the bus" in f["fix"][1]
    assert "Drain the node" in f["fix"][2] and "RMA" in f["fix"][2]
    assert "do not shrink TP to 7" in f["fix"][3]
    assert any("HGX B300" in e and "1, 2, 4, 8" in e for e in f["evidence"])
    assert any("00000000:76:00.0" not in e and "bus ids seen" in e for e in f["evidence"])
    lay3 = fs["LAY003"]
    assert lay3["severity"] == "fail" and "a GPU is missing from the board" in lay3["title"]
    assert not any("TP = GPUs per node" in step for step in lay3["fix"])
    assert "LAY005" in lay3["fix"][0]


def test_whole_boards_and_slices_are_not_missing_gpus(tmp_path):
    fs = check(bundle(tmp_path, {"nvidia-smi.txt": B200_TABLE}))
    assert fs["LAY005"]["severity"] == "pass" and "all 8 GPUs" in fs["LAY005"]["title"]
    four = B200_TABLE.read_text()
    for index in (7, 6, 5, 4):  # from the end: dropping one renumbers the GPUs after it
        four = _drop_gpu(four, index)
    assert four.count("NVIDIA B200") == 4
    fs = check(bundle(tmp_path / "four", {"nvidia-smi.txt": four}))
    assert fs["LAY005"]["severity"] == "pass"  # 4 of 8: a half-board VM or container slice


def test_a_cut_table_is_not_a_missing_gpu(tmp_path):
    """A table cut short (marked partial) lists fewer GPUs: not checked, never the hardware path."""
    snap = {
        "gpus": [{"index": i, "name": "NVIDIA B300 SXM6 AC", "memory_total_mib": 275040} for i in range(7)],
        "partial": {"nvidia-smi": "EXCERPT: the table is cut after GPU 6"},
    }
    p = tmp_path / "snapshot.json"
    p.write_text(json.dumps(snap))
    res = runner.invoke(app, ["check", "--snapshot", str(p), "--json"])
    f = {x["id"]: x for x in json.loads(res.stdout)["findings"]}["LAY005"]
    assert f["severity"] == "not_checked" and "partial" in f["title"], f


# ---------------------------------------------------------------- DRV008: ECC / remapped rows


def _q_snapshot(tmp_path: Path, **gpu_fields) -> Path:
    gpu = {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "bus_id": "00000000:19:00.0",
        "memory_total_mib": 81559,
    }
    gpu.update(gpu_fields)
    p = tmp_path / "snapshot.json"
    p.write_text(json.dumps({"driver": {"version": "545.23.08", "status": "ok"}, "gpus": [gpu]}))
    return p


def _drv008(p: Path) -> dict:
    res = runner.invoke(app, ["check", "--snapshot", str(p), "--json"])
    return {x["id"]: x for x in json.loads(res.stdout)["findings"]}["DRV008"]


def test_pending_row_remap_means_reset_before_serving(tmp_path):
    # the counters a real `nvidia-smi -q` shows (H100 della sample), with Pending turned to Yes (SYNTHETIC)
    f = _drv008(
        _q_snapshot(
            tmp_path, remapped_rows_pending=True, remapped_rows_failure=False, ecc_volatile_uncorrectable=1
        )
    )
    assert f["severity"] == "fail" and "reset before serving" in f["title"], f
    assert f["fix"][0].startswith("Drain the node") and "nvidia-smi -r -i 0" in f["fix"][1]
    assert "GPU 0 (00000000:19:00.0): remapped rows pending" in " ".join(f["evidence"])


def test_remapping_failure_means_rma(tmp_path):
    f = _drv008(_q_snapshot(tmp_path, remapped_rows_pending=False, remapped_rows_failure=True))
    assert f["severity"] == "fail" and "RMA" in f["title"] and "RMA" in " ".join(f["fix"])


def test_healthy_counters_pass_and_no_counters_is_not_checked(tmp_path):
    f = _drv008(
        _q_snapshot(
            tmp_path, remapped_rows_pending=False, remapped_rows_failure=False, ecc_volatile_uncorrectable=0
        )
    )
    assert f["severity"] == "pass", f
    f = _drv008(_q_snapshot(tmp_path))
    assert f["severity"] == "not_checked" and "ROW_REMAPPER" in f["fix"][-1]


def test_drv008_quotes_the_pending_line_of_the_captured_q_output():
    """Through the API with the real -q text as raw evidence (the parser fills the fields in collect)."""
    from vllm_medic.checks.api import run_checks
    from vllm_medic.recipes import load_recipe
    from vllm_medic.snapshot import Gpu, Snapshot

    text = H100_Q.read_text().replace(
        "        Pending                           : No", "        Pending                           : Yes"
    )  # SYNTHETIC: the real sample with its remap pending
    assert "Pending                           : Yes" in text
    snap = Snapshot(gpus=[Gpu(index=0, name="NVIDIA H100 80GB HBM3", remapped_rows_pending=True)])
    fs = run_checks(snap, load_recipe("generic"), raw={"nvidia-smi-q.txt": text.encode()})
    f = next(x for x in fs if x.id == "DRV008")
    assert f.severity.value == "fail"
    assert f.evidence[0] == "nvidia-smi-q.txt:142 Pending                           : Yes"
