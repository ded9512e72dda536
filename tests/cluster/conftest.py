from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FAKEBIN = ROOT / "tests" / "fakebin"
DATA = ROOT / "tests" / "data"


def recordings(tmp: Path, name: str, nvidia_smi: str, lsmod: Path) -> Path:
    """A FAKEBIN_DIR for one simulated node: its GPU table and module list (real captures)."""
    d = tmp / name
    d.mkdir(parents=True)
    shutil.copy(DATA / "collect" / "nvidia-smi" / nvidia_smi, d / "nvidia-smi.txt")
    shutil.copy(lsmod, d / "lsmod.txt")
    return d


@pytest.fixture
def node_env(tmp_path: Path):
    """Environment for a simulated node whose tools are the fake binaries replaying `rec`."""

    def make(rec: Path, **extra: str) -> dict[str, str]:
        env = {
            "PATH": f"{FAKEBIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "FAKEBIN_DIR": str(rec),
            "NCCL_IB_HCA": "mlx5_0,mlx5_1",
            "UCX_TLS": "rc,cuda_copy",
        }
        env.update(extra)
        return env

    return make


class LocalSshd:
    """A real OpenSSH server on loopback with its own host key, client key and environment."""

    def __init__(self, root: Path, port: int, env: dict[str, str]) -> None:
        import subprocess

        self.root, self.port = root, port
        root.mkdir(parents=True, exist_ok=True)
        for key in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(root / key)], check=True)
        (root / "authorized_keys").write_bytes((root / "client_key.pub").read_bytes())
        set_env = " ".join(f"{k}={v}" for k, v in env.items())
        (root / "sshd_config").write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {root / 'host_key'}\n"
            f"AuthorizedKeysFile {root / 'authorized_keys'}\nPidFile {root / 'sshd.pid'}\n"
            "StrictModes no\nUsePAM no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
            f"SetEnv {set_env}\n"
        )
        Path("/run/sshd").mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            ["/usr/sbin/sshd", "-D", "-f", str(root / "sshd_config"), "-E", str(root / "sshd.log")]
        )
        self._wait_listening()

    def _wait_listening(self, timeout_s: float = 20.0) -> None:
        import socket
        import time

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(self.root / 'sshd.log').read_text(errors='replace')}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    if s.recv(4).startswith(b"SSH-"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("sshd did not start listening")

    @property
    def client_key(self) -> str:
        return str(self.root / "client_key")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self.proc.kill()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sshd_available() -> str | None:
    if not Path("/usr/sbin/sshd").exists():
        return "openssh-server is not installed (scripts/setup-system-deps.sh installs it)"
    if os.geteuid() != 0:
        return "a test sshd with its own host key needs root here"
    try:
        import paramiko  # noqa: F401
    except ImportError:
        return "paramiko is not installed (pip install 'vllm-medic[ssh]')"
    return None


GOOD_LSMOD = DATA / "cluster" / "lsmod-rdma-peermem-loaded-SYNTHETIC.txt"
BAD_LSMOD = DATA / "collect" / "lsmod" / "lsmod-grep-nvidia-rhel8-no-uvm-no-peermem-data-science-stack-90.txt"
GB300 = "gb300-4gpu-580.105.08-cuda13.0-oci-bm-gpu-gb300-4.txt"
B200_R575 = "b200-8gpu-575.57.08-cuda12.9-idle-no-process-section-modal-glossary.txt"

# Real lines (vLLM issues) with their timestamps moved onto one timeline: the engine on node "oom"
# runs out of memory first; ten minutes later the NCCL watchdog on the odd node fires as the cascade.
OOM_LOG = (
    "(EngineCore pid=112) INFO 05-01 14:30:00 [core.py:95] Initializing a V1 LLM engine (v0.27.1) with config: model='m'\n"
    "(EngineCore pid=112) ERROR 05-01 14:39:06 [core.py:1131] torch.OutOfMemoryError: CUDA out of memory. "
    "Tried to allocate 50.00 MiB. GPU 0 has a total capacity of 23.56 GiB of which 21.75 MiB is free.\n"
)  # from https://github.com/noonghunna/club-3090/issues/16
WATCHDOG_LOG = (
    "[rank0]:[E ProcessGroupNCCL.cpp:563] [Rank 0] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=134217728, NumelOut=134217728, Timeout(ms)=600000) ran for "
    "600059 milliseconds before timing out.\n"
)  # from https://github.com/vllm-project/vllm/issues/6042 (no timestamp of its own)
WATCHDOG_LOG_TIMED = "ERROR 05-01 14:49:07 [multiproc_executor.py:120] " + WATCHDOG_LOG


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory):
    """Three raylets on this machine: two alike, one odd (driver r575 B200 table, no nvidia_peermem,
    another NCCL_IB_HCA). Each node has its own VLLM_LOG_DIR with its own logs."""
    ray = pytest.importorskip("ray", reason="Ray is an optional extra (pip install 'vllm-medic[ray]')")
    del ray
    from ray.cluster_utils import Cluster

    tmp = tmp_path_factory.mktemp("nodes")

    def env(name: str, rec: Path, log: str, **extra: str) -> dict[str, str]:
        logs = tmp / f"logs-{name}"
        logs.mkdir()
        (logs / "vllm.log").write_text(log)
        e = {
            "PATH": f"{FAKEBIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "FAKEBIN_DIR": str(rec),
            "NCCL_IB_HCA": "mlx5_0,mlx5_1",
            "UCX_TLS": "rc,cuda_copy",
            "VLLM_LOG_DIR": str(logs),
        }
        e.update(extra)
        return e

    good = recordings(tmp, "good", GB300, GOOD_LSMOD)
    bad = recordings(tmp, "bad", B200_R575, BAD_LSMOD)
    quiet = "INFO 05-01 14:30:01 [api_server.py:1] Starting vLLM server on http://0.0.0.0:8000\n"
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "env_vars": env("head", good, quiet)}
    )
    cluster.add_node(num_cpus=1, env_vars=env("oom", good, OOM_LOG))
    cluster.add_node(num_cpus=1, env_vars=env("odd", bad, WATCHDOG_LOG_TIMED, NCCL_IB_HCA="mlx5_9"))
    cluster.wait_for_nodes()
    yield cluster
    cluster.shutdown()
