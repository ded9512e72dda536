"""The health facts are typed (``Snapshot.health``): they round-trip through snapshot.json in the shape
the probes always wrote, and a snapshot.json from before (``extra["health"]``) is read and judged the same."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from vllm_medic.checks.api import run_checks
from vllm_medic.cli import app
from vllm_medic.collect.health.probe import from_files
from vllm_medic.recipes.loader import load_recipe
from vllm_medic.snapshot import Snapshot
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
