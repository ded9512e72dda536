"""`nvidia-smi` default table (narrow pre-525 and wide 530+ layouts, MIG and process sections) and
its failure texts (no driver, driver/library mismatch, GPU lost, no devices)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from vllm_medic.collect.parsers import is_prompt_line
from vllm_medic.snapshot import Driver, Gpu, GpuProcess

# R610+ prints "KMD Version" / "CUDA UMD Version" where older drivers print "Driver Version" / "CUDA Version".
_HEADER = re.compile(
    r"NVIDIA-SMI\s+(?P<smi>[\w.\-]+)\s+(?:Driver|KMD) Version:\s*(?P<driver>[\w.\-]+)"
    r"(?:\s+CUDA(?: UMD)? Version:\s*(?P<cuda>[\w.\-/]+))?"
)
_DRIVER_ONLY = re.compile(r"(?:Driver|KMD) Version:\s*(?P<driver>\d+(?:\.\d+)+)")
_CUDA_ONLY = re.compile(r"CUDA(?: UMD)? Version:\s*(?P<cuda>\d+\.\d+|N/A)")
_GPU_FIRST = re.compile(r"^\s*(?P<index>\d+)\s+(?P<name>.*?)\s*(?P<persist>\bOn|\bOff)?\s*$")
_MEMORY = re.compile(r"(?P<used>\d+)\s*MiB\s*/\s*(?P<total>\d+)\s*MiB")
_BUS = re.compile(r"(?P<bus>[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])")
_UTIL_COMPUTE = re.compile(
    r"(?P<util>\d+|N/A)\s*%?\s+(?P<mode>Default|E\.\s*Process|E\.\s*Thread|Prohibited|N/A)"
)
_PROCESS = re.compile(
    r"^\s*(?P<gpu>\d+|N/A)\s+(?:(?P<gi>N/A|\d+)\s+(?P<ci>N/A|\d+)\s+)?(?P<pid>\d+)\s+"
    r"(?P<type>C\+G|M\+C|C|G|M)\s+(?P<name>.*?)\s+(?P<mem>\d+\s*MiB|N/A)\s*$"
)
_MIG_ROW = re.compile(r"^\s*(?P<gpu>\d+)\s+(?P<gi>\d+)\s+(?P<ci>\d+)\s+(?P<dev>\d+)\s*$")
# `nvidia-smi -L`, often pasted together with the table: "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)"
_LIST_LINE = re.compile(r"^\s*GPU (?P<index>\d+): (?P<name>.+?) \(UUID: (?P<uuid>GPU-[0-9A-Fa-f\-]+)\)\s*$")
_NVML_VERSION = re.compile(r"NVML library version:\s*(?P<v>\d+(?:\.\d+)*)")
_NVRM = re.compile(r"NVRM version:.*?Kernel Module(?:\s+for\s+\S+)?\s+(?P<v>\d+(?:\.\d+)+)")


@dataclass
class SmiTable:
    driver: Driver = field(default_factory=Driver)
    gpus: list[Gpu] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)
    processes_section: bool = False  # False: the process table was absent (not "no processes")
    mig_devices: list[dict[str, Any]] = field(default_factory=list)
    gpus_showing_err: list[int] = field(default_factory=list)  # rows with ERR! (a sensor or the GPU failing)
    warnings: list[str] = field(default_factory=list)  # lines nvidia-smi printed besides the table
    partial: list[str] = field(default_factory=list)  # why the GPU table is not the whole one
    problems: list[str] = field(default_factory=list)


def _norm(text: str) -> str:
    """Fold typographic quotes and line breaks so failure sentences match however they were pasted."""
    text = text.replace("\u2018", "'").replace("\u2019", "'").replace("`", "'")
    return re.sub(r"\s+", " ", text)


def classify_failure(text: str) -> tuple[str, str] | None:
    """(status, detail) when the text is one of nvidia-smi's failure messages, else None."""
    flat = _norm(text)
    low = flat.lower()
    if "nvidia-smi has failed" in low or "communicate with the nvidia driver" in low:
        return "no_driver", _first_sentence(flat, "NVIDIA-SMI has failed")
    if "driver/library version mismatch" in low:
        return "version_mismatch", "Failed to initialize NVML: Driver/library version mismatch"
    if "gpu is lost" in low or "unable to determine the device handle" in low:
        return "gpu_lost", _first_sentence(flat, "Unable to determine") or _first_sentence(
            flat, "GPU is lost"
        )
    if "no devices were found" in low:
        return "no_devices", "No devices were found"
    if "insufficient permissions" in low:
        return "permission", _first_sentence(flat, "Insufficient Permissions")
    if "failed to initialize nvml" in low:
        return "error", _first_sentence(flat, "Failed to initialize NVML")
    return None


def _first_sentence(flat: str, start: str) -> str:
    idx = flat.lower().find(start.lower())
    if idx < 0:
        return ""
    rest = flat[idx:]
    end = rest.find(". ")
    return rest[: end + 1] if end >= 0 else rest.strip()


def parse_nvidia_smi_table(text: str) -> SmiTable:
    result = SmiTable()
    try:
        _parse_into(text, result)
    except Exception as exc:  # noqa: BLE001 - a parser never raises
        result.problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return result


def _parse_into(text: str, result: SmiTable) -> None:
    nvml = _NVML_VERSION.search(text)
    if nvml:
        result.driver.nvml_library_version = nvml.group("v")
    nvrm = _NVRM.search(text)
    if nvrm:
        result.driver.kernel_module_version = nvrm.group("v")
    failure = classify_failure(text)
    header = _HEADER.search(text)
    if header is None:
        drv = _DRIVER_ONLY.search(text)
        cud = _CUDA_ONLY.search(text)
        if drv:
            result.driver.version = drv.group("driver")
        if cud and cud.group("cuda") != "N/A":
            result.driver.cuda_version = cud.group("cuda")
    else:
        result.driver.version = header.group("driver")
        cuda = header.group("cuda")
        result.driver.cuda_version = cuda if cuda and cuda != "N/A" else None
    if failure is not None and header is None:
        result.driver.status, result.driver.status_detail = failure
        return
    listed = [m for m in (_LIST_LINE.match(line) for line in text.splitlines()) if m]
    if header is None and result.driver.version is None:
        if "|" not in text:
            if listed:  # `nvidia-smi -L` alone: the GPUs, no driver facts
                result.gpus = [_gpu_from_list_line(m) for m in listed]
                return
            result.problems.append("no 'NVIDIA-SMI ... Driver Version' header and no known failure message")
            return
        result.problems.append(
            "no 'NVIDIA-SMI ... Driver Version' header (excerpt?); read the table rows only"
        )
    else:
        result.driver.status = "ok"
    section = "header" if header is not None else "gpu_header"
    current: Gpu | None = None
    line_in_block = 0
    mig_current: dict[str, Any] | None = None
    block_open = False  # inside a GPU block not yet closed by its +---+ border
    procs_closed = False
    for raw in text.splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith(("|", "+")):
            if section != "header" and not is_prompt_line(stripped):
                result.warnings.append(stripped)
            continue
        inner = stripped.strip("|").strip()
        if stripped.startswith("+") or set(inner) <= set("-=+|"):
            if set(inner) <= set("=+|") and inner:
                # the ===== rule ends a section header; data rows follow
                if section == "gpu_header":
                    section = "gpus"
                elif section == "mig_header":
                    section = "mig"
                elif section == "proc_header":
                    section = "processes"
            elif stripped.startswith("+"):
                current = None
                mig_current = None
                block_open = False
                if section == "processes":
                    procs_closed = True
            continue
        if inner.startswith("Processes"):
            section = "proc_header"
            result.processes_section = True
            continue
        if inner.startswith("MIG devices"):
            section = "mig_header"
            continue
        if inner.startswith("GPU") and "Name" in inner and section in ("header", "gpu_header"):
            section = "gpu_header"
            continue
        cells = [c for c in stripped.strip("|").split("|")]
        if (
            section in ("header", "gpu_header")
            and len(cells) >= 2
            and _GPU_FIRST.match(cells[0])
            and _BUS.search(cells[1])
        ):
            section = "gpus"  # an excerpt that starts at a GPU row (no column header pasted)
        if section == "gpus":
            first = _GPU_FIRST.match(cells[0]) if cells else None
            if first and len(cells) >= 2 and _BUS.search(cells[1]):
                block_open = True
                current = Gpu(index=int(first.group("index")), name=first.group("name").strip())
                current.persistence_mode = first.group("persist")
                bus = _BUS.search(cells[1])
                current.bus_id = bus.group("bus") if bus else None
                result.gpus.append(current)
                line_in_block = 1
                continue
            if current is None:
                continue
            line_in_block += 1
            if "ERR!" in stripped and current.index not in result.gpus_showing_err:
                result.gpus_showing_err.append(current.index)
                result.warnings.append(
                    f"GPU {current.index} shows ERR! in its row: {' '.join(stripped.split())}"
                )
            joined = " | ".join(cells)
            mem = _MEMORY.search(cells[1] if len(cells) > 1 else joined)
            if mem and current.memory_total_mib is None:
                current.memory_used_mib = int(mem.group("used"))
                current.memory_total_mib = int(mem.group("total"))
            if len(cells) >= 3:
                uc = _UTIL_COMPUTE.search(cells[2])
                if uc and current.compute_mode is None:
                    util = uc.group("util")
                    current.utilization_pct = int(util) if util.isdecimal() else None
                    current.compute_mode = re.sub(r"\s+", " ", uc.group("mode"))
                elif line_in_block >= 3 and current.mig_mode is None:
                    value = cells[2].strip()
                    if value in ("Enabled", "Disabled", "N/A"):
                        current.mig_mode = value
        elif section == "mig":
            row = _MIG_ROW.match(cells[0]) if cells else None
            if row:
                mig_current = {
                    "gpu_index": int(row.group("gpu")),
                    "gi_id": int(row.group("gi")),
                    "ci_id": int(row.group("ci")),
                    "mig_dev": int(row.group("dev")),
                }
                mem = _MEMORY.search(cells[1]) if len(cells) > 1 else None
                if mem:
                    mig_current["memory_used_mib"] = int(mem.group("used"))
                    mig_current["memory_total_mib"] = int(mem.group("total"))
                result.mig_devices.append(mig_current)
        elif section == "processes":
            body = stripped.strip("|")
            if "No running processes found" in body:
                continue
            m = _PROCESS.match(body)
            if m:
                used = m.group("mem")
                result.processes.append(
                    GpuProcess(
                        gpu_index=int(m.group("gpu")) if m.group("gpu").isdecimal() else None,
                        pid=int(m.group("pid")),
                        name=m.group("name").strip(),
                        used_mib=int(re.sub(r"\D", "", used)) if used != "N/A" else None,
                        type=m.group("type"),
                    )
                )
    if result.processes_section and not procs_closed:
        # the paste stops inside the process list: which processes run is not known
        result.processes_section = False
        result.processes = []
        if result.gpus:
            result.partial.append("the paste stops inside the process list (cut off)")
    _partial_table(result, header is not None, block_open)
    rules = [ln.strip() for ln in text.splitlines() if re.fullmatch(r"\+[-=+]+\+", ln.strip())]
    last = next((ln.strip() for ln in reversed(text.splitlines()) if ln.strip()), "")
    if result.gpus and rules and last.startswith("+-") and not last.endswith("+"):
        # the paste stops inside a rule line: more GPU blocks or the process list may follow
        result.partial.append("the paste stops inside a table rule (cut off)")
    uuids = {int(m.group("index")): m.group("uuid") for m in listed}
    for gpu in result.gpus:
        if gpu.uuid is None and gpu.index in uuids:
            gpu.uuid = uuids[gpu.index]
    if header is not None and not result.gpus and failure is None:
        result.problems.append("header found but no GPU rows could be read (truncated output?)")


def _partial_table(result: SmiTable, has_header: bool, block_open: bool) -> None:
    """A GPU table read only in part: no header (an excerpt from inside it), a GPU row cut off, or
    GPU indices with a gap. Then the GPUs listed are not all the GPUs."""
    if not result.gpus:
        return
    indices = [g.index for g in result.gpus]
    if block_open:
        result.partial.append(f"the table stops inside GPU {indices[-1]}'s block (cut off)")
    if not has_header:
        result.partial.append("no 'NVIDIA-SMI ... Driver Version' header: an excerpt from inside the table")
    if indices != list(range(indices[0], indices[0] + len(indices))) or indices[0] != 0:
        result.partial.append(f"GPU indices {indices} do not run from 0 without a gap")


def _gpu_from_list_line(m: re.Match[str]) -> Gpu:
    return Gpu(index=int(m.group("index")), name=m.group("name").strip(), uuid=m.group("uuid"))
