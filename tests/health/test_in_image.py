"""`health --image`: the same `docker run --gpus all --entrypoint …` calls a real engine gets, answered by a
fake docker client replaying real outputs."""

from __future__ import annotations

from healthkit import data, ids

from vllm_medic.collect.health.in_image import (
    classify_docker_error,
    cuda_userspace,
    parse_nvidia_smi,
    parse_pip_freeze,
)
from vllm_medic.records import to_plain

IMAGE = "vllm/vllm-openai:kimi-k3"


def _host(fake_host, smi: str = "nvidia-smi/b200-8gpu-575.57.08-cuda12.9-modal-glossary.txt") -> None:
    fake_host.replay("dmesg", out="[    1.0] boot\n")
    fake_host.replay("nvidia-smi", out=data(smi))
    fake_host.replay("nvidia-smi-q", err="", rc=9)


def test_parsers_on_real_outputs():
    b200 = parse_nvidia_smi(data("nvidia-smi/b200-8gpu-575.57.08-cuda12.9-modal-glossary.txt"))
    assert to_plain(b200) == {"driver_version": "575.57.08", "cuda_version": "12.9", "gpu_count": 8}
    assert parse_nvidia_smi(data("nvidia-smi/a100-4gpu-555.42.02-cuda12.5-thamada.txt")).gpu_count == 4
    err = classify_docker_error(
        data("docker/nvidia-container-cli-requirement-cuda-11.5-nvidia-docker-1772.txt")
    )
    assert err is not None and err.kind == "cuda_requirement" and err.required_cuda == "11.5"
    pkgs = parse_pip_freeze(data("docker/pip-freeze-cu128-vllm-0.11.1-from-collect-env.txt"))
    assert pkgs["torch"] == "2.8.0+cu128" and pkgs["nvidia-nccl-cu12"] == "2.27.3"
    assert set(cuda_userspace(pkgs)) == {"12"}
    mixed = cuda_userspace(parse_pip_freeze(data("docker/pip-freeze-mixed-cu12-cu13-SYNTHETIC.txt")))
    assert set(mixed) == {"12", "13"} and "nvidia-cublas==13.0.0.19" in mixed["13"]


def test_cuda13_image_on_r575_host_fails_and_lists_versions(fake_host):
    _host(fake_host)
    fake_host.replay(
        "docker-nvidia-smi", out=data("nvidia-smi/b200-8gpu-575.57.08-cuda12.9-modal-glossary.txt")
    )
    fake_host.replay("docker-python3-versions", out=data("docker/versions-probe-cu130-SYNTHETIC.txt"))
    fake_host.replay("docker-python3-pip", out=data("docker/pip-freeze-mixed-cu12-cu13-SYNTHETIC.txt"))
    code, payload = fake_host.run_json("health", "--image", IMAGE)
    assert code == 1
    found = ids(payload)
    drv = found["HLT-IMG002"]
    assert (
        drv["severity"] == "fail"
        and drv["title"] == "Host driver 575.57.08 is too old for the image's CUDA 13.0"
    )
    assert any("580.65.06" in e for e in drv["evidence"])
    assert (
        found["HLT-IMG003"]["severity"] == "pass"
        and found["HLT-IMG003"]["title"] == "The container sees all 8 GPUs"
    )
    mixed = found["HLT-IMG004"]
    assert mixed["severity"] == "fail" and mixed["category"] == "image_dependency"
    assert any(e.startswith("CUDA 13: nvidia-cublas==13.0.0.19") for e in mixed["evidence"])
    info = found["HLT-IMG005"]
    assert (
        "vLLM 0.11.1.dev12+g5ded9e9aa; torch 2.9.0+cu130 (CUDA 13.0); NCCL 2.27.7; FlashInfer 0.4.1"
        in info["evidence"][0]
    )
    assert "host: driver 575.57.08, max CUDA 12.9, 8 GPU(s)" in info["evidence"][1]
    # the exact calls a real engine would get: GPUs requested, the image's API-server entrypoint overridden
    log = (fake_host.dir / "docker-argv.log").read_text().splitlines()
    argv = [line for line in log if line.startswith("docker run")]  # the -c probe itself spans lines
    assert argv[0] == f"docker run --rm --gpus all --entrypoint nvidia-smi {IMAGE}"
    assert argv[1].startswith(f"docker run --rm --gpus all --entrypoint python3 {IMAGE} -c import json")
    assert argv[2] == f"docker run --rm --gpus all --entrypoint python3 {IMAGE} -m pip list --format=freeze"


def test_toolkit_refuses_container_real_requirement_error(fake_host):
    _host(fake_host)
    err = data("docker/nvidia-container-cli-requirement-cuda-11.5-nvidia-docker-1772.txt")
    for name in ("docker-nvidia-smi", "docker-python3-versions", "docker-python3-pip"):
        fake_host.replay(name, err=err, rc=125)
    code, payload = fake_host.run_json("health", "--image", "nvidia/cuda:11.5.2-base-ubuntu20.04")
    assert code == 1
    found = ids(payload)
    f = found["HLT-IMG001"]
    assert f["severity"] == "fail" and f["category"] == "driver_cuda"
    assert any("unsatisfied condition: cuda>=11.5" in e for e in f["evidence"])
    assert "CUDA >= 11.5" in f["fix"][0]
    assert found["HLT-IMG005"]["severity"] == "warn"  # versions could not be read, said so


def test_container_sees_fewer_gpus_than_host(fake_host):
    _host(fake_host)  # host: 8x B200
    fake_host.replay("docker-nvidia-smi", out=data("nvidia-smi/a100-4gpu-555.42.02-cuda12.5-thamada.txt"))
    fake_host.replay("docker-python3-versions", out=data("docker/versions-probe-cu128-SYNTHETIC.txt"))
    fake_host.replay(
        "docker-python3-pip", out=data("docker/pip-freeze-cu128-vllm-0.11.1-from-collect-env.txt")
    )
    code, payload = fake_host.run_json("health", "--image", IMAGE)
    found = ids(payload)
    assert found["HLT-IMG003"]["severity"] == "fail"
    assert found["HLT-IMG003"]["title"] == "The container sees 4 of the host's 8 GPUs"
    # CUDA 12.8 torch on the container's driver 555.42.02: below 12.8's native minimum, inside the 12.x family
    assert found["HLT-IMG002"]["severity"] == "warn"
    assert "HLT-IMG004" not in found
    assert code == 1


def test_no_docker_client_degrades(fake_host):
    _host(fake_host)
    (fake_host.dir.parent / "bin" / "docker").unlink()
    fake_host.env["PATH"] = f"{fake_host.dir.parent / 'bin'}"  # nothing else: docker is surely absent
    code, payload = fake_host.run_json("health", "--image", IMAGE)
    f = ids(payload)["HLT-IMG001"]
    assert "not found on PATH" in " ".join(f["evidence"])
    assert payload["health"]["in_image"]["probes"]["nvidia-smi"]["missing"] is True
    assert list(payload["health"]["in_image"]["probes"]) == ["nvidia-smi"]


def test_version_probe_runs_in_a_real_interpreter():
    import subprocess
    import sys

    from vllm_medic.collect.health.in_image import VERSION_PROBE, parse_probe_output

    proc = subprocess.run([sys.executable, "-c", VERSION_PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = parse_probe_output(proc.stdout)
    assert got is not None and isinstance(got["dists"], dict)
    assert (
        "torch_cuda" in got or "torch_error" in got
    )  # this venv has no torch: the error is reported, not raised


def test_torch_blind_to_gpus_and_no_pip_in_image(fake_host):
    _host(fake_host)
    fake_host.replay(
        "docker-nvidia-smi", out=data("nvidia-smi/b200-8gpu-575.57.08-cuda12.9-modal-glossary.txt")
    )
    fake_host.replay(
        "docker-python3-versions", out=data("docker/versions-probe-torch-no-gpu-mixed-dists-SYNTHETIC.txt")
    )
    fake_host.replay("docker-python3-pip", err="/usr/bin/python3: No module named pip\n", rc=1)
    code, payload = fake_host.run_json("health", "--image", IMAGE)
    found = ids(payload)
    assert code == 1
    blind = found["HLT-IMG006"]
    assert blind["severity"] == "fail" and "cannot use the GPUs" in blind["title"]
    assert "torch.cuda.is_available() = False, device_count = 0" in blind["evidence"][0]
    # pip missing: the probe's own distribution list still shows the CUDA 12/13 mix
    assert found["HLT-IMG004"]["severity"] == "fail"
    assert payload["health"]["in_image"]["pip_error"] == "/usr/bin/python3: No module named pip"


def test_hung_container_is_killed_within_the_image_timeout(fake_host):
    import time

    _host(fake_host)
    fake_host.replay("docker-nvidia-smi", out="never\n", hang=120)
    fake_host.replay("docker-python3-versions", out="never\n", hang=120)
    fake_host.replay("docker-python3-pip", out="never\n", hang=120)
    started = time.monotonic()
    code, payload = fake_host.run_json("health", "--image", IMAGE, "--image-timeout", "1")
    assert time.monotonic() - started < 60
    f = ids(payload)["HLT-IMG001"]
    assert code == 1 and any("no answer within" in e for e in f["evidence"])
    assert all(p["timed_out"] for p in payload["health"]["in_image"]["probes"].values())
