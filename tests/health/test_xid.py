"""Xid events from real kernel logs, classified with NVIDIA's catalogue, through the API and `health --from`."""

from __future__ import annotations

from pathlib import Path

from healthkit import data, ids
from typer.testing import CliRunner

from vllm_medic.cli import app
from vllm_medic.collect.health.xid import catalogue, group_events, lookup, parse_xid_events

runner = CliRunner()


def test_catalogue_covers_the_ids_the_issue_names():
    wanted = [13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 69, 74, 79, 92, 94, 95, 109, 119, 120, 121] + list(
        range(144, 151)
    )
    cat = catalogue()
    assert all(i in cat for i in wanted), [i for i in wanted if i not in cat]
    assert cat[79].category == "bus" and cat[79].severity == "fail" and cat[79].explains_cuda_error
    assert cat[48].category == "memory_ecc" and cat[74].category == "nvlink" and cat[119].category == "gsp"
    assert cat[13].category == "application" and cat[63].severity == "info"
    assert all(e.action and e.mnemonic for e in cat.values())


def test_gsp_timeout_dmesg_T_groups_repeats():
    events = parse_xid_events(data("kernel/dmesg-T-xid-119-gsp-timeout-xe9680-gpud.log"))
    assert [e.xid for e in events] == [119] * 5
    first = events[0]
    assert first.pci == "0000:9b:00" and first.pid == "2024380" and first.process == "nvidia-smi"
    assert first.when == "[Sun Feb 23 16:24:18 2025]"
    assert first.message.startswith("Timeout after 6s of waiting for RPC response from GPU4 GSP!")
    (g,) = group_events(events)
    assert g.count == 5 and g.info is lookup(119)
    assert set(g.processes) == {"nvidia-smi", "cache_mgr_main", "gpud"}


def test_fallen_off_bus_with_and_without_xid_line():
    (ev,) = parse_xid_events(data("kernel/journal-xid-79-fallen-off-bus-rtx5080-ogkm-1151.txt"))
    assert ev.xid == 79 and ev.pci == "0000:2b:00" and not ev.inferred and ev.line_no == 2
    (inferred,) = parse_xid_events(data("kernel/dmesg-fallen-off-bus-no-xid-nvsentinel-155.txt"))
    assert inferred.xid == 79 and inferred.inferred and inferred.pci == "0000:b3:00"


def test_old_driver_format_and_row_remapper():
    events = parse_xid_events(data("kernel/dmesg-old-format-xid-3-pastebin.txt"))
    assert [(e.xid, e.pci, e.inferred) for e in events] == [
        (79, "0000:01:00", True),
        (3, "0000:01:00", False),
    ]
    (remap,) = parse_xid_events(data("kernel/xid-63-row-remapper-stas00.txt"))
    assert remap.xid == 63 and remap.pid == "1896" and "Row Remapper" in remap.message


def test_garbage_never_raises():
    junk = "NVRM: Xid (PCI:zz): abc\n\x00\x01NVRM: Xid (\nfallen off the bus\n" + "x" * 10000
    events = parse_xid_events(junk)
    assert all(e.xid == 79 for e in events)


def _bundle(tmp_path: Path, **files: str) -> Path:
    d = tmp_path / "bundle"
    d.mkdir(exist_ok=True)
    for name, text in files.items():
        p = d / name.replace("__", "/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return d


def test_health_from_dir_reports_xid_with_evidence_and_fix(tmp_path):
    d = _bundle(tmp_path, **{"dmesg.txt": data("kernel/dmesg-T-xid-119-gsp-timeout-xe9680-gpud.log")})
    res = runner.invoke(app, ["health", "--from", str(d), "--json"])
    assert res.exit_code == 1, res.output
    import json

    found = ids(json.loads(res.stdout))
    f = found["HLT-XID119"]
    assert f["severity"] == "fail" and f["category"] == "driver_cuda"
    assert "0000:9b:00" in f["title"] and "GSP RPC Timeout" in f["title"]
    assert f["evidence"][0].startswith(
        "dmesg.txt line 3: [Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119"
    )
    assert any("5 events" in e for e in f["evidence"])
    assert any("before any software theory" in s for s in f["fix"])
    assert f["docs"] == ["https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"]


def test_nvlink_xid_lands_in_the_network_category(tmp_path):
    line = "[ 5.0] NVRM: Xid (PCI:0000:18:00): 74, pid=1234, name=python3, NVLink: fatal error detected on link 3\n"
    d = _bundle(tmp_path, **{"journalctl-k.txt": line})
    res = runner.invoke(app, ["health", "--from", str(d), "--json"])
    import json

    f = ids(json.loads(res.stdout))["HLT-XID074"]
    assert f["category"] == "nccl_network" and f["severity"] == "fail"
    assert "journalctl-k.txt line 1" in f["evidence"][0]


def test_unreadable_kernel_log_says_how_to_check(tmp_path):
    d = _bundle(tmp_path, **{"dmesg.txt": data("kernel/dmesg-operation-not-permitted-moby-41318.txt")})
    res = runner.invoke(app, ["health", "--from", str(d), "--json"])
    assert res.exit_code == 0
    import json

    f = ids(json.loads(res.stdout))["HLT-XID000"]
    assert f["severity"] == "not_checked" and "not checked" in f["title"]
    assert "read kernel buffer failed: Operation not permitted" in f["evidence"][0]
    assert "sudo dmesg -T" in f["fix"][0] and "--cap-add SYSLOG" in f["fix"][0]


def test_nvlink5_nonfatal_is_a_warning_fatal_a_failure(tmp_path):
    import json

    d = _bundle(tmp_path, **{"dmesg.txt": data("kernel/nvlink5-xid-144-145-fatal-nonfatal-SYNTHETIC.txt")})
    res = runner.invoke(app, ["health", "--from", str(d), "--json"])
    found = ids(json.loads(res.stdout))
    assert found["HLT-XID144"]["severity"] == "warn" and found["HLT-XID144"]["category"] == "nccl_network"
    assert any("2 events" in e for e in found["HLT-XID144"]["evidence"])
    assert found["HLT-XID145"]["severity"] == "fail"
    assert res.exit_code == 1


def test_triage_treats_nonfatal_nvlink5_as_weak():
    from vllm_medic.triage.catalogue import load_catalogue

    cat = load_catalogue()
    lines = data("kernel/nvlink5-xid-144-145-fatal-nonfatal-SYNTHETIC.txt").splitlines()
    weak, fatal = cat.classify(lines[0], []), cat.classify(lines[2], [])
    assert weak.id == "xid-nvlink5-nonfatal" and not weak.strong
    assert fatal.id == "xid-nvlink-fault" and fatal.strong
