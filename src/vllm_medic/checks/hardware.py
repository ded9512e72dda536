"""The hardware facts rules judge against (data/hardware.yaml): boards, their GPU counts and NVLink wiring,
and what GPUDirect RDMA needs. Pure lookups; the judgement lives in the rules."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

# topo -m link tokens that are not NVLink: the pair talks over PCIe / the CPU interconnect
NON_NVLINK = ("SYS", "NODE", "PHB", "PXB", "PIX")
LOCAL_NIC = ("PIX", "PXB")  # a NIC behind the GPU's own PCIe switch(es)


@dataclass(frozen=True)
class Board:
    key: str
    board: str
    gpus: int | None
    partitions: tuple[int, ...]
    nvlink_all_pairs: bool
    local_nic: bool
    source: str

    def missing_gpus(self, seen: int) -> bool:
        """True when ``seen`` GPUs is neither a whole board nor a whole-GPU slice of one."""
        return self.gpus is not None and seen < self.gpus and seen not in self.partitions


@lru_cache(maxsize=1)
def hardware_data() -> dict[str, Any]:
    text = resources.files("vllm_medic.checks").joinpath("data/hardware.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise ValueError("checks/data/hardware.yaml: expected a mapping at the top")
    return data


@lru_cache(maxsize=1)
def _boards() -> tuple[tuple[tuple[re.Pattern[str], ...], Board], ...]:
    out = []
    for e in hardware_data()["boards"]:
        pats = tuple(re.compile(p) for p in e["names"])
        out.append(
            (
                pats,
                Board(
                    key=str(e["key"]),
                    board=str(e["board"]),
                    gpus=e.get("gpus"),
                    partitions=tuple(e.get("partitions") or ()),
                    nvlink_all_pairs=bool(e.get("nvlink_all_pairs")),
                    local_nic=bool(e.get("local_nic")),
                    source=" ".join(str(e["source"]).split()),
                ),
            )
        )
    return tuple(out)


def board_for(gpu_name: str) -> Board | None:
    """The board kind of an nvidia-smi GPU name ("NVIDIA B300 SXM6 AC", "NVIDIA A100-SXM4-80GB")."""
    norm = re.sub(r"[-_]", " ", gpu_name.upper())
    for pats, board in _boards():
        if any(p.search(norm) for p in pats):
            return board
    return None


@dataclass(frozen=True)
class DmabufNeeds:
    min_kernel: str
    needs_open_kernel_modules: bool
    peermem_modules: tuple[str, ...]
    source: str


def gpudirect_needs() -> DmabufNeeds:
    g = hardware_data()["gpudirect_rdma"]
    d = g["dmabuf"]
    return DmabufNeeds(
        min_kernel=str(d["min_kernel"]),
        needs_open_kernel_modules=bool(d["needs_open_kernel_modules"]),
        peermem_modules=tuple(g["peermem_modules"]),
        source=" ".join(str(d["source"]).split()),
    )


def is_nvlink(link: str | None) -> bool:
    return bool(link) and re.fullmatch(r"NV\d+", link or "") is not None
