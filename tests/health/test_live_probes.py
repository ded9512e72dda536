"""The live path: real subprocesses of the installed CLI, with fake dmesg/journalctl/systemctl/nvidia-smi/docker
on PATH replaying real outputs. No shell, timeouts honoured, missing tools degrade to 'could not check'."""

from __future__ import annotations

import json
import time

from healthkit import data, ids

from vllm_medic.collect.health.runner import run_command


def test_runner_kills_a_hung_command_and_its_children(tmp_path):
    marker = tmp_path / "child-survived"
    script = f"sleep 30 & sleep 30; touch {marker}"
    started = time.monotonic()
    res = run_command(["sh", "-c", script], timeout=1.0)
    assert res.timed_out and res.exit_code is None and not res.ok
    assert time.monotonic() - started < 20
    assert "no answer within" in res.describe()
    assert not marker.exists()


def test_runner_missing_binary_and_no_shell():
    res = run_command(["definitely-not-a-real-tool-xyz", "--version"], timeout=5)
    assert res.missing and "not found on PATH" in res.describe()
    res = run_command(["echo", "$HOME;", "rm", "-rf", "/nonexistent"], timeout=5)
    assert res.stdout.strip() == "$HOME; rm -rf /nonexistent"  # arguments are never shell-expanded


def test_dmesg_denied_falls_back_to_journalctl(fake_host):
    fake_host.replay("dmesg", err=data("kernel/dmesg-operation-not-permitted-moby-41318.txt"), rc=1)
    fake_host.replay("journalctl", out=data("kernel/journal-xid-79-fallen-off-bus-rtx5080-ogkm-1151.txt"))
    code, payload = fake_host.run_json("health")
    assert code == 1
    f = ids(payload)["HLT-XID079"]
    assert f["severity"] == "fail" and "fallen off the bus" in f["title"]
    assert "journalctl -k --no-pager -q -n 50000 line 2" in f["evidence"][0]
    xid = payload["health"]["xid"]
    assert xid["attempts"][0]["kind"] == "permission"
    calls = fake_host.calls()
    assert calls[0] == "dmesg " and calls[1].startswith("journalctl -k --no-pager -q -n")


def test_no_kernel_log_anywhere_and_no_systemd(fake_host):
    fake_host.replay("dmesg", err=data("kernel/dmesg-operation-not-permitted-moby-41318.txt"), rc=1)
    no_systemd = data("fabric/systemctl-no-systemd-container-SYNTHETIC.txt")
    fake_host.replay("journalctl", err="No journal files were found.\n", rc=1)
    fake_host.replay("systemctl-nvidia-fabricmanager", err=no_systemd, rc=1)
    fake_host.replay("systemctl-nvidia-imex", err=no_systemd, rc=1)
    fake_host.replay("nvidia-smi", out=data("nvidia-smi/b200-8gpu-575.57.08-cuda12.9-modal-glossary.txt"))
    fake_host.replay("nvidia-smi-q", err="", rc=9)
    code, payload = fake_host.run_json("health")
    found = ids(payload)
    xid = found["HLT-XID000"]
    assert xid["severity"] == "not_checked"
    assert [a["kind"] for a in payload["health"]["xid"]["attempts"]] == ["permission", "no_journal"]
    assert (
        found["HLT-FAB000"]["severity"] == "not_checked" and "nvidia-smi -q" in found["HLT-FAB000"]["fix"][0]
    )
    assert payload["health"]["fabric"]["fabric_manager"]["state"] == "no_systemd"
    assert code == 0


def test_hung_dmesg_is_killed_and_reported(fake_host):
    fake_host.replay("dmesg", out="never printed\n", hang=60)
    fake_host.replay("journalctl", out="[    1.0] ordinary boot line\n")
    started = time.monotonic()
    code, payload = fake_host.run_json("health", "--timeout", "1")
    assert time.monotonic() - started < 40
    assert payload["health"]["xid"]["attempts"][0]["kind"] == "timeout"
    f = ids(payload)["HLT-XID000"]
    assert f["severity"] == "pass" and "1 lines scanned" in f["evidence"][0]


def test_fabric_in_progress_with_fm_version_mismatch_live(fake_host, tmp_path):
    fake_host.replay("dmesg", out="[    1.0] boot\n")
    fake_host.replay("nvidia-smi-q", out=data("fabric/nvidia-smi-q-h200-in-progress-SYNTHETIC.txt"))
    fake_host.replay("nvidia-smi", out=data("nvidia-smi/b200-8gpu-575.57.08-cuda12.9-modal-glossary.txt"))
    fake_host.replay(
        "systemctl-nvidia-fabricmanager",
        out=data("fabric/systemctl-status-fm-version-mismatch-akash-632.txt"),
        rc=3,
    )
    fake_host.replay("systemctl-nvidia-imex", err="Unit nvidia-imex.service could not be found.\n", rc=4)
    save = tmp_path / "saved"
    code, payload = fake_host.run_json("health", "--save", str(save))
    assert code == 1
    found = ids(payload)
    fab = found["HLT-FAB001"]
    assert fab["severity"] == "fail" and "802" in fab["title"]
    assert any("Fabric State In Progress, Status N/A" in e for e in fab["evidence"])
    mm = found["HLT-FAB002"]
    assert mm["title"] == "Fabric Manager 550.127.05 does not match driver 550.120"
    # what was measured is saved under canonical names and reads back identically with --from
    for name in (
        "dmesg.txt",
        "nvidia-smi-q.txt",
        "systemctl-fabricmanager.txt",
        "shm.txt",
        "ulimit.txt",
        "health.json",
    ):
        assert (save / name).is_file(), name
    code2, again = fake_host.run_json("health", "--from", str(save))
    assert {f["id"] for f in again["findings"] if f["id"].startswith("HLT-FAB")} == {
        f["id"] for f in payload["findings"] if f["id"].startswith("HLT-FAB")
    }
    assert (
        json.loads((save / "health.json").read_text())["fabric"]["fabric_manager"]["fm_version_mismatch"][
            "driver"
        ]
        == "550.120"
    )


def test_ctrl_c_keeps_what_was_measured(fake_host, tmp_path):
    import signal
    import subprocess

    from healthkit import VENV_BIN

    fake_host.replay("dmesg", out=data("kernel/journal-xid-79-fallen-off-bus-rtx5080-ogkm-1151.txt"))
    fake_host.replay("nvidia-smi", out="never printed\n", hang=120)
    save = tmp_path / "partial"
    proc = subprocess.Popen(
        [str(VENV_BIN / "vllm-medic"), "health", "--save", str(save)],
        env=fake_host.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any(c.startswith("nvidia-smi") for c in fake_host.calls()):
            time.sleep(0.05)  # polling the observable event: the probe that hangs has started
        assert any(c.startswith("nvidia-smi") for c in fake_host.calls())
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert "Traceback" not in err and "interrupted" in err
    assert "NVRM: Xid (PCI:0000:2b:00): 79" in (save / "dmesg.txt").read_text()


def test_secrets_in_probe_outputs_never_reach_json_or_saved_files(fake_host, tmp_path):
    secret = "hf_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3"
    fake_host.replay(
        "dmesg",
        out=f"[ 9.0] NVRM: Xid (PCI:0000:2b:00): 79, pid=77, name=vllm serve --api-key sk-{'x' * 24} HF_TOKEN={secret}\n",
    )
    fake_host.replay(
        "systemctl-nvidia-fabricmanager", out=f"   Active: inactive (dead)\nHF_TOKEN={secret}\n", rc=3
    )
    save = tmp_path / "saved"
    proc = fake_host.run_cli("health", "--save", str(save), "--json")
    assert secret not in proc.stdout and "sk-xxxxxxxx" not in proc.stdout
    assert "HLT-XID079" in proc.stdout
    for f in save.iterdir():
        text = f.read_text()
        assert secret not in text and "sk-xxxxxxxx" not in text, f.name
