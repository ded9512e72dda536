"""AMD GPUs: `rocm-smi` (concise table, both layouts, and its `GPU[i] : key: value` forms) and
`amd-smi` (`version`, `static`, `list`, `monitor`).

What they give is recorded as AMD (`Gpu.vendor = "amd"`): names, count, bus ids, VRAM, and the ROCm
version. Nothing here sets NVIDIA driver facts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from vllm_medic.snapshot import Gpu


@dataclass
class AmdResult:
    gpus: list[Gpu] = field(default_factory=list)
    rocm_version: str | None = None
    amdgpu_version: str | None = (
        None  # amdgpu kernel driver (rocm-smi "Driver version", amd-smi DRIVER VERSION)
    )
    amd_smi_version: str | None = None
    gfx_targets: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@cache
def amd_device_names() -> dict[str, str]:
    import yaml

    text = resources.files("vllm_medic.collect").joinpath("data/amd_gpus.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text) or {}
    return {str(k).lower(): str(v) for k, v in (data.get("device_ids") or {}).items()}


def name_for_device_id(device_id: str | None) -> str:
    if not device_id:
        return ""
    key = device_id.strip().rstrip(",").lower()
    if not key.startswith("0x"):
        key = "0x" + key
    return amd_device_names().get(key, "")


def _gpu(index: int) -> Gpu:
    return Gpu(index=index, vendor="amd")


def _by_index(result: AmdResult, index: int) -> Gpu:
    for g in result.gpus:
        if g.index == index:
            return g
    g = _gpu(index)
    result.gpus.append(g)
    return g


# ---------------------------------------------------------------- rocm-smi

_KEYED = re.compile(r"^GPU\[(?P<i>\d+)\]\s*:\s*(?P<k>[^:]+?)\s*:\s*(?P<v>.*?)\s*$")
_CONCISE_ROW = re.compile(r"^(?P<i>\d+)\s{2,}(?P<rest>\S.*)$")


def parse_rocm_smi(text: str) -> AmdResult:
    result = AmdResult()
    try:
        _parse_rocm_smi(text, result)
    except Exception as exc:  # noqa: BLE001 - a parser never raises
        result.problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return result


def _parse_rocm_smi(text: str, result: AmdResult) -> None:
    lines = text.splitlines()
    in_concise = False
    layout = ""
    columns: list[str] = []
    last: Gpu | None = None
    closed = False
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("==="):
            title = stripped.strip("= ").strip()
            if title == "Concise Info":
                in_concise = True
            elif title.startswith("End of ROCm SMI Log"):
                closed = True
                in_concise = False
            elif in_concise and result.gpus:
                in_concise = False  # the rule under the rows
            continue
        m = re.match(r"^Driver version:\s*(\S+)", stripped)
        if m:
            result.amdgpu_version = m.group(1)
            continue
        keyed = _KEYED.match(stripped)
        if keyed:
            _keyed(result, int(keyed.group("i")), keyed.group("k").strip(), keyed.group("v"))
            continue
        if stripped.startswith("Device") and ("[Model : Revision]" in stripped or "Node" in stripped):
            in_concise = True
            layout = "model" if "[Model" in stripped else "node"
            continue
        if re.match(r"^GPU\s+Temp\b", stripped):  # ROCm 2.x-3.x: "GPU  Temp  AvgPwr  SCLK ... GPU%"
            in_concise, layout, columns = True, "gpu", stripped.split()
            continue
        if not in_concise:
            continue
        row = _CONCISE_ROW.match(stripped)
        if row and not line[:1].isspace():
            gpu = _by_index(result, int(row.group("i")))
            rest = row.group("rest")
            did = re.search(r"\[?(0x[0-9a-fA-F]{4})\b", rest)
            if did:
                gpu.name = gpu.name or name_for_device_id(did.group(1))
            cells = stripped.split()
            if layout == "gpu" and len(cells) == len(columns):  # one-word cells: read by the header
                util = re.fullmatch(r"(\d+)%", dict(zip(columns, cells, strict=True)).get("GPU%", ""))
                if util:
                    gpu.utilization_pct = int(util.group(1))
            last = gpu
            continue
        name_line = layout == "model" and last is not None and line[:1].isspace()
        if (
            name_line
            and last is not None
            and re.search(r"[A-Za-z]", stripped)
            and not stripped.startswith(("Name", "("))
        ):
            last.name = stripped  # the 20-character name line under each row
    if result.gpus and not closed and any("ROCm System Management Interface" in ln for ln in lines):
        result.partial.append("no 'End of ROCm SMI Log' line: the output was cut")
    if not result.gpus and text.strip() and not result.amdgpu_version:
        result.problems.append("no GPU rows (concise table or GPU[i] lines) found")


def _keyed(result: AmdResult, index: int, key: str, value: str) -> None:
    gpu = _by_index(result, index)
    low = key.lower()
    value = value.strip()
    is_id = value.lower().startswith("0x")
    if low in ("card series", "device name", "card model") and not is_id and re.search(r"[A-Za-z]{3}", value):
        if low != "card model" or not gpu.name:
            gpu.name = value
    elif low in ("device id", "gpu id", "card model") and is_id and not gpu.name:
        gpu.name = name_for_device_id(value)
    elif low == "pci bus":
        gpu.bus_id = value
    elif low.startswith("vram total memory"):
        digits = re.sub(r"\D", "", value)
        if digits:
            gpu.memory_total_mib = int(digits) // 2**20
    elif low.startswith("vram total used memory"):
        digits = re.sub(r"\D", "", value)
        if digits:
            gpu.memory_used_mib = int(digits) // 2**20
    elif low in ("gfx version", "target graphics version") and value not in result.gfx_targets:
        result.gfx_targets.append(value)


# ---------------------------------------------------------------- amd-smi

_VERSION = re.compile(r"AMDSMI Tool:\s*(?P<tool>\S+)(?P<rest>.*)$")
_MONITOR_HEADER = re.compile(r"^GPU\s+[A-Z_]+(\s+[A-Z_%]+)*\s*$")


def parse_amd_smi(text: str) -> AmdResult:
    """Any `amd-smi` output: `version` line, `static` / `list` (`GPU: N` blocks), `monitor` table."""
    result = AmdResult()
    try:
        _parse_amd_smi(text, result)
    except Exception as exc:  # noqa: BLE001 - a parser never raises
        result.problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return result


def _parse_amd_smi(text: str, result: AmdResult) -> None:
    gpu: Gpu | None = None
    section = ""
    monitor_cols: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        v = _VERSION.search(stripped)
        if v:
            result.amd_smi_version = v.group("tool")
            for part in v.group("rest").split("|"):
                k, _, val = part.partition(":")
                k, val = k.strip().lower(), val.strip()
                if k == "rocm version" and val and val != "N/A":
                    result.rocm_version = val
                elif k == "amdgpu version" and val and val != "N/A":
                    result.amdgpu_version = val
            continue
        block = re.match(r"^GPU:\s*(\d+)\s*$", stripped)
        if block:
            gpu = _by_index(result, int(block.group(1)))
            section = ""
            continue
        if _MONITOR_HEADER.match(stripped) and stripped.split()[0] == "GPU":
            monitor_cols = stripped.split()
            continue
        if monitor_cols is not None:
            m = re.match(r"^(\d+)\s+(.*)$", stripped)
            if m:
                g = _by_index(result, int(m.group(1)))
                values = re.findall(r"(\d+(?:\.\d+)?)\s*(?:[A-Za-z°%]+)?", m.group(2))
                if "VRAM_TOTAL" in monitor_cols:
                    total = re.search(r"(\d+)\s*MB\s*$", m.group(2))
                    if total:
                        g.memory_total_mib = int(total.group(1))
                if "VRAM_USED" in monitor_cols and values:
                    used = re.findall(r"(\d+)\s*MB", m.group(2))
                    if len(used) >= 2:
                        g.memory_used_mib = int(used[-2])
                continue
        if gpu is None:
            continue
        sec = re.match(r"^([A-Z][A-Z_ ]*):\s*$", stripped)
        if sec:
            section = sec.group(1)
            continue
        kv = re.match(r"^([A-Z][A-Z_0-9 ]*):\s*(.*?)\s*$", stripped)
        if not kv:
            continue
        key, value = kv.group(1).strip(), kv.group(2)
        if (
            key == "MARKET_NAME"
            and value not in ("N/A", "")
            or key == "PRODUCT_NAME"
            and not gpu.name
            and value not in ("N/A", "")
        ):
            gpu.name = value
        elif key == "DEVICE_ID" and not gpu.name:
            gpu.name = name_for_device_id(value)
        elif key == "BDF":
            gpu.bus_id = value
        elif key == "UUID":
            gpu.uuid = value
        elif key == "SIZE" and section == "VRAM":
            size = re.match(r"(\d+)\s*(MB|GB)", value)
            if size:
                gpu.memory_total_mib = int(size.group(1)) * (1024 if size.group(2) == "GB" else 1)
        elif key == "TARGET_GRAPHICS_VERSION" and value not in result.gfx_targets:
            result.gfx_targets.append(value)
        elif key == "VERSION" and section == "DRIVER":
            result.amdgpu_version = value
    if not result.gpus and not result.rocm_version and not result.amd_smi_version and text.strip():
        result.problems.append("no 'AMDSMI Tool:' version line, 'GPU: N' block or monitor table found")
