"""What collect produces and the rules read agree: driver failure states, the toolkit probe, the
inspected Python environment, host vs container GPU counts.

Through the public CLI (`check --from DIR`, `doctor` as a subprocess) on real captured outputs
(tests/data/collect/SOURCES.md); launches, env dumps and pip lists written inline are SYNTHETIC.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vllm_medic.cli import app

DATA = Path(__file__).parents[1] / "data"
ERRORS = DATA / "collect" / "nvidia-smi-errors"
SMI = DATA / "collect" / "nvidia-smi"
NVCC = DATA / "collect" / "nvcc-version"
H200_8 = SMI / "h200-8gpu-570.124.06-cuda12.8-vllm-tp8-8-processes-truncated-names.txt"
B200_575 = SMI / "b200-8gpu-575.57.08-cuda12.9-idle-no-process-section-modal-glossary.txt"
GB300_580 = SMI / "gb300-4gpu-580.105.08-cuda13.0-oci-bm-gpu-gb300-4.txt"
GB200_POD_1 = SMI / "gb200-1gpu-580.126.20-cuda13.0-k8s-pod-no-processes-eks-p6e.txt"
COLLECT_ENV = (
    DATA / "collect" / "vllm-collect-env" / "vllm-0.11.1.dev-4x-a30-nv4-nic0-driver535.274.02-docker.txt"
)
PIP_NO_VLLM = DATA / "health" / "docker" / "pip-freeze-cu128-vllm-0.11.1-from-collect-env.txt"
BIN = Path(sys.executable).with_name("vllm-medic")
runner = CliRunner()


def bundle(tmp_path: Path, files: dict[str, Path | str]) -> Path:
    d = tmp_path / "captured"
    d.mkdir(exist_ok=True)
    for name, src in files.items():
        (d / name).write_text(src.read_text() if isinstance(src, Path) else src)
    return d


def check(d: Path, *args: str) -> tuple[int, dict[str, dict]]:
    res = runner.invoke(app, ["check", "--from", str(d), "--json", *args])
    assert res.exit_code in (0, 1), res.output
    return res.exit_code, {f["id"]: f for f in json.loads(res.stdout)["findings"]}


# ---------------------------------------------------------------- DRV001: every driver.status collect produces


@pytest.mark.parametrize(
    ("sample", "title", "evidence", "first_fix"),
    [
        (
            "gpu-is-lost-reboot-owod-81.txt",
            "GPU 0000:02:00.0 is lost",
            "nvidia-smi.txt:1 Unable to determine the device handle for GPU 0000:02:00.0: GPU is lost.",
            "xid",
        ),
        (
            "device-handle-unknown-error-prompt-syno-22.txt",
            "GPU 0000:07:00.0 is lost",
            "nvidia-smi.txt:2 Unable to determine the device handle for GPU0000:07:00.0: Unknown Error",
            "xid",
        ),
        (
            "no-devices-were-found-prompt-open-gpu-kernel-modules-862-EXCERPT.txt",
            "found no GPU",
            "nvidia-smi.txt:2 No devices were found",
            "--gpus all",
        ),
        (
            "insufficient-permissions-podman-cdi-container-toolkit-210.txt",
            "no permission",
            "nvidia-smi.txt:1 Failed to initialize NVML: Insufficient Permissions",
            "/dev/nvidia",
        ),
    ],
)
def test_drv001_names_the_failure_with_its_line_and_the_next_step(
    tmp_path, sample, title, evidence, first_fix
):
    code, fs = check(bundle(tmp_path, {"nvidia-smi.txt": ERRORS / sample}))
    drv = fs["DRV001"]
    assert code == 1 and drv["severity"] == "fail" and title in drv["title"], drv
    assert any(e.startswith(evidence) for e in drv["evidence"]), drv["evidence"]
    assert first_fix in drv["fix"][0].lower(), drv["fix"]


def test_nvml_unknown_error_in_a_container_says_recreate_it_and_why(tmp_path):
    d = bundle(
        tmp_path,
        {
            "nvidia-smi.txt": ERRORS
            / "nvml-unknown-error-container-after-daemon-reload-container-toolkit-1227.txt",
            "container.txt": "/.dockerenv: present\n",  # SYNTHETIC container evidence
        },
    )
    _, fs = check(d)
    f = fs["DRV001"]
    assert f["severity"] == "fail" and "this container has lost its GPU devices" in f["title"]
    assert "nvidia-smi.txt:1 Failed to initialize NVML: Unknown Error" in f["evidence"]
    assert "recreate the container" in f["fix"][0] and "create-dev-char-symlinks" in f["fix"][1]
    assert "https://github.com/NVIDIA/nvidia-docker/issues/1730" in f["docs"]


def test_gpu_lost_fix_follows_the_method_xid_then_lspci_then_drain_and_reset(tmp_path):
    _, fs = check(bundle(tmp_path, {"nvidia-smi.txt": ERRORS / "gpu-is-lost-reboot-owod-81.txt"}))
    fix = fs["DRV001"]["fix"]
    assert "dmesg" in fix[0] and "lspci -s 0000:02:00.0" in fix[1]
    assert "Drain" in fix[2] and "nvidia-smi -r -i 0000:02:00.0" in fix[2] and "reboot" in fix[2]


def test_drv001_passes_on_a_working_table(tmp_path):
    code, fs = check(bundle(tmp_path, {"nvidia-smi.txt": H200_8}))
    assert fs["DRV001"]["severity"] == "pass" and "570.124.06" in fs["DRV001"]["title"]


def test_mismatch_evidence_points_at_both_files(tmp_path):
    d = bundle(
        tmp_path,
        {"nvidia-smi.txt": ERRORS / "nvml-version-mismatch-570.124.txt"},
    )
    _, fs = check(d)
    ev = fs["DRV001"]["evidence"]
    assert "nvidia-smi.txt:2 NVML library version: 570.124" in ev
    assert any("kernel module not captured" in e for e in ev)


# ---------------------------------------------------------------- DRV003: nvcc --version


def test_drv003_toolkit_13_on_an_r575_driver_says_the_toolkit_is_not_the_driver(tmp_path):
    d = bundle(
        tmp_path,
        {"nvidia-smi.txt": B200_575, "nvcc-version.txt": NVCC / "nvcc-13.0.88-build-vm.txt"},
    )
    _, fs = check(d)
    f = fs["DRV003"]
    assert f["severity"] == "warn"
    assert "Toolkit CUDA 13.0 is installed, but driver 575.57.08 supports CUDA 12.9" in f["title"]
    assert "never upgrades the driver" in f["title"]
    assert "nvcc-version.txt:4 Cuda compilation tools, release 13.0, V13.0.88" in f["evidence"]
    assert any("580.65.06" in step for step in f["fix"])


def test_drv003_passes_when_the_driver_covers_the_toolkit(tmp_path):
    d = bundle(
        tmp_path,
        {"nvidia-smi.txt": GB300_580, "nvcc-version.txt": NVCC / "nvcc-11.5.119-llama-cpp-11696.txt"},
    )
    _, fs = check(d)
    assert fs["DRV003"]["severity"] == "pass" and "11.5" in fs["DRV003"]["title"]


def test_unreadable_nvcc_output_is_recorded_and_drv003_cannot_decide(tmp_path):
    d = bundle(tmp_path, {"nvidia-smi.txt": B200_575, "nvcc-version.txt": "\x00\x01 garbage\n"})
    res = runner.invoke(app, ["collect", "--from", str(d), "--json"])
    snap = json.loads(res.stdout)
    assert any(e["source"] == "nvcc-version" and e["kind"] == "unparsable" for e in snap["errors"])
    _, fs = check(d)
    assert fs["DRV003"]["severity"] == "not_checked"


def _doctor(path_dirs: list[Path], *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "UCX_", "CUDA_"))}
    env["PATH"] = os.pathsep.join([str(p) for p in path_dirs] + ["/usr/bin", "/bin"])
    proc = subprocess.run(
        [str(BIN), "doctor", "--json", *args], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _fake(bindir: Path, name: str, recording: Path) -> None:
    bindir.mkdir(exist_ok=True)
    p = bindir / name
    p.write_text(f"#!/bin/sh\ncat '{recording}'\n")
    p.chmod(0o755)


def test_doctor_without_a_driver_shows_the_toolkit_boundary(tmp_path):
    """This build machine's own case: CUDA 13.0 nvcc installed, no NVIDIA driver (recorded here)."""
    _fake(tmp_path / "bin", "nvcc", NVCC / "nvcc-13.0.88-build-vm.txt")
    data = _doctor([tmp_path / "bin"])
    fs = {f["id"]: f for f in data["findings"]}
    assert fs["DRV001"]["severity"] == "fail"
    drv3 = fs["DRV003"]
    assert drv3["severity"] == "info"
    assert "CUDA toolkit 13.0 is installed, but no NVIDIA driver answers" in drv3["title"]
    assert "nvcc-version.txt:4 Cuda compilation tools, release 13.0, V13.0.88" in drv3["evidence"]
    assert any("580.65.06" in e for e in drv3["evidence"])
    probe = {p["name"]: p for p in data["probes"]}["nvcc-version"]
    assert probe["status"] == "ok"


def test_doctor_toolkit_newer_than_a_live_driver_warns(tmp_path):
    _fake(tmp_path / "bin", "nvcc", NVCC / "nvcc-13.0.88-build-vm.txt")
    _fake(tmp_path / "bin", "nvidia-smi", B200_575)
    fs = {f["id"]: f for f in _doctor([tmp_path / "bin"])["findings"]}
    assert (
        fs["DRV003"]["severity"] == "warn" and "driver 575.57.08 supports CUDA 12.9" in fs["DRV003"]["title"]
    )


# ---------------------------------------------------------------- DRV004 / IMG003: whose environment


def test_live_collect_records_the_inspected_interpreter_and_drv004_says_not_the_server(tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    data = _doctor([empty])
    fs = {f["id"]: f for f in data["findings"]}
    drv4 = fs["DRV004"]
    assert drv4["severity"] == "not_checked" and "not the server's environment" in drv4["title"]
    assert any("no `vllm` on PATH" in e and "vLLM is not installed" in e for e in drv4["evidence"])


def test_vllm_script_interpreter_is_the_one_inspected(tmp_path):
    """A `vllm` script on PATH whose shebang names an interpreter: that environment is listed."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "vllm"
    script.write_text(f"#!{sys.executable}\nprint('0.11.0')\n")
    script.chmod(0o755)
    out = tmp_path / "bundle"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "UCX_"))}
    env["PATH"] = os.pathsep.join([str(bindir), "/usr/bin", "/bin"])
    proc = subprocess.run(
        [str(BIN), "collect", "-o", str(out), "--timeout", "30"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    snap = json.loads((out / "snapshot.json").read_text())
    pe = snap["python"]["origin"]
    assert pe["interpreter"] == sys.executable and str(script) in pe["origin"]
    assert pe["vllm_installed"] is False  # this test environment has no vLLM
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["options"]["python"] == sys.executable
    # the bundle re-reads to the same facts
    again = json.loads(runner.invoke(app, ["collect", "--from", str(out), "--json"]).stdout)
    assert again["python"]["origin"] == pe


def test_drv004_judges_a_server_environment_and_says_so(tmp_path):
    # SYNTHETIC pip list: the real cu128 list of a vLLM 0.11.1 host plus vllm and one cu13 stray
    freeze = PIP_NO_VLLM.read_text() + "vllm==0.11.0\nnvidia-cublas-cu13==13.0.0.19\n"
    _, fs = check(bundle(tmp_path, {"nvidia-smi.txt": H200_8, "pip-freeze.txt": freeze}))
    drv4 = fs["DRV004"]
    assert drv4["severity"] == "fail"
    assert any("vLLM installed: pip-freeze.txt:" in e and "vllm==0.11.0" in e for e in drv4["evidence"])


def test_drv004_downgrades_when_the_pip_list_has_no_vllm(tmp_path):
    # SYNTHETIC: the same list with a cu13 stray but no vllm (pip freeze run in the wrong environment)
    freeze = PIP_NO_VLLM.read_text() + "nvidia-cublas-cu13==13.0.0.19\n"
    _, fs = check(bundle(tmp_path, {"nvidia-smi.txt": H200_8, "pip-freeze.txt": freeze}))
    assert (
        fs["DRV004"]["severity"] == "not_checked" and "not the server's environment" in fs["DRV004"]["title"]
    )


def test_collect_env_counts_as_the_server_environment(tmp_path):
    _, fs = check(bundle(tmp_path, {"vllm-collect-env.txt": COLLECT_ENV}))
    assert fs["DRV004"]["severity"] == "pass"
    assert any("vllm-collect-env.txt" in e for e in fs["DRV004"]["evidence"])


def test_img003_says_where_the_version_came_from_and_that_the_image_may_differ():
    example = Path(__file__).parents[2] / "examples" / "captured-h200-node"
    _, fs = check(example, "--recipe", "kimi-k3")
    ev = fs["IMG003"]["evidence"]
    assert ev[0].startswith("vllm-version.txt:2 vLLM 0.23.0+cu129")
    assert any("the server runs image vllm/vllm-openai:latest" in e for e in ev)


# ---------------------------------------------------------------- LAY005: host vs container GPUs


def test_lay005_in_image_probe_sees_fewer_gpus_than_the_host(tmp_path):
    d = bundle(tmp_path, {"nvidia-smi.txt": H200_8, "in-image-nvidia-smi.txt": GB200_POD_1})
    snap = json.loads(runner.invoke(app, ["collect", "--from", str(d), "--json"]).stdout)
    vis = snap["gpu_visibility"]
    assert vis["host_gpu_count"] == 8 and vis["container_gpu_count"] == 1
    _, fs = check(d)
    f = fs["LAY005"]
    assert f["severity"] == "warn" and "sees 1 of the host's 8 GPUs" in f["title"]
    assert any("in-image-nvidia-smi.txt" in e for e in f["evidence"])


def test_lay005_in_image_probe_sees_all_gpus(tmp_path):
    _, fs = check(bundle(tmp_path, {"nvidia-smi.txt": H200_8, "in-image-nvidia-smi.txt": H200_8}))
    f = fs["LAY005"]
    assert f["severity"] == "pass" and any("a container sees 8 of 8" in e for e in f["evidence"])


@pytest.mark.parametrize(
    ("launch", "severity", "needle"),
    [
        ("docker run --gpus '\"device=0,1\"' vllm/vllm-openai:v0.11.0 m -tp 8", "warn", "2 of 8"),
        (
            "docker run --gpus '\"device=0,1\"' vllm/vllm-openai:v0.11.0 m -tp 2",
            "info",
            "deliberate partition",
        ),
        (
            "docker run --gpus all -e NVIDIA_VISIBLE_DEVICES=0,1,2,3 vllm/vllm-openai:v0.11.0 m -tp 8",
            "warn",
            "4 of 8",
        ),
        ("docker run --gpus all vllm/vllm-openai:v0.11.0 m -tp 8", "pass", "all 8"),
    ],
)
def test_lay005_launch_narrows_the_hosts_gpus(tmp_path, launch, severity, needle):
    # SYNTHETIC launches against the real 8x H200 table
    _, fs = check(bundle(tmp_path, {"nvidia-smi.txt": H200_8, "launch.txt": launch + "\n"}))
    f = fs["LAY005"]
    assert f["severity"] == severity and needle in f["title"], f


@pytest.mark.parametrize(
    ("visible", "severity", "needle"),
    [
        ("4,5,6,7", "warn", "the host has at least 8"),
        ("0,1,2,3", "not_checked", "host's GPU count is unknown"),
    ],
)
def test_lay005_inside_a_container_reads_host_indices(tmp_path, visible, severity, needle):
    # real 4-GPU GB300 table; SYNTHETIC container evidence and env (a pod given host GPUs by index)
    d = bundle(
        tmp_path,
        {
            "nvidia-smi.txt": GB300_580,
            "container.txt": "/.dockerenv: present\nKUBERNETES_SERVICE_HOST: 10.0.0.1\n",
            "env.txt": f"NVIDIA_VISIBLE_DEVICES={visible}\n",
        },
    )
    _, fs = check(d)
    f = fs["LAY005"]
    assert f["severity"] == severity and needle in f["title"], f
    if severity == "warn":
        assert "env.txt:1 NVIDIA_VISIBLE_DEVICES=4,5,6,7 (host indices)" in f["evidence"]


@pytest.fixture(autouse=True)
def _no_stray_bundles(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a live `collect` without -o writes into the working directory
    yield
    shutil.rmtree(tmp_path / "captured", ignore_errors=True)


# ---------------------------------------------------------------- facts collect fills, read by rules

T4 = DATA / "checks" / "bundles" / "t4-555-open-nvcc125"
V100_ERR = SMI / "v100-err-power-usage-narrow-azhpc-diagnostics-77-EXCERPT.txt"
MIG_TABLE = DATA / "collect" / "nvidia-smi-mig" / "a100-mig-devices-section-nvitop-8-EXCERPT.txt"
MIG_XML = DATA / "collect" / "nvidia-smi-q-x" / "a100-sxm4-40gb-mig-510.47.03-v11-netdata.xml"
PROPRIETARY = DATA / "checks" / "bundles" / "nvml-mismatch-580" / "proc-driver-nvidia-version.txt"


def test_drv006_err_rows_in_the_table_are_a_warning_with_the_line(tmp_path):
    _, fs = check(bundle(tmp_path, {"nvidia-smi.txt": V100_ERR}))
    f = fs["DRV006"]
    assert f["severity"] == "warn" and "ERR!" in f["title"]
    assert any(e.startswith("nvidia-smi.txt:3 | N/A   29C    P0   ERR! / 250W") for e in f["evidence"])
    _, fs = check(T4)
    assert fs["DRV006"]["severity"] == "pass"


def test_drv007_open_modules_pass_and_proprietary_on_blackwell_fails(tmp_path):
    _, fs = check(T4)
    f = fs["DRV007"]
    assert f["severity"] == "pass" and "Open Kernel Module" in f["evidence"][0]
    # composite of two real outputs from different machines: a B200 table and a proprietary-module banner
    d = bundle(tmp_path, {"nvidia-smi.txt": B200_575, "proc-driver-nvidia-version.txt": PROPRIETARY})
    _, fs = check(d)
    f = fs["DRV007"]
    assert f["severity"] == "fail" and "Proprietary kernel modules on b200" in f["title"]
    assert f["evidence"][0].startswith(
        "proc-driver-nvidia-version.txt:2 NVRM version: NVIDIA UNIX x86_64 Kernel Module"
    )


def test_drv003_real_node_with_toolkit_and_driver_on_the_same_cuda(tmp_path):
    _, fs = check(T4)
    assert fs["DRV003"]["severity"] == "pass"
    assert fs["DRV003"]["evidence"][0] == "nvcc-version.txt:4 Cuda compilation tools, release 12.5, V12.5.40"


@pytest.mark.parametrize("source", ["table", "xml"])
def test_lay006_mig_enabled(tmp_path, source):
    files = {"nvidia-smi.txt": MIG_TABLE} if source == "table" else {"nvidia-smi-q.xml": MIG_XML}
    files["launch.txt"] = "vllm serve m --tensor-parallel-size 2\n"  # SYNTHETIC launch
    _, fs = check(bundle(tmp_path, files))
    f = fs["LAY006"]
    assert f["severity"] == "warn" and "MIG splits GPU(s)" in f["title"], f
    assert any("19968 MiB each" in e for e in f["evidence"])
    _, fs = check(T4)
    assert fs["LAY006"]["severity"] == "pass"


def test_drv002_reads_the_cuda_of_a_cu129_vllm_build(tmp_path):
    d = bundle(
        tmp_path,
        {
            "nvidia-smi.txt": H200_8,
            "vllm-version.txt": DATA / "collect" / "vllm-version" / "local-version-suffix-0.23.0+cu129.txt",
        },
    )
    _, fs = check(d)
    f = fs["DRV002"]
    assert f["severity"] == "warn" and "CUDA 12.9 only under minor-version compatibility" in f["title"]
    assert any("vLLM 0.23.0+cu129 is a CUDA 12.9 build" in e for e in f["evidence"])
    # the same build on a driver that covers CUDA 13.0 passes
    d2 = tmp_path / "b2"
    d2.mkdir()
    (d2 / "nvidia-smi.txt").write_text(GB300_580.read_text())
    (d2 / "vllm-version.txt").write_text((d / "vllm-version.txt").read_text())
    _, fs = check(d2)
    assert fs["DRV002"]["severity"] == "pass"


def test_truncated_image_inspect_is_named_when_its_cuda_is_unknown(tmp_path):
    example = Path(__file__).parents[2] / "examples" / "captured-h200-node"
    d = bundle(
        tmp_path,
        {"nvidia-smi.txt": H200_8, "docker-image-inspect.json": example / "docker-image-inspect.json"},
    )
    _, fs = check(d)
    f = fs["DRV002"]
    assert f["severity"] == "not_checked"
    assert "image vllm/vllm-openai:latest: docker-image-inspect.json has no CUDA_VERSION" in f["evidence"][1]


def test_torch_of_a_non_server_environment_is_not_judged(tmp_path):
    # SYNTHETIC pip list: the real cu128 list (torch 2.8.0+cu128) without vLLM, beside a CUDA 13 driver table
    image = '[{"RepoTags": ["vllm/vllm-openai:v0.11.0"], "Config": {"Env": ["CUDA_VERSION=13.0.1"]}}]'
    files = {"nvidia-smi.txt": B200_575, "pip-freeze.txt": PIP_NO_VLLM, "docker-image-inspect.json": image}
    _, fs = check(bundle(tmp_path, files))
    for rule_id in ("DRV005", "IMG005"):
        assert fs[rule_id]["severity"] == "not_checked"
        assert "not the server's environment" in fs[rule_id]["title"]
    # the same list with vLLM in it is the server's: torch cu128 inside a CUDA 13 image fails IMG005
    (tmp_path / "captured" / "pip-freeze.txt").write_text(PIP_NO_VLLM.read_text() + "vllm==0.11.0\n")
    _, fs = check(tmp_path / "captured")
    assert fs["IMG005"]["severity"] == "fail"


def test_driver_evidence_points_at_the_file_that_carried_it(tmp_path):
    _, fs = check(bundle(tmp_path, {"nvidia-smi-q.xml": MIG_XML}))
    assert fs["DRV001"]["evidence"] == ["nvidia-smi-q.xml:5 Driver Version: 510.47.03, CUDA Version 11.6"]
