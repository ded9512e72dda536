"""Canonical file names of the health sources, as written to bundles and read back with ``--from``.

Kept import-light: collect's snapshot builder imports this table to know the names.
"""

from __future__ import annotations

#: source name -> canonical file name (flat, like every other bundle file)
HEALTH_FILES: dict[str, str] = {
    "dmesg": "dmesg.txt",
    "journalctl-k": "journalctl-k.txt",
    "systemctl-fabricmanager": "systemctl-fabricmanager.txt",
    "systemctl-imex": "systemctl-imex.txt",
    "imex-channels": "imex-channels.txt",
    "imex-nodes-config": "imex-nodes-config.txt",
    "shm": "shm.txt",
    "ulimit": "ulimit.txt",
    "proc-self-limits": "proc-self-limits.txt",
    "cgroup-memory": "cgroup-memory.txt",
    "cgroup-memory-v1": "cgroup-memory-v1.txt",
    "in-image-nvidia-smi": "in-image-nvidia-smi.txt",
    "in-image-versions": "in-image-versions.txt",
    "in-image-pip-list": "in-image-pip-list.txt",
    "in-image-image": "in-image-image.txt",
}
