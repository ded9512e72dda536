"""Benchmark: collecting 64 nodes, simulated on this machine, over real SSH.

Real OpenSSH servers listen on 64 loopback addresses (127.0.0.1 … 127.0.0.64, 16 per server);
each address is one "node" of the hosts file. Every node runs the real probe runner over SSH with the
full probe list; on one 2-core machine the 64 nodes' own tools cannot all run for real at once, so by
default (`--tools replay`) each tool on the nodes' PATH is a tiny shell stub replaying a real capture
(`examples/captured-h200-node`), which keeps the figure about the fan-out (SSH sessions, transfer,
parsing, bundle) rather than about 64 nodes' worth of `nvidia-smi` sharing two cores.
`--tools real` uses this machine's own tools instead. Prints, for N runs each, the median wall time of:

  baseline  one node       (the same fan-out code, a hosts file of one node)
  target    64 nodes       (target: under 10 s wall)

and the ratio target/baseline: with perfect concurrency it stays near 1, a sequential fan-out would
be near 64.

Usage: python bench/bench_cluster_collect.py [--nodes 64] [--runs 3]   (root; needs /usr/sbin/sshd)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cluster.conftest import free_port  # noqa: E402

from vllm_medic.cluster.fanout import SshTarget, collect_ssh  # noqa: E402
from vllm_medic.collect.api import CollectOptions  # noqa: E402

SOCKETS_PER_SSHD = 16  # OpenSSH's MAX_LISTEN_SOCKS


EXAMPLE = ROOT / "examples" / "captured-h200-node"
# the real interpreter, not a version-manager shim (a pyenv shim alone costs ~0.2 s per call)
PYTHON = os.path.realpath(sys.executable)
STUB_TOOLS = ("ibdev2netdev", "ip", "lsmod", "uname", "dmesg", "journalctl", "systemctl", "df")


def make_stubs(d: Path) -> Path:
    """Shell stubs replaying the example node's real captures; `vllm`'s shebang names the stub
    interpreter that answers the pip-freeze probe, as a real vLLM venv's would."""
    d.mkdir()
    rec = {
        name: EXAMPLE / f"{name}.txt"
        for name in ("nvidia-smi", "nvidia-smi-topo-m", "ibdev2netdev", "lsmod", "vllm-version")
    }

    def stub(name: str, body: str) -> None:
        (d / name).write_text(f"#!/bin/sh\n{body}\n")
        (d / name).chmod(0o755)

    stub(
        "nvidia-smi",
        f'case "$1" in topo) exec cat {rec["nvidia-smi-topo-m"]};; "") exec cat {rec["nvidia-smi"]};; '
        "*) exit 6;; esac",
    )
    stub("ibdev2netdev", f"exec cat {rec['ibdev2netdev']}")
    stub("lsmod", f"exec cat {rec['lsmod']}")
    for name in ("ip", "uname", "dmesg", "journalctl", "systemctl", "df"):
        stub(name, "exit 0")
    stub("venv-python", "echo vllm==0.27.1; echo torch==2.9.0+cu130; echo nvidia-nccl-cu13==2.28.3")
    (d / "vllm").write_text(f"#!{d / 'venv-python'}\nexec cat {rec['vllm-version']}\n")
    (d / "vllm").chmod(0o755)
    return d


def start_sshd(root: Path, port: int, first: int, last: int, path: str) -> subprocess.Popen[bytes]:
    listen = "".join(f"ListenAddress 127.0.0.{i}:{port}\n" for i in range(first, last + 1))
    (root / "sshd_config").write_text(
        f"{listen}SetEnv PATH={path}\nHostKey {root / 'host_key'}\nAuthorizedKeysFile {root / 'authorized_keys'}\n"
        f"PidFile {root / 'sshd.pid'}\nStrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\n"
        "PasswordAuthentication no\nMaxStartups 200:30:400\nMaxSessions 64\n"
    )
    Path("/run/sshd").mkdir(exist_ok=True)
    proc = subprocess.Popen(
        ["/usr/sbin/sshd", "-D", "-f", str(root / "sshd_config"), "-E", str(root / "log")]
    )
    import socket

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((f"127.0.0.{first}", port), timeout=0.5) as s:
                if s.recv(4).startswith(b"SSH-"):
                    return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"sshd did not start: {(root / 'log').read_text(errors='replace')[-500:]}")


CPU: list[float] = []


def run(targets: list[SshTarget], key: str) -> float:
    import resource

    c0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.monotonic()
    cols = collect_ssh(
        targets,
        CollectOptions(timeout_s=10),
        key_filename=key,
        accept_new_host_keys=True,
        remote_python=PYTHON,
    )
    wall = time.monotonic() - t0
    c1 = resource.getrusage(resource.RUSAGE_SELF)
    CPU.append(c1.ru_utime + c1.ru_stime - c0.ru_utime - c0.ru_stime)
    failed = [c for c in cols if not c.ok]
    if failed:
        raise SystemExit(f"{len(failed)} node(s) failed, e.g. {failed[0].node}: {failed[0].error}")
    return wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tools", choices=("replay", "real"), default="replay")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        root = Path(tmp)
        for key_name in ("host_key", "client_key"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / key_name)], check=True
            )
        (root / "authorized_keys").write_bytes((root / "client_key.pub").read_bytes())
        base_path = f"{os.path.dirname(PYTHON)}:/usr/bin:/bin"
        path = f"{make_stubs(root / 'stubs')}:{base_path}" if args.tools == "replay" else base_path
        servers = []
        for first in range(1, args.nodes + 1, SOCKETS_PER_SSHD):
            d = root / f"sshd{first}"
            d.mkdir()
            for name in ("host_key", "authorized_keys"):
                (d / name).write_bytes((root / name).read_bytes())
            (d / "host_key").chmod(0o600)
            servers.append(start_sshd(d, port, first, min(first + SOCKETS_PER_SSHD - 1, args.nodes), path))
        key = str(root / "client_key")
        try:
            many = [SshTarget(f"127.0.0.{i}", port, "root") for i in range(1, args.nodes + 1)]
            one = many[:1]
            run(one, key)  # warm-up: page cache, host keys
            base, target = [], []
            for _ in range(args.runs):
                base.append(run(one, key))
                target.append(run(many, key))
        finally:
            for sshd in servers:
                sshd.terminate()
                sshd.wait(timeout=10)
    b, t = statistics.median(base), statistics.median(target)
    print(f"tools on the nodes: {args.tools}")
    print(f"baseline  1 node   : median {b:6.2f} s  (runs: {', '.join(f'{x:.2f}' for x in base)})")
    print(
        f"target   {args.nodes:2d} nodes  : median {t:6.2f} s  (runs: {', '.join(f'{x:.2f}' for x in target)})"
    )
    fan_cpu = statistics.median(CPU[2::2]) if len(CPU) > 2 else float("nan")
    print(
        f"this process's CPU per {args.nodes}-node collection (SSH client, parsing, bundle): median {fan_cpu:.2f} s;"
        " the rest of the wall time is the simulated nodes' own work (sshd, shell, probes) on the same cores"
    )
    print(
        f"ratio {args.nodes} nodes / 1 node: {t / b:.2f}x  (sequential would be ~{args.nodes}x); "
        f"target under 10 s: {'met' if t < 10 else 'NOT met'}"
    )


if __name__ == "__main__":
    main()
