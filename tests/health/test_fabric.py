"""NVLink fabric: nvidia-smi -q Fabric sections, Fabric Manager and IMEX service states, MNNVL settings."""

from __future__ import annotations

import json
from pathlib import Path

from healthkit import data, ids
from typer.testing import CliRunner

from vllm_medic.cli import app
from vllm_medic.collect.health.fabric import (
    is_multi_node_nvlink,
    parse_nvidia_smi_q,
    parse_service,
    system_kind,
)
from vllm_medic.records import to_plain

runner = CliRunner()


def test_parse_real_fabric_section():
    q = parse_nvidia_smi_q(data("fabric/nvidia-smi-q-h200-completed-success-thamada.txt"))
    assert q.driver_version == "550.90.12"
    (gpu,) = q.gpus
    assert to_plain(gpu) == {
        "bus_id": "00000000:03:00.0",
        "product": "NVIDIA H200",
        "fabric_state": "Completed",
        "fabric_status": "Success",
        "clique_id": "0",
        "cluster_uuid": "00000000-0000-0000-0000-000000000000",
    }
    assert not is_multi_node_nvlink(q.gpus)
    assert system_kind(q.gpus) == "other"  # one H200 in a VM: no NVSwitch baseboard to judge


def test_service_states():
    mm = parse_service(data("fabric/systemctl-status-fm-version-mismatch-akash-632.txt"))
    assert (
        mm.state == "failed"
        and mm.fm_version_mismatch
        and mm.fm_version_mismatch.fabric_manager == "550.127.05"
    )
    ntd = parse_service(data("fabric/journal-fm-nothing-to-do-gpu-operator-610.txt"))
    assert ntd.nothing_to_do and ntd.state == "failed"
    assert parse_service(data("fabric/systemctl-no-systemd-container-SYNTHETIC.txt")).state == "no_systemd"
    assert parse_service("active\n").state == "active"
    assert (
        parse_service("   Active: active (running) since Mon 2026-11-30 01:00:00 UTC; 1h ago\n").state
        == "active"
    )
    assert parse_service("Unit nvidia-imex.service could not be found.\n").state == "not_found"
    assert parse_service("").state == "unknown"


def _bundle(tmp_path: Path, files: dict[str, str], snapshot: dict | None = None) -> Path:
    d = tmp_path / "b"
    d.mkdir()
    for k, v in files.items():
        (d / k).write_text(v)
    if snapshot:
        (d / "snapshot.json").write_text(json.dumps(snapshot))
    return d


def test_gb200_mnnvl_without_imex_or_nccl_settings(tmp_path):
    d = _bundle(
        tmp_path,
        {
            "nvidia-smi-q.txt": data("fabric/nvidia-smi-q-gb200-mnnvl-clique-SYNTHETIC.txt"),
            "systemctl-imex.txt": "inactive\n",
            "imex-channels.txt": "",
            "systemctl-fabricmanager.txt": "inactive\n",
        },
        {"launch": {"env": {"NCCL_CUMEM_ENABLE": "1"}}},
    )
    res = runner.invoke(app, ["health", "--from", str(d), "--json"])
    assert res.exit_code == 1
    found = ids(json.loads(res.stdout))
    assert found["HLT-FAB004"]["severity"] == "fail" and "IMEX" in found["HLT-FAB004"]["title"]
    assert any(
        "ClusterUUID 9c6f5af3-53bf-49b5-a436-b66766c413c3; CliqueId 4026" in e
        for e in found["HLT-FAB004"]["evidence"]
    )
    assert found["HLT-FAB005"]["severity"] == "fail"
    env = found["HLT-FAB006"]
    assert env["severity"] == "warn"
    assert "NCCL_MNNVL_ENABLE=<unset>, NCCL_NVLS_ENABLE=<unset>" in env["evidence"][1]
    assert "HLT-FAB003" not in found  # GB200: fabric state, not the FM unit, is what counts


def test_gb200_mnnvl_set_up_right(tmp_path):
    d = _bundle(
        tmp_path,
        {
            "nvidia-smi-q.txt": data("fabric/nvidia-smi-q-gb200-mnnvl-clique-SYNTHETIC.txt"),
            "systemctl-imex.txt": "   Active: active (running) since Mon 2026-11-30 01:00:00 UTC\n",
            "imex-channels.txt": "channel0\n",
        },
        {"launch": {"env": {"NCCL_CUMEM_ENABLE": "1", "NCCL_MNNVL_ENABLE": "1", "NCCL_NVLS_ENABLE": "1"}}},
    )
    res = runner.invoke(app, ["health", "--from", str(d), "--json"])
    found = ids(json.loads(res.stdout))
    assert res.exit_code == 0
    assert (
        found["HLT-FAB000"]["severity"] == "pass"
        and found["HLT-FAB000"]["title"] == "Every GPU registered with the NVLink fabric (Completed/Success)"
    )


def test_in_progress_fabric_is_a_failure_even_without_service_info(tmp_path):
    d = _bundle(tmp_path, {"nvidia-smi-q.txt": data("fabric/nvidia-smi-q-h200-in-progress-SYNTHETIC.txt")})
    res = runner.invoke(app, ["health", "--from", str(d), "--json"])
    f = ids(json.loads(res.stdout))["HLT-FAB001"]
    assert res.exit_code == 1 and f["severity"] == "fail"
    assert "nvidia-fabricmanager: unknown" in f["evidence"]


def test_collect_xml_alone_drives_fabric_and_imex_checks(tmp_path):
    from vllm_medic.checks.api import run_checks
    from vllm_medic.collect.api import load_captured
    from vllm_medic.recipes.loader import load_recipe

    d = tmp_path / "xml"
    d.mkdir()
    (d / "nvidia-smi-q.xml").write_text(data("fabric/nvidia-smi-q-x-gb200-fabric-SYNTHETIC.xml"))
    result = load_captured(d)
    smi_q = result.snapshot.health.fabric.nvidia_smi_q
    fab = smi_q.gpus[0]
    assert fab.cluster_uuid == "9c6f5af3-53bf-49b5-a436-b66766c413c3" and fab.fabric_state == "In Progress"
    findings = run_checks(result.snapshot, load_recipe("generic"), raw=result.raw)
    (f,) = [x for x in findings if x.id == "HLT-FAB"]
    assert f.severity.value == "fail" and "802" in f.title
    assert any("[HLT-FAB004" in e for e in f.evidence)  # IMEX not known on an MNNVL clique: said, not skipped
