"""Machine-readable `nvidia-smi` forms: `-q -x` XML, `-q` / `-a` text, and `--query-gpu` CSV."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from xml.etree import ElementTree as ET

from vllm_medic.snapshot import Driver, Gpu, GpuProcess

# The --query-gpu fields vllm-medic asks for live (and assumes for a CSV without a header).
QUERY_GPU_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "memory.total",
    "memory.used",
    "utilization.gpu",
    "persistence_mode",
    "compute_mode",
    "mig.mode.current",
    "driver_version",
)

_NUMBER = re.compile(r"-?\d+")


@dataclass
class SmiQuery:
    driver: Driver = field(default_factory=Driver)
    gpus: list[Gpu] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)
    processes_section: bool = False
    mig_devices: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _mib(text: str | None) -> int | None:
    if not text:
        return None
    m = _NUMBER.search(text)
    return int(m.group(0)) if m and "N/A" not in text else None


# what nvidia-smi prints where it has no value (`CUDA Version : Not Found` on a driver without libcuda)
_PLACEHOLDERS = frozenset(
    {"N/A", "[N/A]", "Not Supported", "[Not Supported]", "Not Found", "Unknown", "Unknown Error", "None"}
)


def _clean(text: str | None) -> str | None:
    if text is None:
        return None
    t = text.strip()
    return t if t and t not in _PLACEHOLDERS else None


# ---------------------------------------------------------------- -q -x XML


def parse_nvidia_smi_xml(text: str) -> SmiQuery:
    result = SmiQuery()
    body = text[text.find("<") :] if "<" in text else text
    body = re.sub(r"<!DOCTYPE[^>]*>", "", body, count=1)
    try:
        root = ET.fromstring(body.strip())
    except ET.ParseError as exc:
        result.problems.append(f"not well-formed XML: {exc}")
        return result
    if root.tag != "nvidia_smi_log":
        result.problems.append(f"root element is <{root.tag}>, not <nvidia_smi_log>")
        return result
    result.driver.version = _clean(root.findtext("driver_version"))
    result.driver.cuda_version = _clean(root.findtext("cuda_version"))
    result.driver.status = "ok" if result.driver.version else "unknown"
    for index, g in enumerate(root.findall("gpu")):
        gpu = Gpu(index=index, name=(g.findtext("product_name") or "").strip())
        gpu.bus_id = g.get("id")
        gpu.uuid = _clean(g.findtext("uuid"))
        gpu.persistence_mode = _clean(g.findtext("persistence_mode"))
        gpu.compute_mode = _clean(g.findtext("compute_mode"))
        gpu.mig_mode = _clean(g.findtext("mig_mode/current_mig"))
        gpu.memory_total_mib = _mib(g.findtext("fb_memory_usage/total"))
        gpu.memory_used_mib = _mib(g.findtext("fb_memory_usage/used"))
        gpu.utilization_pct = _mib(g.findtext("utilization/gpu_util"))
        gpu.fabric_state = _clean(g.findtext("fabric/state"))
        gpu.fabric_status = _clean(g.findtext("fabric/status"))
        result.gpus.append(gpu)
        for mig in g.findall("mig_devices/mig_device"):
            result.mig_devices.append(
                {
                    "gpu_index": index,
                    "mig_dev": _mib(mig.findtext("index")),
                    "gi_id": _mib(mig.findtext("gpu_instance_id")),
                    "ci_id": _mib(mig.findtext("compute_instance_id")),
                    "memory_total_mib": _mib(mig.findtext("fb_memory_usage/total")),
                    "memory_used_mib": _mib(mig.findtext("fb_memory_usage/used")),
                }
            )
        procs = g.find("processes")
        if procs is not None:
            result.processes_section = True
            for p in procs.findall("process_info"):
                result.processes.append(
                    GpuProcess(
                        gpu_index=index,
                        pid=_mib(p.findtext("pid")),
                        name=(p.findtext("process_name") or "").strip(),
                        used_mib=_mib(p.findtext("used_memory")),
                        type=_clean(p.findtext("type")),
                    )
                )
    if not result.gpus and not result.driver.version:
        result.problems.append("no driver_version and no <gpu> elements")
    return result


# ---------------------------------------------------------------- -q text


_Q_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[^:]+?)\s*:\s?(?P<value>.*?)\s*$")


def parse_nvidia_smi_q(text: str) -> SmiQuery:
    """`nvidia-smi -q` (same as `-a`) text: indentation says which section a key belongs to."""
    result = SmiQuery()
    gpu: Gpu | None = None
    stack: list[tuple[int, str]] = []
    proc: GpuProcess | None = None
    for raw in text.splitlines():
        if not raw.strip() or raw.strip().startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip())
        gpu_header = re.match(
            r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$", raw
        )
        if gpu_header:
            gpu = Gpu(index=len(result.gpus), bus_id=gpu_header.group(1))
            result.gpus.append(gpu)
            stack = []
            proc = None
            continue
        m = _Q_LINE.match(raw) if ":" in raw else None
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if m is None:
            stack.append((indent, raw.strip()))
            continue
        key, value = m.group("key").strip(), m.group("value")
        path = "/".join([s for _, s in stack] + [key])
        if gpu is None:
            if key == "Driver Version":
                result.driver.version = _clean(value)
            elif key == "CUDA Version":
                result.driver.cuda_version = _clean(value)
            continue
        if path == "Product Name":
            gpu.name = value.strip()
        elif path == "GPU UUID":
            gpu.uuid = _clean(value)
        elif path == "Persistence Mode":
            gpu.persistence_mode = _clean(value)
        elif path == "Compute Mode":
            gpu.compute_mode = _clean(value)
        elif path == "MIG Mode/Current":
            gpu.mig_mode = _clean(value)
        elif path == "FB Memory Usage/Total":
            gpu.memory_total_mib = _mib(value)
        elif path == "FB Memory Usage/Used":
            gpu.memory_used_mib = _mib(value)
        elif path == "Utilization/Gpu":
            gpu.utilization_pct = _mib(value)
        elif path == "Fabric/State":
            gpu.fabric_state = _clean(value)
        elif path == "Fabric/Status":
            gpu.fabric_status = _clean(value)
        elif path == "Processes":
            result.processes_section = True
        elif path.startswith("Processes"):
            result.processes_section = True
            if key == "Process ID":
                proc = GpuProcess(gpu_index=gpu.index, pid=_mib(value))
                result.processes.append(proc)
                stack.append((indent, "Process"))
            elif proc is not None and key == "Type":
                proc.type = _clean(value)
            elif proc is not None and key == "Name":
                proc.name = value.strip()
            elif proc is not None and key == "Used GPU Memory":
                proc.used_mib = _mib(value)
    result.driver.status = "ok" if result.driver.version else "unknown"
    if not result.gpus and not result.driver.version:
        result.problems.append("no 'Driver Version' line and no 'GPU <bus id>' sections")
    return result


# ---------------------------------------------------------------- --query-gpu CSV


def parse_query_gpu_csv(text: str) -> SmiQuery:
    """CSV with or without header and units; lines that do not fit the columns are skipped."""
    result = SmiQuery()
    columns: list[str] | None = None
    skipped = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        cells = [c.strip() for c in line.split(",")]
        if columns is None and cells and cells[0].split(" ")[0] in ("index", "name", "uuid", "pci.bus_id"):
            columns = [re.sub(r"\s*\[.*?\]\s*$", "", c).strip() for c in cells]
            continue
        if columns is not None and cells and cells[0].split(" ")[0] in ("pid", "timestamp", "gpu_name"):
            break  # another query's header (compute-apps) starts here
        cols = columns or list(QUERY_GPU_FIELDS)
        if len(cells) != len(cols):
            skipped += 1
            continue
        row = dict(zip(cols, cells, strict=True))
        if "index" in row and not row["index"].isdecimal():
            skipped += 1
            continue
        gpu = Gpu(index=int(row["index"]) if "index" in row else len(result.gpus))
        gpu.name = row.get("name", "")
        gpu.uuid = _clean(row.get("uuid"))
        gpu.bus_id = _clean(row.get("pci.bus_id"))
        gpu.memory_total_mib = _mib(row.get("memory.total"))
        gpu.memory_used_mib = _mib(row.get("memory.used"))
        gpu.utilization_pct = _mib(row.get("utilization.gpu"))
        gpu.persistence_mode = _clean(row.get("persistence_mode"))
        gpu.compute_mode = _clean(row.get("compute_mode"))
        gpu.mig_mode = _clean(row.get("mig.mode.current"))
        if row.get("driver_version"):
            result.driver.version = _clean(row["driver_version"])
        result.gpus.append(gpu)
    if result.gpus:
        result.driver.status = "ok"
    if skipped and result.gpus:
        result.problems.append(f"{skipped} line(s) did not match the columns and were skipped")
    if not result.gpus:
        result.problems.append("no CSV row matched the header's columns")
    return result
