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
