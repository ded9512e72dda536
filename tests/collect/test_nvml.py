"""NVML through nvidia-ml-py when importable. No GPU here, so a SYNTHETIC `pynvml` module with the
same call names stands in for the library (it cannot run on this machine)."""

from __future__ import annotations

import json

from tests.collect.conftest import ROOT, fake_env, run_cli

FAKE_PYNVML = """
import os, time
class _Mem:
    total = 143771 * 1024 * 1024
    used = 84474 * 1024 * 1024
class _Pci:
    busId = b"00000000:19:00.0"
def nvmlInit():
    if os.environ.get("FAKE_NVML_HANG"):
        while True:
            time.sleep(3600)
def nvmlShutdown(): pass
def nvmlSystemGetDriverVersion(): return "570.124.06"
def nvmlSystemGetCudaDriverVersion(): return 12080
def nvmlDeviceGetCount(): return 2
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetMemoryInfo(h): return _Mem()
def nvmlDeviceGetName(h): return b"NVIDIA H200"
def nvmlDeviceGetUUID(h): return f"GPU-{h:08d}"
def nvmlDeviceGetPciInfo(h): return _Pci()
"""


def _env(tmp_path, recordings, extra=None):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "pynvml.py").write_text(FAKE_PYNVML)
    env = fake_env(recordings, extra, with_fakes=False)
    env["PYTHONPATH"] = f"{ROOT / 'src'}:{lib}"
    return env


def test_nvml_fills_driver_and_gpus_when_nvidia_smi_is_absent(tmp_path, recordings):
    out = tmp_path / "b"
    proc = run_cli(["collect", "-o", str(out), "--json"], _env(tmp_path, recordings))
    assert proc.returncode == 0, proc.stderr
    snap = json.loads(proc.stdout)
    assert snap["driver"]["version"] == "570.124.06" and snap["driver"]["cuda_version"] == "12.8"
    assert [(g["name"], g["memory_total_mib"], g["memory_used_mib"]) for g in snap["gpus"]] == [
        ("NVIDIA H200", 143771, 84474)
    ] * 2
    assert json.loads((out / "nvml.json").read_text())["gpus"][1]["uuid"] == "GPU-00000001"


def test_hung_nvml_is_a_timeout_not_a_hang(tmp_path, recordings):
    out = tmp_path / "b"
    proc = run_cli(
        ["collect", "-o", str(out), "--timeout", "2"], _env(tmp_path, recordings, {"FAKE_NVML_HANG": "1"})
    )
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    nvml = next(s for s in manifest["sources"] if s["name"] == "nvml")
    assert nvml["status"] == "timeout" and manifest["wall_s"] < 6


def test_without_nvidia_ml_py_the_source_is_not_applicable(tmp_path, recordings):
    out = tmp_path / "b"
    proc = run_cli(["collect", "-o", str(out)], fake_env(recordings))
    assert proc.returncode == 0
    manifest = json.loads((out / "manifest.json").read_text())
    nvml = next(s for s in manifest["sources"] if s["name"] == "nvml")
    assert nvml["status"] == "not_applicable" and "nvidia-ml-py" in nvml["message"]
