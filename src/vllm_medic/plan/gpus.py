"""The GPU table (data in ``gpus.yaml``) and lookups by name or alias."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from vllm_medic.errors import UsageError

GIB = 1024**3
GB = 1000**3
MIB = 1024**2


@dataclass(frozen=True)
class GpuSpec:
    name: str
    memory_gb: float
    reported_mib: int | None
    family: str
    source: str
    bf16: bool = True  # vLLM's preferred dtype here is bfloat16 (CUDA cc >= 8.0, ROCm, CPU; plan.dtype)
    gpus_per_node: int = 8

    @property
    def memory_bytes(self) -> int:
        """What vLLM sees as total device memory: the driver's figure when known, else the spec figure."""
        if self.reported_mib:
            return self.reported_mib * MIB
        return int(self.memory_gb * GB)

    @property
    def memory_basis(self) -> str:
        if self.reported_mib:
            return f"{self.reported_mib:,} MiB = {self.reported_mib / 1024:.1f} GiB reported by the driver"
        return f"{self.memory_gb:g} GB spec figure (no driver-reported total on file)"


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower().removeprefix("nvidia").removeprefix("amd"))


@lru_cache(maxsize=1)
def gpu_table() -> dict[str, GpuSpec]:
    import yaml

    raw = yaml.safe_load(resources.files("vllm_medic.plan").joinpath("gpus.yaml").read_text(encoding="utf-8"))
    table: dict[str, GpuSpec] = {}
    for name, entry in raw["gpus"].items():
        spec = GpuSpec(
            name=name,
            memory_gb=float(entry["memory_gb"]),
            reported_mib=entry.get("reported_mib"),
            family=str(entry.get("family", "")),
            source=str(entry.get("source", "")),
            gpus_per_node=int(entry.get("gpus_per_node", 8)),
        )
        for alias in [name, *entry.get("aliases", [])]:
            table[_key(alias)] = spec
    return table


def known_gpu_names() -> list[str]:
    return sorted({spec.name for spec in gpu_table().values()})


def lookup_gpu(name: str, memory_gib: float | None = None) -> GpuSpec:
    """Find a GPU by name or alias; ``memory_gib`` overrides (or supplies) the memory per GPU."""
    spec = gpu_table().get(_key(name))
    if spec is None:
        if memory_gib is None:
            raise UsageError(
                f"unknown GPU {name!r}; known: {', '.join(known_gpu_names())}. "
                "Pass --gpu-memory-gib X to plan for another GPU."
            )
        return GpuSpec(
            name=name,
            memory_gb=memory_gib * GIB / GB,
            reported_mib=int(round(memory_gib * 1024)),
            family="",
            source=f"--gpu-memory-gib {memory_gib:g}",
        )
    if memory_gib is not None:
        spec = GpuSpec(
            name=spec.name,
            memory_gb=memory_gib * GIB / GB,
            reported_mib=int(round(memory_gib * 1024)),
            family=spec.family,
            source=f"--gpu-memory-gib {memory_gib:g} (overrides {spec.source or 'the table'})",
            gpus_per_node=spec.gpus_per_node,
        )
    return spec
