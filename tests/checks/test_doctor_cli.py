"""`doctor` end to end: real subprocesses of the console script, fake binaries on PATH.

The fakes are SYNTHETIC shell scripts: one replays a real nvidia-smi table
(tests/data/checks/bundles/b200-r575-k3/nvidia-smi.txt), others hang to prove that a hung probe
costs at most its timeout and becomes a finding.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

BIN = Path(sys.executable).with_name("vllm-medic")
B200_SMI = Path(__file__).parents[1] / "data" / "checks" / "bundles" / "b200-r575-k3" / "nvidia-smi.txt"


def fake(dirpath: Path, name: str, body: str) -> None:
    p = dirpath / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(0o755)


def doctor(
    path_dirs: list[Path], *args: str, timeout: float = 120
) -> tuple[subprocess.CompletedProcess, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "UCX_", "CUDA_VISIBLE"))}
    env["PATH"] = os.pathsep.join([str(d) for d in path_dirs] + ["/usr/bin", "/bin"])
    env["COLUMNS"] = "200"
    t0 = time.monotonic()
    proc = subprocess.run(
        [str(BIN), "doctor", *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    return proc, time.monotonic() - t0


def test_no_driver_is_the_first_clear_finding(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    junit = tmp_path / "doctor.xml"
    proc, _ = doctor([empty], "--json", "--junit", str(junit))
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    first = data["findings"][0]
    assert (
        first["id"] == "DRV001" and first["severity"] == "fail" and "nvidia-smi not found" in first["title"]
    )
    assert len(data["findings"]) >= 20  # the rest is still reported
    assert {p["name"] for p in data["probes"]} >= {"nvidia-smi", "lsmod", "ip-link"}
    assert "DRV001" in junit.read_text()
    text, _ = doctor([empty])
    assert text.returncode == 1 and "Traceback" not in text.stdout + text.stderr
    assert "[✗] Driver and CUDA" in text.stdout and "Probes" in text.stdout and "doctor took" in text.stdout
    # what could not be checked is counted apart, per category and in the summary, and never shown as ✓
    counts = data["counts"]
    assert counts["fail"] >= 1 and counts["not_checked"] >= 5
    assert counts["not_checked"] == sum(f["severity"] == "not_checked" for f in data["findings"])
    assert "not checked)" in text.stdout and "not checked (missing evidence" in text.stdout
    assert "?" in text.stdout and "Capture it:" in text.stdout


def test_hung_probes_cost_one_timeout_and_name_the_likely_causes(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name in ("nvidia-smi", "ibdev2netdev", "lsmod", "vllm"):
        fake(bindir, name, "exec sleep 60")
    proc, wall = doctor([bindir], "--json", "--timeout", "1")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    hung = [p for p in data["probes"] if p["status"] == "timeout"]
    assert len(hung) >= 4  # four nvidia-smi calls, ibdev2netdev, lsmod, vllm --version
    # bounded by the slowest probe's timeout, not the sum of them (generous margin for a loaded machine)
    assert data["wall_s"] < 0.5 * sum(p["duration_s"] for p in hung)
    assert wall < 30
    drv = data["findings"][0]
    assert drv["id"] == "DRV001" and drv["severity"] == "fail" and "hung" in drv["title"]
    fix = " ".join(drv["fix"]).lower()
    assert "xid" in fix and "dmesg" in fix and "fallen off the bus" in fix
    assert any(
        p["name"] == "ip-link" and p["status"] == "ok" for p in data["probes"]
    )  # the rest still collected


def test_k3_on_a_replayed_r575_b200(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake(
        bindir,
        "nvidia-smi",
        f'if [ $# -eq 0 ]; then cat "{B200_SMI}"; exit 0; fi\necho "Invalid combination of input arguments." >&2; exit 2',
    )
    proc, _ = doctor(
        [bindir],
        "--recipe",
        "kimi-k3",
        "--launch",
        "docker run --gpus all vllm/vllm-openai:kimi-k3 moonshotai/Kimi-K3 -tp 8 --trust-remote-code",
    )
    assert proc.returncode == 1
    out = proc.stdout
    assert "Driver 575.57.08 is below the recipe's floor 580.65.06" in out
    assert "build vLLM from the K3 branch against cu129 PyTorch" in out
    assert "[✓] NVIDIA driver 575.57.08" not in out  # passes are one-liners under their category
    assert "✓ NVIDIA driver 575.57.08 loaded" in out


def test_ctrl_c_during_collection_reports_what_was_measured(tmp_path):
    import signal

    bindir = tmp_path / "bin"
    bindir.mkdir()
    marker = tmp_path / "started"
    fake(bindir, "nvidia-smi", f'echo started >> "{marker}"\nexec sleep 60')
    env = dict(os.environ, PATH=os.pathsep.join([str(bindir), "/usr/bin", "/bin"]))
    proc = subprocess.Popen(
        [str(BIN), "doctor", "--json", "--timeout", "50"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60

        # wait until every nvidia-smi probe of the source table runs (a probe still being spawned when
        # Ctrl-C lands is collect's race to handle, reported separately; this test is about what
        # doctor does next)
        from vllm_medic.collect.api import source_table

        expected = sum(1 for p in source_table()["probes"] if p["argv"][0] == "nvidia-smi")

        def started() -> int:
            return len(marker.read_text().splitlines()) if marker.exists() else 0

        while started() < expected and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert started() == expected, "the fake nvidia-smi probes never all started"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert time.monotonic() - t0 < 40  # did not wait for the 50 s probe timeout
    data = json.loads(out)
    assert data["interrupted"] is True and "Traceback" not in err
    assert any(p["name"] == "ip-link" for p in data["probes"])
