"""Health wired into the other stages: `collect` (live --image and --from) fills Snapshot.health,
`check` reports the HLT-* rules from the registry, and collect's in-image probe is the one health runs."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from healthkit import data, ids

from vllm_medic.collect.health.in_image import VERSION_PROBE

IMAGE = "vllm/vllm-openai:kimi-k3"


def test_collect_runs_the_same_version_probe():
    from importlib import resources

    table = yaml.safe_load(resources.files("vllm_medic.collect").joinpath("data/sources.yaml").read_text())
    probe = next(p for p in table["probes"] if p["name"] == "in-image-versions")
    assert probe["argv"][-1] == VERSION_PROBE and probe["needs"] == "image"
    assert "--entrypoint" in probe["argv"] and "--gpus" in probe["argv"]


def _captured(tmp_path: Path) -> Path:
    d = tmp_path / "captured"
    d.mkdir(parents=True)
    (d / "nvidia-smi.txt").write_text(data("nvidia-smi/b200-8gpu-575.57.08-cuda12.9-modal-glossary.txt"))
    (d / "dmesg.txt").write_text(data("kernel/journal-xid-79-fallen-off-bus-rtx5080-ogkm-1151.txt"))
    (d / "shm.txt").write_text(data("limits/df-k-dev-shm-docker-default-64m-SYNTHETIC.txt"))
    (d / "proc-self-limits.txt").write_text(data("limits/proc-self-limits-build-host-memlock-8m.txt"))
    (d / "in-image-nvidia-smi.txt").write_text(
        data("nvidia-smi/b200-8gpu-575.57.08-cuda12.9-modal-glossary.txt")
    )
    (d / "in-image-versions.txt").write_text(data("docker/versions-probe-cu130-SYNTHETIC.txt"))
    (d / "in-image-pip-list.txt").write_text(data("docker/pip-freeze-mixed-cu12-cu13-SYNTHETIC.txt"))
    return d


def test_collect_from_and_check_report_health(fake_host, tmp_path):
    bundle = tmp_path / "bundle"
    proc = fake_host.run_cli("collect", "--from", str(_captured(tmp_path)), "-o", str(bundle))
    assert proc.returncode == 0, proc.stderr
    snap = json.loads((bundle / "snapshot.json").read_text())
    health = snap["health"]
    assert health["xid"]["events"][0]["xid"] == 79
    assert health["limits"]["shm"]["size_bytes"] == 64 * 1024**2
    assert health["limits"]["ulimit"]["memlock_bytes"] == 8 * 1024**2
    assert set(health["in_image"]["cuda_userspace"]) == {"12", "13"}
    for name in ("dmesg.txt", "shm.txt", "in-image-versions.txt"):
        assert (bundle / name).is_file()

    code, payload = fake_host.run_json(
        "check", "--from", str(bundle), "--launch", "vllm serve m --tensor-parallel-size 8"
    )
    found = ids(payload)
    assert code == 1
    assert found["HLT-XID"]["severity"] == "fail" and "Xid 79" in found["HLT-XID"]["title"]
    img = found["HLT-IMG"]
    assert img["severity"] == "fail" and "575.57.08 is too old" in img["title"]
    assert any("[HLT-IMG004 fail] The image mixes CUDA 12.x and 13.x" in e for e in img["evidence"])
    lim = found["HLT-LIM"]
    assert lim["severity"] == "fail" and lim["title"].startswith("/dev/shm is only 64 MiB")
    assert found["HLT-FAB"]["severity"] in ("not_checked", "pass")

    # the same bundle as a .tar.gz reads back in `health --from` with the per-problem findings
    tgz = tmp_path / "bundle.tar.gz"
    proc = fake_host.run_cli("collect", "--from", str(_captured(tmp_path / "again")), "-o", str(tgz))
    assert proc.returncode == 0, proc.stderr
    code, payload = fake_host.run_json("health", "--from", str(tgz), "--tp", "8")
    found = ids(payload)
    assert code == 1
    assert {"HLT-XID079", "HLT-LIM001", "HLT-IMG002", "HLT-IMG004"} <= set(found)
    assert found["HLT-LIM002"]["title"] == "Locked-memory limit (ulimit -l) is 8 MiB"


def test_live_collect_with_image_runs_the_probes_through_docker(fake_host, tmp_path):
    fake_host.replay("dmesg", out="[    1.0] boot\n")
    fake_host.replay("journalctl", out="-- No entries --\n")
    fake_host.replay("nvidia-smi", out=data("nvidia-smi/b200-8gpu-575.57.08-cuda12.9-modal-glossary.txt"))
    fake_host.replay(
        "docker-nvidia-smi", out=data("nvidia-smi/b200-8gpu-575.57.08-cuda12.9-modal-glossary.txt")
    )
    fake_host.replay("docker-python3-versions", out=data("docker/versions-probe-cu130-SYNTHETIC.txt"))
    fake_host.replay(
        "docker-python3-pip", out=data("docker/pip-freeze-cu128-vllm-0.11.1-from-collect-env.txt")
    )
    bundle = tmp_path / "live"
    proc = fake_host.run_cli("collect", "--image", IMAGE, "-o", str(bundle), "--timeout", "20")
    assert proc.returncode in (0, 1), proc.stderr
    snap = json.loads((bundle / "snapshot.json").read_text())
    img = snap["health"]["in_image"]
    assert img["image"] == IMAGE and img["versions"]["torch_cuda"] == "13.0"
    assert img["nvidia_smi"]["gpu_count"] == 8
    argv = [
        ln
        for ln in (fake_host.dir / "docker-argv.log").read_text().splitlines()
        if ln.startswith("docker run")
    ]
    assert f"docker run --rm --gpus all --entrypoint nvidia-smi {IMAGE}" in argv
    assert snap["health"]["xid"]["readable"] is True
