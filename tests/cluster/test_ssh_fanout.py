"""SSH fan-out against real OpenSSH servers on loopback, one per simulated node."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.cluster.conftest import DATA, FAKEBIN, LocalSshd, free_port, recordings, sshd_available

from pty_run import run_on_tty, tty_env
from vllm_medic.cluster.bundle import load_multinode, write_multinode_bundle
from vllm_medic.cluster.fanout import SshTarget, collect_ssh, parse_hosts_file
from vllm_medic.collect.api import CollectOptions
from vllm_medic.errors import UsageError

reason = sshd_available()
pytestmark = pytest.mark.skipif(reason is not None, reason=reason or "")

GOOD_LSMOD = DATA / "cluster" / "lsmod-rdma-peermem-loaded-SYNTHETIC.txt"
# once dropped by the remote probe's own, shorter prefix list (issue 13); a local collection keeps them
LAUNCHER_ENV = {
    "RANK": "0",
    "WORLD_SIZE": "2",
    "FI_PROVIDER": "efa",
    "TORCHINDUCTOR_CACHE_DIR": "/tmp/inductor",
}
BAD_LSMOD = DATA / "collect" / "lsmod" / "lsmod-grep-nvidia-rhel8-no-uvm-no-peermem-data-science-stack-90.txt"


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ssh")
    good = recordings(tmp, "good", "gb300-4gpu-580.105.08-cuda13.0-oci-bm-gpu-gb300-4.txt", GOOD_LSMOD)
    bad = recordings(tmp, "bad", "gb300-4gpu-580.105.08-cuda13.0-oci-bm-gpu-gb300-4.txt", BAD_LSMOD)
    python_dir = os.path.dirname(shutil.which("python3") or "/usr/bin/python3")
    path = f"{FAKEBIN}:{python_dir}:/usr/bin:/bin"
    servers = [
        LocalSshd(
            tmp / "a",
            free_port(),
            {"PATH": path, "FAKEBIN_DIR": str(good), "NCCL_IB_HCA": "mlx5_0", **LAUNCHER_ENV},
        ),
        LocalSshd(tmp / "b", free_port(), {"PATH": path, "FAKEBIN_DIR": str(bad), "NCCL_IB_HCA": "mlx5_0"}),
    ]
    # one client key authorised on both servers
    shared = (tmp / "a" / "client_key.pub").read_bytes()
    (tmp / "b" / "authorized_keys").write_bytes(shared)
    yield servers
    for s in servers:
        s.stop()


def test_hosts_file_parsing(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("# cluster\nnode-a\nroot@node-b:2222  # second\n\n")
    assert parse_hosts_file(f) == [SshTarget("node-a"), SshTarget("node-b", 2222, "root")]
    f.write_text("node a b\n")
    with pytest.raises(UsageError, match="hosts:1"):
        parse_hosts_file(f)


def test_collect_over_ssh_and_compare(two_nodes, tmp_path):
    a, b = two_nodes
    targets = [
        SshTarget("127.0.0.1", a.port, "root"),
        SshTarget("127.0.0.1", b.port, "root"),
        SshTarget("127.0.0.1", free_port(), "root"),
    ]  # nothing listens on the third
    cols = collect_ssh(
        targets, CollectOptions(timeout_s=10), key_filename=a.client_key, accept_new_host_keys=True
    )
    by = {c.node: c for c in cols}
    ok = [c for c in cols if c.ok]
    assert len(ok) == 2, [c.error for c in cols]
    failed = by[targets[2].name]
    assert failed.error and "127.0.0.1" in failed.error
    snap = by[targets[0].name].result.snapshot
    assert snap.driver.version == "580.105.08" and len(snap.gpus) == 4
    assert "nvidia_peermem" in snap.kernel_modules
    assert {k: snap.env.get(k) for k in LAUNCHER_ENV} == LAUNCHER_ENV
    origin = snap.python.origin.origin if snap.python.origin else None
    assert origin and ("on the node" in origin or "node's python3" in origin)
    assert (
        by[targets[1].name].result.snapshot.kernel_modules
        and "nvidia_peermem" not in by[targets[1].name].result.snapshot.kernel_modules
    )

    out = write_multinode_bundle(cols, tmp_path / "cluster.tar.gz")
    summary, nodes = load_multinode(out)
    assert {n["status"] for n in summary["nodes"]} == {"ok", "failed"}
    assert set(nodes) == {targets[0].name, targets[1].name}
    ids = {f["id"] for f in summary["consistency"]["findings"]}
    assert "CLU011" in ids and "CLU001" not in ids
    assert json.dumps(summary)  # plain data


PROGRESS = re.compile(r"collect via ssh: nodes answered (\d+)/(\d+), failures (\d+), \d+ s")


def test_collect_hosts_draws_nodes_answered_on_a_terminal_only(two_nodes, tmp_path):
    a, b = two_nodes
    hosts = tmp_path / "hosts"
    hosts.write_text(f"root@127.0.0.1:{a.port}\nroot@127.0.0.1:{b.port}\nroot@127.0.0.1:{free_port()}\n")
    exe = str(Path(sys.executable).with_name("vllm-medic"))
    cmd = [
        exe,
        "collect",
        "--hosts",
        str(hosts),
        "--ssh-key",
        a.client_key,
        "--ssh-accept-new",
        "--timeout",
        "10",
    ]
    code, text = run_on_tty([*cmd, "-o", str(tmp_path / "tty-bundle")])
    assert code == 0, text[-3000:]
    drawn = [tuple(int(g) for g in m.groups()) for m in PROGRESS.finditer(text)]
    assert drawn and {planned for _a, planned, _f in drawn} == {3}, text[-3000:]
    assert all(answered + failed <= 3 and answered <= 2 and failed <= 1 for answered, _p, failed in drawn)
    assert "(2/3 nodes collected)" in text  # the result follows the erased line
    for extra in ((), ("--json",)):
        proc = subprocess.run(
            [*cmd, "-o", str(tmp_path / f"pipe{len(extra)}"), *extra],
            capture_output=True, text=True, env=tty_env(), timeout=120,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert not PROGRESS.search(proc.stdout + proc.stderr), proc.stderr[-2000:]
