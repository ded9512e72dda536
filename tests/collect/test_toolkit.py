"""`nvcc --version`: the parser on real outputs, the transcript command, and the live probe."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tests.collect.conftest import DATA, fake_env, run_cli

from vllm_medic.collect.api import load_captured
from vllm_medic.collect.parsers.toolkit import parse_nvcc_version


@pytest.mark.parametrize(
    ("sample", "release", "version", "build"),
    [
        ("nvcc-13.0.88-build-vm.txt", "13.0", "13.0.88", "cuda_13.0.r13.0/compiler.36424714_0"),
        ("nvcc-11.5.119-llama-cpp-11696.txt", "11.5", "11.5.119", "cuda_11.5.r11.5/compiler.30672275_0"),
        ("nvcc-11.0.194-bu-build-line-k2-584.txt", "11.0", "11.0.194", "cuda_11.0_bu.TC445_37.28540450_0"),
        ("nvcc-10.1.243-no-build-line-k2-584.txt", "10.1", "10.1.243", None),
    ],
)
def test_real_nvcc_outputs(sample, release, version, build):
    r = parse_nvcc_version((DATA / "nvcc-version" / sample).read_text())
    assert (r.release, r.version, r.build, r.problems) == (release, version, build, [])


def test_build_line_alone_still_gives_the_release():
    # SYNTHETIC: a paste that kept only the last line
    r = parse_nvcc_version("Build cuda_13.0.r13.0/compiler.36424714_0\n")
    assert r.release == "13.0" and r.problems == []


def test_not_installed_is_a_problem_not_a_version():
    r = parse_nvcc_version("bash: nvcc: command not found\n")
    assert r.release is None and "not installed" in r.problems[0]


def test_transcript_prompt_selects_the_canonical_file(tmp_path):
    sample = (DATA / "nvcc-version" / "nvcc-13.0.88-build-vm.txt").read_text()
    smi = (DATA / "nvidia-smi-errors" / "gpu-is-lost-reboot-owod-81.txt").read_text()
    paste = tmp_path / "paste.txt"
    paste.write_text(f"$ /usr/local/cuda/bin/nvcc --version\n{sample}$ nvidia-smi\n{smi}")
    result = load_captured(paste)
    assert (
        result.raw["nvcc-version.txt"]
        .decode()
        .startswith("$ /usr/local/cuda/bin/nvcc --version\nnvcc: NVIDIA (R) Cuda compiler driver")
    )
    assert result.snapshot.toolkit.nvcc_version == "13.0.88"
    assert result.snapshot.toolkit.cuda_version == "13.0"
    assert result.snapshot.driver.status == "gpu_lost"


def test_live_probe_runs_nvcc_and_stores_its_output(tmp_path, recordings):
    bindir = tmp_path / "nvcc-bin"
    bindir.mkdir()
    nvcc = bindir / "nvcc"
    recording = DATA / "nvcc-version" / "nvcc-11.5.119-llama-cpp-11696.txt"
    # the fake PATH holds no coreutils: the fake prints the recording with this interpreter
    nvcc.write_text(f"#!{sys.executable}\nprint(open({str(recording)!r}).read(), end='')\n")
    nvcc.chmod(0o755)
    env = fake_env(recordings)
    env["PATH"] = f"{bindir}:{env['PATH']}"
    out = tmp_path / "b"
    res = run_cli(["collect", "-o", str(out), "--timeout", "20"], env)
    assert res.returncode == 0, res.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    entry = {s["name"]: s for s in manifest["sources"]}["nvcc-version"]
    assert entry["status"] == "ok" and entry["command"] == f"{nvcc} --version"
    snap = json.loads((out / "snapshot.json").read_text())
    assert snap["toolkit"]["cuda_version"] == "11.5"
    assert Path(out / "nvcc-version.txt").read_text().count("release 11.5") == 1
    assert "toolkit CUDA 11.5 (nvcc; not the driver)" in res.stdout + res.stderr


def test_live_probe_without_nvcc_is_missing_not_an_error(tmp_path, recordings):
    env = fake_env(recordings)
    env["CUDA_HOME"] = str(tmp_path / "no-cuda")  # PATH and CUDA_HOME hold no nvcc
    out = tmp_path / "b"
    res = run_cli(["collect", "-o", str(out), "--timeout", "20"], env)
    assert res.returncode == 0, res.stderr
    entry = {s["name"]: s for s in json.loads((out / "manifest.json").read_text())["sources"]}["nvcc-version"]
    if Path("/usr/local/cuda/bin/nvcc").exists():  # the default toolkit location is still tried
        assert entry["status"] == "ok"
    else:
        assert entry["status"] == "missing"
