"""NVIDIA's CUDA -> minimum driver tables (shipped data file), and the lookups the driver rules need."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from vllm_medic.recipes.versions import major_minor, parse_version, version_lt


@dataclass(frozen=True)
class DriverRequirement:
    cuda: str  # "13.0"
    release: str  # "13.0 GA"
    min_driver: str
    source: str


@lru_cache(maxsize=1)
def cuda_tables() -> dict[str, Any]:
    text = resources.files("vllm_medic.recipes").joinpath("data/cuda-drivers.yaml").read_text("utf-8")
    return yaml.safe_load(text)


def native_requirement(cuda: str | None) -> DriverRequirement | None:
    """Minimum driver for the GA release of CUDA major.minor (the lowest row for that minor)."""
    mm = major_minor(cuda)
    if mm is None:
        return None
    table = cuda_tables()["toolkit_driver"]
    rows = [r for r in table["rows"] if r["cuda"] == mm]
    if not rows:
        return None
    best = rows[0]
    for r in rows[1:]:
        if version_lt(r["min_driver"], best["min_driver"]):
            best = r
    return DriverRequirement(mm, best["release"], best["min_driver"], " ".join(table["source"].split()))


def family_floor(cuda: str | None) -> DriverRequirement | None:
    """Minimum driver for CUDA minor-version compatibility within the image's CUDA major."""
    v = parse_version(cuda)
    if v is None:
        return None
    section = cuda_tables()["minor_version_compatibility"]
    for fam in section["families"]:
        if fam["cuda_major"] == v[0]:
            return DriverRequirement(
                f"{v[0]}.x",
                f"CUDA {v[0]}.x minor-version compatibility",
                fam["min_driver"],
                section["source"],
            )
    return None


def minor_compat_limitation() -> str:
    return " ".join(cuda_tables()["minor_version_compatibility"]["limitation"].split())


def forward_compat() -> dict[str, str]:
    fc = cuda_tables()["forward_compatibility"]
    return {k: " ".join(str(v).split()) for k, v in fc.items()}
