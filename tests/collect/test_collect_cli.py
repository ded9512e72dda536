"""`vllm-medic collect` end to end: real subprocesses, fake tools on PATH replaying real outputs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tarfile
import time
from pathlib import Path

import pytest
from tests.collect.conftest import CLI, DATA, EXAMPLE, fake_env, run_cli


def _snapshot(proc: subprocess.CompletedProcess[str]) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def _status(manifest: dict) -> dict[str, str]:
    return {s["name"]: s["status"] for s in manifest["sources"]}


def _alive(pid: int) -> bool:
    """Running (a zombie left for an init that does not reap counts as ended)."""
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (ProcessLookupError, FileNotFoundError):
        return False
    return state != "Z"


def _log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_live_collect_on_an_h200_node(recordings, tmp_path):
    log = tmp_path / "calls.jsonl"
    bundle = tmp_path / "bundle"
    env = fake_env(
        recordings, {"FAKEBIN_LOG": str(log), "NCCL_SOCKET_IFNAME": "bond0", "HOME_DIR_IGNORED": "x"}
    )
    proc = run_cli(
        [
            "collect",
            "-o",
            str(bundle),
            "--image",
            "vllm/vllm-openai:latest",
            "--launch",
            str(EXAMPLE / "launch.txt"),
            "--json",
        ],
        env,
    )
    snap = _snapshot(proc)
    assert snap["driver"] == {
        "version": "570.124.06",
        "cuda_version": "12.8",
        "kernel_module_version": None,
        "nvml_library_version": None,
        "status": "ok",
        "status_detail": "",
        "open_kernel_module": None,
    }
    assert [g["memory_total_mib"] for g in snap["gpus"]] == [143771] * 8
    assert len(snap["gpu_processes"]) == 8 and snap["gpu_processes"][0]["pid"] == 915920
    assert len(snap["topology"]["devices"]) == 20 and snap["topology"]["nic_legend"]["NIC0"] == "mlx5_0"
    assert sorted(p["ib_dev"] for p in snap["rdma"] if p["state"] == "Down") == ["mlx5_2", "mlx5_8"]
    assert "nvidia_peermem" not in snap["kernel_modules"] and "nvidia" in snap["kernel_modules"]
    assert (
        snap["image"]["digest"].startswith("sha256:facbbd4a")
        and snap["image"]["tag"] == "vllm/vllm-openai:latest"
    )
    assert snap["vllm"]["version"] == "0.23.0" and snap["vllm"]["variant"] == "cu129"
    assert snap["launch"]["args"]["tensor_parallel_size"] == 8 and snap["launch"]["source"].startswith(
        "file:"
    )
    assert snap["env"]["NCCL_SOCKET_IFNAME"] == "bond0" and "HOME_DIR_IGNORED" not in snap["env"]
    # the raw outputs are in the bundle under canonical names, next to snapshot.json and manifest.json
    for name in (
        "nvidia-smi.txt",
        "nvidia-smi-topo-m.txt",
        "ibdev2netdev.txt",
        "lsmod.txt",
        "docker-image-inspect.json",
        "vllm-version.txt",
        "env.txt",
        "launch.txt",
        "container.txt",
        "snapshot.json",
        "manifest.json",
    ):
        assert (bundle / name).is_file(), name
    assert (bundle / "nvidia-smi.txt").read_text() == (EXAMPLE / "nvidia-smi.txt").read_text()
    manifest = _manifest(bundle)
    status = _status(manifest)
    assert (
        status["nvidia-smi"] == "ok"
        and status["nvidia-smi-topo-m"] == "ok"
        and status["ibdev2netdev"] == "ok"
    )
    assert status["nvidia-smi-q"] == "nonzero"  # the fake has no -q -x recording for this node: exits 1
    assert manifest["tool"] == "vllm-medic" and manifest["tool_version"]
    for entry in manifest["sources"]:
        assert {"name", "command", "started", "duration_s", "exit_code", "status", "file"} <= set(entry)
    # commands run directly with their argv (no shell): exactly these argument vectors reached the tools
    calls = {(c["tool"], tuple(c["argv"])) for c in _log(log) if "argv" in c}
    assert ("nvidia-smi", ("topo", "-m")) in calls
    assert ("docker", ("image", "inspect", "vllm/vllm-openai:latest")) in calls
    assert ("vllm", ("--version",)) in calls
    assert "bundle" in proc.stderr


def test_hung_nvidia_smi_costs_one_timeout_and_everything_else_is_collected(recordings, tmp_path):
    log = tmp_path / "calls.jsonl"
    bundle = tmp_path / "b"
    env = fake_env(recordings, {"FAKEBIN_NVIDIA_SMI_HANG": "child", "FAKEBIN_LOG": str(log)})
    proc = run_cli(["collect", "-o", str(bundle), "--timeout", "3"], env)
    assert proc.returncode == 0, proc.stderr
    manifest = _manifest(bundle)
    status = _status(manifest)
    for probe in ("nvidia-smi", "nvidia-smi-q", "nvidia-smi-query-gpu", "nvidia-smi-topo-m"):
        assert status[probe] == "timeout"
    assert status["lsmod"] == "ok" and status["ibdev2netdev"] == "ok" and status["vllm-version"] == "ok"
    # four probes hung for 3 s each, concurrently: the collection took about one timeout, not the sum
    assert 3.0 <= manifest["wall_s"] < 7.5
    snap = json.loads((bundle / "snapshot.json").read_text())
    assert snap["driver"]["status"] == "hung"
    err = next(e for e in snap["errors"] if e["source"] == "nvidia-smi")
    assert err["kind"] == "timeout" and "Xid" in err["message"] and "dmesg" in err["message"]
    assert "fallen off the bus" in err["message"]
    # the hung tools and the children they started were killed with their process group
    pids = [c.get("pid") or c.get("child_pid") for c in _log(log) if c["tool"] == "nvidia-smi"]
    assert len(pids) >= 8  # 4 invocations + 4 children

    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def test_no_driver_failure_text_and_nonzero_exit(recordings, tmp_path):
    (recordings / "nvidia-smi.txt").write_text(
        (DATA / "nvidia-smi-errors/no-driver-couldnt-communicate-curly-quote-two-lines.txt").read_text()
    )
    env = fake_env(recordings, {"FAKEBIN_NVIDIA_SMI_EXIT": "9"})
    snap = _snapshot(run_cli(["collect", "-o", str(tmp_path / "b"), "--json"], env))
    assert snap["driver"]["status"] == "no_driver"
    err = next(e for e in snap["errors"] if e["source"] == "nvidia-smi")
    assert err["kind"] == "nonzero" and err["exit_code"] == 9


def test_driver_library_mismatch(recordings, tmp_path):
    (recordings / "nvidia-smi.txt").write_text(
        (DATA / "nvidia-smi-errors/nvml-version-mismatch-570.124.txt").read_text()
    )
    env = fake_env(recordings, {"FAKEBIN_NVIDIA_SMI_EXIT": "18"})
    snap = _snapshot(run_cli(["collect", "-o", str(tmp_path / "b"), "--json"], env))
    assert (
        snap["driver"]["status"] == "version_mismatch" and snap["driver"]["nvml_library_version"] == "570.124"
    )


def test_machine_without_any_tool(recordings, tmp_path):
    env = fake_env(recordings, with_fakes=False)
    proc = run_cli(["collect", "-o", str(tmp_path / "b"), "--json"], env)
    snap = _snapshot(proc)
    assert snap["driver"]["status"] == "not_found"
    kinds = {e["source"]: e["kind"] for e in snap["errors"]}
    assert (
        kinds["nvidia-smi"] == "missing"
        and kinds["lsmod"] == "missing"
        and kinds["ibdev2netdev"] == "missing"
    )
    assert snap["python"]["packages"]  # the interpreter's own packages are still listed
    assert (tmp_path / "b" / "pip-freeze.txt").is_file()


def test_garbage_output_is_unparsable_and_the_rest_survives(recordings, tmp_path):
    env = fake_env(recordings, {"FAKEBIN_LSMOD_GARBAGE": "1", "FAKEBIN_IBDEV2NETDEV_GARBAGE": "1"})
    snap = _snapshot(run_cli(["collect", "-o", str(tmp_path / "b"), "--json"], env))
    kinds = {e["source"]: e["kind"] for e in snap["errors"]}
    assert kinds["lsmod"] == "unparsable" and kinds["ibdev2netdev"] == "unparsable"
    assert snap["driver"]["version"] == "570.124.06" and len(snap["gpus"]) == 8


def test_permission_denied_binary(recordings, tmp_path):
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / "ibdev2netdev").write_text("#!/bin/sh\necho never\n")  # not executable
    env = fake_env(recordings)
    env["PATH"] = f"{blocked}{os.pathsep}{env['PATH'].split(os.pathsep, 1)[1]}"
    snap = _snapshot(run_cli(["collect", "-o", str(tmp_path / "b"), "--json"], env))
    assert {e["source"]: e["kind"] for e in snap["errors"]}["ibdev2netdev"] == "permission"


@pytest.mark.parametrize("dest", ["bundle-dir", "bundle.tar.gz"])
def test_round_trip_collect_then_from_gives_the_same_snapshot(recordings, tmp_path, dest):
    out = tmp_path / dest
    env = fake_env(recordings)
    first = _snapshot(
        run_cli(
            [
                "collect",
                "-o",
                str(out),
                "--image",
                "vllm/vllm-openai:latest",
                "--launch",
                "vllm serve m -tp 8 --enable-prefix-caching",
                "--json",
            ],
            env,
        )
    )
    again = _snapshot(run_cli(["collect", "--from", str(out), "--json"], env))
    assert again == first
    if dest.endswith(".tar.gz"):
        with tarfile.open(out) as tar:
            names = {Path(m.name).name for m in tar.getmembers()}
        assert {"snapshot.json", "manifest.json", "nvidia-smi.txt", "launch.txt"} <= names
    else:
        stored = json.loads((out / "snapshot.json").read_text())
        assert stored == first


def test_from_the_shipped_example_without_a_manifest(tmp_path):
    proc = run_cli(["collect", "--from", str(EXAMPLE), "--json"], fake_env(tmp_path))
    snap = _snapshot(proc)
    assert snap["driver"]["version"] == "570.124.06" and len(snap["gpus"]) == 8
    assert snap["env"]["NCCL_DMABUF_ENABLE"] == "0"
    assert snap["launch"]["model"] == "moonshotai/Kimi-K3"
    # files the user did not paste are "not captured" in the manifest, not errors of the node
    assert not any(e["kind"] == "missing" for e in snap["errors"])
    bundle = tmp_path / "b"
    assert run_cli(["collect", "--from", str(EXAMPLE), "-o", str(bundle)], fake_env(tmp_path)).returncode == 0
    status = _status(_manifest(bundle))
    assert status["pip-freeze"] == "not_captured" and status["nvidia-smi"] == "ok"
    human = run_cli(["collect", "--from", str(EXAMPLE)], fake_env(tmp_path))
    assert human.returncode == 0 and "nvidia-smi" in human.stdout and "no bundle written" in human.stdout


@pytest.mark.parametrize(
    "make,needle",
    [
        (lambda p: p / "nope", "does not exist"),
        (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", "nor a terminal transcript"),
        (
            lambda p: (p / "d").mkdir() or (p / "d" / "notes.md").write_text("x") and p / "d",
            "no captured outputs",
        ),
        (
            lambda p: (p / "bad.tar.gz").write_bytes(b"\x1f\x8b\x08\x00garbage") and p / "bad.tar.gz",
            "cannot read",
        ),
    ],
)
def test_from_bad_paths_exit_2_with_a_message(tmp_path, make, needle):
    target = make(tmp_path)
    proc = run_cli(["collect", "--from", str(target)], fake_env(tmp_path))
    assert proc.returncode == 2
    assert needle in " ".join(proc.stderr.split()) and "Traceback" not in proc.stderr


def test_cannot_write_the_bundle_exits_3(recordings, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = run_cli(["collect", "-o", str(blocker / "bundle")], fake_env(recordings))
    assert proc.returncode == 3 and "cannot write the bundle" in " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr


def test_bad_timeout_is_a_usage_error(recordings):
    proc = run_cli(["collect", "--timeout", "0"], fake_env(recordings))
    assert proc.returncode == 2 and "--timeout" in proc.stderr


def test_secrets_never_reach_the_bundle(recordings, tmp_path):
    token = "hf_abcdefghijklmnopqrstuvwxyz0123"
    (recordings / "docker-image-inspect.json").write_text(
        json.dumps(
            [
                {  # SYNTHETIC inspect with a baked-in token
                    "Id": "sha256:" + "1" * 64,
                    "RepoTags": ["my/vllm:dev"],
                    "RepoDigests": [],
                    "Config": {
                        "Env": [f"HF_TOKEN={token}", "CUDA_VERSION=12.9.1"],
                        "Entrypoint": ["vllm", "serve"],
                    },
                }
            ]
        )
    )
    out = tmp_path / "b.tar.gz"
    env = fake_env(recordings, {"HF_TOKEN": token, "VLLM_API_KEY": "apikey-s3cr3t", "NCCL_DEBUG": "INFO"})
    proc = run_cli(
        [
            "collect",
            "-o",
            str(out),
            "--image",
            "my/vllm:dev",
            "--json",
            "--launch",
            f"vllm serve m --api-key apikey-s3cr3t --hf-token {token}",
        ],
        env,
    )
    snap = _snapshot(proc)
    assert snap["image"]["cuda_version"] == "12.9.1" and snap["env"]["NCCL_DEBUG"] == "INFO"
    with tarfile.open(out) as tar:
        for member in tar.getmembers():
            data = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
            assert token not in data and "apikey-s3cr3t" not in data, member.name
    assert token not in proc.stdout and token not in proc.stderr


def test_launch_from_docker_inspect_of_a_container(recordings, tmp_path):
    (recordings / "docker-inspect.json").write_text(
        json.dumps(
            [
                {  # SYNTHETIC container inspect
                    "Path": "vllm",
                    "Args": ["serve", "moonshotai/Kimi-K3", "-tp", "8"],
                    "Config": {
                        "Image": "vllm/vllm-openai:kimi-k3",
                        "Entrypoint": ["vllm", "serve"],
                        "Cmd": ["moonshotai/Kimi-K3", "-tp", "8", "--all2all-backend", "deepep_v2"],
                        "Env": ["UCX_TLS=tcp"],
                    },
                    "HostConfig": {"ShmSize": 67108864, "IpcMode": "private"},
                }
            ]
        )
    )
    snap = _snapshot(
        run_cli(
            ["collect", "-o", str(tmp_path / "b"), "--launch", "docker:vllm-k3", "--json"],
            fake_env(recordings),
        )
    )
    launch = snap["launch"]
    assert launch["source"] == "docker-inspect:vllm-k3" and launch["args"]["all2all_backend"] == "deepep_v2"
    assert (
        launch["runtime_options"] == {"shm_size": 67108864, "ipc": "private"}
        and launch["env"]["UCX_TLS"] == "tcp"
    )


def test_model_config_is_read(recordings, tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps({"architectures": ["KimiK3ForCausalLM"], "model_type": "kimi_k3"})
    )
    snap = _snapshot(
        run_cli(["collect", "-o", str(tmp_path / "b"), "--model", str(model), "--json"], fake_env(recordings))
    )
    assert snap["extra"]["model"]["architectures"] == ["KimiK3ForCausalLM"]


def test_ctrl_c_keeps_what_was_collected(recordings, tmp_path):
    log = tmp_path / "calls.jsonl"
    bundle = tmp_path / "b"
    env = fake_env(recordings, {"FAKEBIN_NVIDIA_SMI_HANG": "1", "FAKEBIN_LOG": str(log)})
    proc = subprocess.Popen(
        CLI + ["collect", "-o", str(bundle), "--timeout", "120"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # wait (bounded) until the four nvidia-smi calls hang and every other tool has come and gone
        others = {"lsmod", "ibdev2netdev", "vllm", "ip"}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            calls = _log(log)
            hung = sum(1 for c in calls if c["tool"] == "nvidia-smi")
            done = {c["tool"] for c in calls if c["tool"] in others and not _alive(c["pid"])}
            if hung >= 4 and done == others:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    manifest = _manifest(bundle)
    assert manifest["interrupted"] is True
    status = _status(manifest)
    assert status["nvidia-smi"] == "interrupted" and status["lsmod"] == "ok"
    assert "Traceback" not in err


def test_existing_non_empty_bundle_dir_is_refused_before_collecting(recordings, tmp_path):
    out = tmp_path / "old-bundle"
    out.mkdir()
    (out / "nvidia-smi.txt").write_text("from an older run\n")
    log = tmp_path / "calls.jsonl"
    proc = run_cli(["collect", "-o", str(out)], fake_env(recordings, {"FAKEBIN_LOG": str(log)}))
    assert proc.returncode == 2 and "not empty" in " ".join(proc.stderr.split())
    assert (out / "nvidia-smi.txt").read_text() == "from an older run\n"  # nothing overwritten
    assert not log.exists()  # and nothing was run


def test_from_can_rewrite_a_captured_directory_as_a_tarball(tmp_path):
    out = tmp_path / "example.tar.gz"
    env = fake_env(tmp_path)
    first = _snapshot(run_cli(["collect", "--from", str(EXAMPLE), "-o", str(out), "--json"], env))
    again = _snapshot(run_cli(["collect", "--from", str(out), "--json"], env))
    assert again == first and again["driver"]["version"] == "570.124.06"


def test_files_of_other_stages_travel_with_the_bundle(tmp_path):
    captured = tmp_path / "captured"
    captured.mkdir()
    for name in ("nvidia-smi.txt", "lsmod.txt"):
        (captured / name).write_text((EXAMPLE / name).read_text())
    (captured / "notes-from-the-user.txt").write_text("node7, after the reboot, token=hunter2hunter2\n")
    out = tmp_path / "b.tar.gz"
    proc = run_cli(["collect", "--from", str(captured), "-o", str(out)], fake_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    with tarfile.open(out) as tar:
        names = {Path(m.name).name: m for m in tar.getmembers()}
        assert "notes-from-the-user.txt" in names
        text = tar.extractfile(names["notes-from-the-user.txt"]).read().decode()  # type: ignore[union-attr]
        manifest = json.loads(tar.extractfile(names["manifest.json"]).read())  # type: ignore[union-attr]
    assert "node7" in text and "hunter2hunter2" not in text
    assert manifest["ignored_files"] == ["notes-from-the-user.txt"]


def test_launch_config_file_travels_with_the_bundle(recordings, tmp_path):
    (tmp_path / "k3.yaml").write_text("tensor-parallel-size: 8\nenable-prefix-caching: true\n")  # SYNTHETIC
    script = tmp_path / "serve.sh"
    script.write_text("vllm serve moonshotai/Kimi-K3 --config k3.yaml\n")
    out = tmp_path / "b.tar.gz"
    env = fake_env(recordings)
    live = _snapshot(run_cli(["collect", "-o", str(out), "--launch", str(script), "--json"], env))
    assert (
        live["launch"]["args"]["tensor_parallel_size"] == 8
        and live["launch"]["args"]["enable_prefix_caching"] is True
    )
    again = _snapshot(run_cli(["collect", "--from", str(out), "--json"], env))
    assert again["launch"] == live["launch"]


def test_from_a_single_pasted_transcript(tmp_path):
    transcript = DATA / "nvidia-smi-errors/nvml-version-mismatch-580.178-plus-proc-driver-version.txt"
    snap = _snapshot(run_cli(["collect", "--from", str(transcript), "--json"], fake_env(tmp_path)))
    assert snap["driver"]["status"] == "version_mismatch"
    assert snap["driver"]["nvml_library_version"] == "580.178"
    assert (
        snap["driver"]["kernel_module_version"] == "580.173.02"
    )  # from the `cat /proc/driver/nvidia/version` part


def test_json_into_a_closed_pipe_is_not_an_error(tmp_path):
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before anything is written: every write gets EPIPE
    try:
        proc = subprocess.run(
            CLI + ["collect", "--from", str(EXAMPLE), "--json"],
            env=fake_env(tmp_path),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 0 and "internal error" not in proc.stderr and "Traceback" not in proc.stderr


def test_launch_file_typo_is_a_usage_error_before_collecting(recordings, tmp_path):
    log = tmp_path / "calls.jsonl"
    proc = run_cli(
        ["collect", "-o", str(tmp_path / "b"), "--launch", str(tmp_path / "serve.sh")],
        fake_env(recordings, {"FAKEBIN_LOG": str(log)}),
    )
    assert proc.returncode == 2 and "no such file" in " ".join(proc.stderr.split())
    assert not log.exists() and not (tmp_path / "b").exists()
