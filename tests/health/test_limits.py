"""Container limits: /dev/shm, ulimit -l / -n, cgroup memory vs what vLLM needs (captured files and live)."""

from __future__ import annotations

import json
from pathlib import Path

from healthkit import data, ids
from typer.testing import CliRunner

from vllm_medic.cli import app
from vllm_medic.collect.health.limits import parse_cgroup_memory, parse_df_shm, parse_ulimit, probe_live
from vllm_medic.records import to_plain
from vllm_medic.snapshot_health import Rlimit

runner = CliRunner()


def test_parsers():
    assert (
        parse_df_shm(data("limits/df-k-dev-shm-docker-default-64m-SYNTHETIC.txt")).size_bytes == 64 * 1024**2
    )
    ul = parse_ulimit(data("limits/ulimit-a-bash-memlock-8192-SYNTHETIC.txt"))
    assert ul.to_dict() == {"memlock_bytes": 8192 * 1024, "nofile": 1024}
    unlimited = parse_ulimit("memlock=unlimited\nnofile=1048576\n")
    assert unlimited.to_dict() == {"memlock_bytes": None, "nofile": 1048576}
    assert unlimited.memlock_bytes == Rlimit(None) and unlimited.nofile_hard is None  # unlimited, not shown
    assert (
        parse_cgroup_memory(data("limits/cgroup-v2-memory-max-32g-SYNTHETIC.txt")).limit_bytes == 32 * 1024**3
    )
    assert (
        parse_cgroup_memory(data("limits/cgroup-v1-limit-in-bytes-unlimited-SYNTHETIC.txt")).limit_bytes
        is None
    )
    assert to_plain(parse_cgroup_memory("max\n")) == {"limit_bytes": None, "known": True}
    assert parse_df_shm("garbage").size_bytes is None and parse_ulimit("\x00\x01").to_dict() == {}


def _bundle(tmp_path: Path, snapshot: dict | None = None) -> Path:
    d = tmp_path / "b"
    d.mkdir()
    (d / "shm.txt").write_text(data("limits/df-k-dev-shm-docker-default-64m-SYNTHETIC.txt"))
    (d / "ulimit.txt").write_text(data("limits/ulimit-a-bash-memlock-8192-SYNTHETIC.txt"))
    (d / "cgroup-memory.txt").write_text(data("limits/cgroup-v2-memory-max-32g-SYNTHETIC.txt"))
    if snapshot is not None:
        (d / "snapshot.json").write_text(json.dumps(snapshot))
    return d


def test_docker_defaults_on_an_rdma_tp8_node(tmp_path):
    snap = {
        "rdma": [{"ib_dev": "mlx5_0", "port": 1, "netdev": "ibp26s0", "state": "Up"}],
        "launch": {"args": {"tensor_parallel_size": 8, "swap_space": 4}},
    }
    res = runner.invoke(app, ["health", "--from", str(_bundle(tmp_path, snap)), "--json"])
    assert res.exit_code == 1, res.output
    found = ids(json.loads(res.stdout))
    shm = found["HLT-LIM001"]
    assert (
        shm["severity"] == "fail"
        and shm["title"] == "/dev/shm is only 64 MiB (Docker's default without --ipc=host or --shm-size)"
    )
    assert "--ipc=host" in shm["fix"][0]
    ml = found["HLT-LIM002"]
    assert ml["severity"] == "fail" and "RDMA devices" in ml["title"] and "mlx5_0" in ml["evidence"][1]
    assert "--ulimit memlock=-1" in ml["fix"][0]
    assert (
        found["HLT-LIM003"]["severity"] == "warn"
        and found["HLT-LIM003"]["title"] == "Open-files limit (ulimit -n) is 1024"
    )
    mem = found["HLT-LIM004"]
    # 8 workers x (4 GiB baseline + 4 GiB swap) = 64 GiB > 32 GiB
    assert mem["severity"] == "fail" and mem["category"] == "oom_startup"
    assert mem["title"] == "Container memory limit 32.0 GiB is below the CPU memory vLLM needs (~64.0 GiB)"


def test_single_gpu_without_rdma_is_milder(tmp_path):
    res = runner.invoke(app, ["health", "--from", str(_bundle(tmp_path)), "--tp", "1", "--json"])
    found = ids(json.loads(res.stdout))
    assert found["HLT-LIM001"]["severity"] == "warn"
    assert found["HLT-LIM002"]["severity"] == "info"
    assert found["HLT-LIM004"]["severity"] == "pass"  # 1 x (4 + 4) GiB fits in 32 GiB
    assert res.exit_code == 0
    strict = runner.invoke(app, ["health", "--from", str(tmp_path / "b"), "--tp", "1", "--strict", "--json"])
    assert strict.exit_code == 1


def test_live_limits_are_read_from_this_process():
    facts, raw = probe_live()
    assert facts.shm is not None and facts.ulimit is not None
    assert facts.shm.size_bytes is None or facts.shm.size_bytes > 0
    assert facts.ulimit.memlock_bytes is not None and facts.ulimit.nofile is not None
    assert parse_ulimit(raw["ulimit.txt"]).nofile == facts.ulimit.nofile
    if "shm.txt" in raw:
        assert facts.shm.size_bytes is not None
        assert parse_df_shm(raw["shm.txt"]).size_bytes == facts.shm.size_bytes // 1024 * 1024


def test_junit_output(tmp_path):
    out = tmp_path / "health.xml"
    res = runner.invoke(app, ["health", "--from", str(_bundle(tmp_path)), "--tp", "8", "--junit", str(out)])
    assert res.exit_code == 1
    xml = out.read_text()
    assert 'name="HLT-LIM001 /dev/shm is only 64 MiB' in xml and "<failure" in xml


def test_bad_input_is_a_usage_error_without_traceback(fake_host, tmp_path):
    proc = fake_host.run_cli("health", "--from", str(tmp_path / "nope"))
    assert (
        proc.returncode == 2
        and "no such directory or bundle" in proc.stderr
        and "Traceback" not in proc.stderr
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = fake_host.run_cli("health", "--from", str(empty))
    assert proc.returncode == 2 and "none of the expected files" in proc.stderr
    bad = _bundle(tmp_path)
    (bad / "snapshot.json").write_text("{not json")
    proc = fake_host.run_cli("health", "--from", str(bad))
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr and "Traceback" not in proc.stderr
