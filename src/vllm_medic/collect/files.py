"""Canonical source name -> the file names a captured output may carry: the one list.

The collector writes the first name to bundles and reads any of them back (``collect --from``); the
rules quote the same names as ``file:line`` evidence (``checks/facts.py``). Imports nothing heavier
than the health file table, so every stage can read it.
"""

from __future__ import annotations

from vllm_medic.collect.health.files import HEALTH_FILES

# first name: the canonical one written to bundles
CANONICAL_FILES: dict[str, tuple[str, ...]] = {
    "nvidia-smi": ("nvidia-smi.txt",),
    "nvidia-smi-q": ("nvidia-smi-q.xml", "nvidia-smi-q.txt", "nvidia-smi-a.txt"),
    "nvidia-smi-query-gpu": ("nvidia-smi-query-gpu.csv",),
    "nvidia-smi-query-compute-apps": ("nvidia-smi-query-compute-apps.csv",),
    "nvidia-smi-topo-m": ("nvidia-smi-topo-m.txt",),
    "nvml": ("nvml.json",),
    "ibdev2netdev": ("ibdev2netdev.txt",),
    "ibstat": ("ibstat.txt",),
    "ibstatus": ("ibstatus.txt",),
    "ibv-devinfo": ("ibv-devinfo.txt", "ibv_devinfo.txt", "ibv-devinfo-v.txt"),
    "rdma-link": ("rdma-link.txt",),
    "rocm-smi": ("rocm-smi.txt",),
    "amd-smi": ("amd-smi.txt", "amd-smi-static.txt", "amd-smi-list.txt", "amd-smi-monitor.txt"),
    "amd-smi-version": ("amd-smi-version.txt",),
    "ip-link": ("ip-link.txt", "ip-br-link.txt"),
    "lsmod": ("lsmod.txt",),
    "proc-driver-nvidia-version": ("proc-driver-nvidia-version.txt",),
    "docker-image-inspect": ("docker-image-inspect.json",),
    "docker-images-digests": ("docker-images-digests.txt",),
    "vllm-version": ("vllm-version.txt",),
    "vllm-collect-env": ("vllm-collect-env.txt", "collect-env.txt"),
    "pip-freeze": ("pip-freeze.txt",),
    "env": ("env.txt",),
    "launch": ("launch.txt", "launch.sh", "launch.yaml", "launch.yml", "launch.json"),
    "container": ("container.txt",),
    "uname": ("uname.txt",),
    "os-release": ("os-release.txt",),
    "model-config": ("model-config.json",),
    "launch-config": ("launch-config.yaml",),
    "nvcc-version": ("nvcc-version.txt",),
    # health probes (kernel log, fabric services, container limits, in-image): src/vllm_medic/collect/health
    **{source: (file,) for source, file in HEALTH_FILES.items()},
}
