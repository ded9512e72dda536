"""Machine-readable `nvidia-smi` forms: `-q -x` XML, `-q` / `-a` text, `--query-gpu` and
`--query-compute-apps` CSV.

`-q` text is read per GPU section (`GPU 00000000:19:00.0` opens one), with the section's ECC
counts, remapped rows and retired pages. A CSV takes its columns from its header, else from the
`--query-gpu=a,b,c` command line pasted with it, else from the shapes of the values (then the
result is marked partial: the column names were guessed).
"""

from __future__ import annotations

import re
from collections.abc import Callable
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
_BUS_ID = re.compile(r"^(?:[0-9A-Fa-f]{4,8}:)?[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
_UUID = re.compile(r"^(GPU|MIG)-[0-9A-Fa-f\-]+$")
_DRIVER = re.compile(r"^\d{3}\.\d{1,3}(?:\.\d{1,3})?$")
_COMPUTE_CAP = re.compile(r"^\d{1,2}\.\d$")
_TIMESTAMP = re.compile(r"^\d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}")
_ELIDED = re.compile(
    r"^\s*(\.{3}|…|\[\.\.\.\]|<snip>|\(truncated\))|\.\.\.\s*$|identical rows", re.IGNORECASE
)


@dataclass
class SmiQuery:
    driver: Driver = field(default_factory=Driver)
    gpus: list[Gpu] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)
    processes_section: bool = False
    mig_devices: list[dict[str, Any]] = field(default_factory=list)
    attached_gpus: int | None = None  # "Attached GPUs : 8" / <attached_gpus>
    indexed: bool = True  # False: the GPUs' positions are not their indices (`-i` picked some)
    partial: list[str] = field(default_factory=list)  # why this is not the whole output
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


def _yes_no(text: str | None) -> bool | None:
    """`Yes` / `No` (an author's `Yes   <===` marker tolerated); N/A and errors are unknown."""
    word = (text or "").strip().split(" ")[0].lower()
    return {"yes": True, "no": False, "true": True, "false": False}.get(word)


def _count(text: str | None) -> int | None:
    t = (text or "").strip()
    return int(t) if re.fullmatch(r"\d+", t) else None


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def bus_key(bus_id: str | None) -> tuple[int, str] | None:
    """`00000000:19:00.0`, `0000:19:00.0` and `19:00.0` name the same GPU."""
    if not bus_id:
        return None
    m = re.search(r"(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$", bus_id.strip())
    if not m:
        return None
    return int(m.group(1) or "0", 16), m.group(2).lower()


# ---------------------------------------------------------------- -q -x XML


def _xml_ecc(node: ET.Element | None) -> tuple[int | None, int | None]:
    """(correctable, uncorrectable) of <volatile> / <aggregate>, old (single/double bit) or new layout."""
    if node is None:
        return None, None
    single = node.find("single_bit/total")
    double = node.find("double_bit/total")
    if single is not None or double is not None:
        return (
            _count(single.text if single is not None else None),
            _count(double.text if double is not None else None),
        )
    corr, unc = [], []
    for child in node:
        if "uncorrectable" in child.tag:
            unc.append(_count(child.text))
        elif "correctable" in child.tag:
            corr.append(_count(child.text))
    return _sum(corr), _sum(unc)


# Gpu attribute, element path under <gpu>, reader
_XML_FIELDS: tuple[tuple[str, str, Callable[[str | None], Any]], ...] = (
    ("uuid", "uuid", _clean),
    ("persistence_mode", "persistence_mode", _clean),
    ("compute_mode", "compute_mode", _clean),
    ("mig_mode", "mig_mode/current_mig", _clean),
    ("memory_total_mib", "fb_memory_usage/total", _mib),
    ("memory_used_mib", "fb_memory_usage/used", _mib),
    ("utilization_pct", "utilization/gpu_util", _mib),
    ("fabric_state", "fabric/state", _clean),
    ("fabric_status", "fabric/status", _clean),
    ("ecc_mode", "ecc_mode/current_ecc", _clean),
    ("remapped_rows_correctable", "remapped_rows/remapped_row_corr", _count),
    ("remapped_rows_uncorrectable", "remapped_rows/remapped_row_unc", _count),
    ("remapped_rows_pending", "remapped_rows/remapped_row_pending", _yes_no),
    ("remapped_rows_failure", "remapped_rows/remapped_row_failure", _yes_no),
)


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
    result.attached_gpus = _count(root.findtext("attached_gpus"))
    for index, g in enumerate(root.findall("gpu")):
        gpu = Gpu(index=index, name=(g.findtext("product_name") or "").strip())
        gpu.bus_id = g.get("id")
        for attr, xml_path, convert in _XML_FIELDS:
            setattr(gpu, attr, convert(g.findtext(xml_path)))
        gpu.ecc_volatile_correctable, gpu.ecc_volatile_uncorrectable = _xml_ecc(g.find("ecc_errors/volatile"))
        gpu.ecc_aggregate_correctable, gpu.ecc_aggregate_uncorrectable = _xml_ecc(
            g.find("ecc_errors/aggregate")
        )
        pending = g.findtext("retired_pages/pending_retirement") or g.findtext(
            "retired_pages/pending_blacklist"
        )
        gpu.retired_pages_pending = _yes_no(pending)
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
    _check_attached(result)
    return result


def _check_attached(result: SmiQuery) -> None:
    if result.attached_gpus is not None and 0 < len(result.gpus) < result.attached_gpus:
        result.partial.append(
            f"{result.attached_gpus} GPUs attached, {len(result.gpus)} shown "
            "(one GPU selected with -i, or the output was cut)"
        )


# ---------------------------------------------------------------- -q text


_Q_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[^:]+?)\s*:\s?(?P<value>.*?)\s*$")
_GPU_SECTION = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")


@dataclass
class _Health:
    """ECC counts of one GPU section, summed over their SRAM/DRAM (or single/double bit) parts."""

    counts: dict[str, list[int | None]] = field(default_factory=dict)

    def add(self, scope: str, kind: str, value: str) -> None:
        self.counts.setdefault(f"{scope}/{kind}", []).append(_count(value))

    def get(self, scope: str, kind: str) -> int | None:
        return _sum(self.counts.get(f"{scope}/{kind}", []))


def parse_nvidia_smi_q(text: str) -> SmiQuery:
    """`nvidia-smi -q` (same as `-a`) text: indentation says which section a key belongs to."""
    result = SmiQuery()
    gpu: Gpu | None = None
    health = _Health()
    stack: list[tuple[int, str]] = []
    proc: GpuProcess | None = None
    for raw in text.splitlines():
        if not raw.strip() or raw.strip().startswith("="):
            continue
        if _ELIDED.search(raw.strip()) and ":" not in raw:
            result.partial.append(f"lines left out by whoever pasted it ({raw.strip()!r})")
            continue
        indent = len(raw) - len(raw.lstrip())
        gpu_header = _GPU_SECTION.match(raw.strip()) if indent == 0 else None
        if gpu_header:
            if gpu is not None:
                _apply_health(gpu, health)
            gpu = Gpu(index=len(result.gpus), bus_id=gpu_header.group(1))
            health = _Health()
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
            elif key == "Attached GPUs":
                result.attached_gpus = _count(value)
            continue
        _q_field(gpu, health, path, key, value)
        if path == "Processes":
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
    if gpu is not None:
        _apply_health(gpu, health)
    result.driver.status = "ok" if result.driver.version else "unknown"
    if not result.gpus and not result.driver.version:
        result.problems.append("no 'Driver Version' line and no 'GPU <bus id>' sections")
    _check_attached(result)
    return result


_Q_FIELDS: dict[str, tuple[str, Any]] = {
    "Product Name": ("name", lambda v: v.strip()),
    "GPU UUID": ("uuid", _clean),
    "Persistence Mode": ("persistence_mode", _clean),
    "Compute Mode": ("compute_mode", _clean),
    "MIG Mode/Current": ("mig_mode", _clean),
    "FB Memory Usage/Total": ("memory_total_mib", _mib),
    "FB Memory Usage/Used": ("memory_used_mib", _mib),
    "Utilization/Gpu": ("utilization_pct", _mib),
    "Fabric/State": ("fabric_state", _clean),
    "Fabric/Status": ("fabric_status", _clean),
    "ECC Mode/Current": ("ecc_mode", _clean),
    "Remapped Rows/Correctable Error": ("remapped_rows_correctable", _count),
    "Remapped Rows/Uncorrectable Error": ("remapped_rows_uncorrectable", _count),
    "Remapped Rows/Pending": ("remapped_rows_pending", _yes_no),
    "Remapped Rows/Remapping Failure Occurred": ("remapped_rows_failure", _yes_no),
    "Retired Pages/Pending Page Blacklist": ("retired_pages_pending", _yes_no),
    "Retired Pages/Pending Page Retirement": ("retired_pages_pending", _yes_no),
    "Retired Pages/Pending": ("retired_pages_pending", _yes_no),
}


def _q_field(gpu: Gpu, health: _Health, path: str, key: str, value: str) -> None:
    known = _Q_FIELDS.get(path)
    if known is not None:
        setattr(gpu, known[0], known[1](value))
        return
    parts = path.split("/")
    if len(parts) >= 3 and parts[0] == "ECC Errors" and parts[1] in ("Volatile", "Aggregate"):
        scope = parts[1].lower()
        if len(parts) == 3:  # R470+: "SRAM Uncorrectable Parity : 0", "DRAM Correctable : 0"
            low = key.lower()
            if "uncorrectable" in low:
                health.add(scope, "unc", value)
            elif "correctable" in low:
                health.add(scope, "corr", value)
        elif len(parts) == 4 and key == "Total":  # older: "Single Bit / ... / Total", "Double Bit / Total"
            kind = {"Single Bit": "corr", "Double Bit": "unc"}.get(parts[2])
            if kind:
                health.add(scope, kind, value)


def _apply_health(gpu: Gpu, health: _Health) -> None:
    gpu.ecc_volatile_correctable = health.get("volatile", "corr")
    gpu.ecc_volatile_uncorrectable = health.get("volatile", "unc")
    gpu.ecc_aggregate_correctable = health.get("aggregate", "corr")
    gpu.ecc_aggregate_uncorrectable = health.get("aggregate", "unc")


# ---------------------------------------------------------------- CSV (--query-gpu, --query-compute-apps)

# nvidia-smi prints some fields under another name than the one asked for (clocks.sm ->
# clocks.current.sm); the query names a column may carry, by the field vllm-medic reads
_ALIASES = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "pci.bus_id": "pci.bus_id",
    "memory.total": "memory.total",
    "memory.used": "memory.used",
    "memory.free": "memory.free",
    "utilization.gpu": "utilization.gpu",
    "ecc.mode.current": "ecc.mode.current",
    "mig.mode.current": "mig.mode.current",
    "used_gpu_memory": "used_memory",
    "used_memory": "used_memory",
    "process_name": "process_name",
}
_HEADER_CELL = re.compile(r"^[a-z][A-Za-z0-9_.]*(\s*\[[^\]]*\])?$")


def _column_name(cell: str) -> str:
    base = re.sub(r"\s*\[.*?\]\s*$", "", cell).strip()
    return _ALIASES.get(base, base)


def _is_header(cells: list[str]) -> bool:
    return (
        bool(cells)
        and all(_HEADER_CELL.match(c) for c in cells)
        and any("." in c or "_" in c or c in ("index", "name", "uuid", "pid", "timestamp") for c in cells)
    )


def _query_columns(commands: list[str], flag: str) -> list[str] | None:
    for cmd in commands:
        m = re.search(rf"--{flag}[= ]\s*['\"]?([\w.,\s]+?)['\"]?(?:\s+--|\s*$|\s+-)", cmd)
        if m:
            return [_column_name(c.strip()) for c in m.group(1).split(",") if c.strip()]
    return None


@dataclass
class _Csv:
    header: list[str] | None = None
    rows: list[list[str]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    elided: list[str] = field(default_factory=list)


def _split_csv(lines: list[str]) -> _Csv:
    out = _Csv()
    for line in lines:
        if not line.strip():
            continue
        if _ELIDED.search(line):
            out.elided.append(line.strip())
            continue
        cells = [c.strip() for c in line.split(",")]
        if out.header is None and not out.rows and _is_header(cells):
            out.header = [_column_name(c) for c in cells]
            continue
        out.rows.append(cells)
    return out


def _sections(text: str) -> list[list[str]]:
    """A paste can hold several queries one after another: a new header line starts a new one."""
    sections: list[list[str]] = [[]]
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if _is_header(cells) and any(ln.strip() for ln in sections[-1]):
            sections.append([])
        if re.match(r"^[\w\-. ]+:\s*$", line.strip()) and "," not in line:
            continue  # an author's label line ("compute-apps-3090:")
        sections[-1].append(line)
    return sections


def _infer_gpu_columns(rows: list[list[str]]) -> list[str]:
    """Column names from the values' shapes (no header, no command line). Unknown columns stay ''."""
    width = max(len(r) for r in rows)
    columns = [""] * width
    memory_cols: list[int] = []
    for k in range(width):
        values = [r[k] for r in rows if k < len(r)]
        if all(_DRIVER.match(v) for v in values):
            columns[k] = "driver_version"
        elif all(_COMPUTE_CAP.match(v) for v in values):
            columns[k] = "compute_cap"
        elif all(_BUS_ID.match(v) for v in values):
            columns[k] = "pci.bus_id"
        elif all(_UUID.match(v) for v in values):
            columns[k] = "uuid"
        elif all(re.fullmatch(r"\d+\s*MiB", v) for v in values):
            memory_cols.append(k)
        elif all(re.fullmatch(r"\d+\s*%", v) for v in values) and "utilization.gpu" not in columns:
            columns[k] = "utilization.gpu"
        elif all(v in ("Default", "Exclusive_Process", "Exclusive_Thread", "Prohibited") for v in values):
            columns[k] = "compute_mode"
        elif all(re.fullmatch(r"\d+", v) for v in values) and "index" not in columns:
            if [int(v) for v in values] == list(range(int(values[0]), int(values[0]) + len(values))):
                columns[k] = "index"
            elif all(int(v) >= 256 for v in values):
                memory_cols.append(k)
        elif (
            all(
                re.search(r"[A-Za-z]", v)
                and re.search(r"\b(NVIDIA|Tesla|GeForce|Quadro|RTX|GRID|TITAN|[AHBLTV]\d{1,3})\b", v)
                for v in values
            )
            and "name" not in columns
        ):
            columns[k] = "name"
    if memory_cols:
        ints = {k: [_mib(r[k]) or 0 for r in rows if k < len(r)] for k in memory_cols}
        total = max(memory_cols, key=lambda k: (len(set(ints[k])) == 1, min(ints[k])))
        columns[total] = "memory.total"
        rest = [k for k in memory_cols if k != total]
        for k, name in zip(rest, ("memory.used", "memory.free"), strict=False):
            columns[k] = name
    return columns


def _fits_our_columns(rows: list[list[str]]) -> bool:
    cols = list(QUERY_GPU_FIELDS)
    for r in rows:
        if len(r) != len(cols):
            return False
        row = dict(zip(cols, r, strict=True))
        if not (
            row["index"].isdecimal()
            and (_BUS_ID.match(row["pci.bus_id"]) or row["pci.bus_id"] in _PLACEHOLDERS)
            and (_UUID.match(row["uuid"]) or row["uuid"] in _PLACEHOLDERS)
            and _DRIVER.match(row["driver_version"])
        ):
            return False
    return bool(rows)


def parse_query_gpu_csv(text: str, commands: list[str] | None = None) -> SmiQuery:
    """`--query-gpu` CSV: header / units / `noheader` / `nounits`; a `--query-compute-apps` CSV pasted
    after it is read into the processes."""
    result = SmiQuery()
    commands = commands or []
    sections = _sections(text)
    gpu_part = _split_csv(sections[0])
    for extra in sections[1:]:
        apps = _split_csv(extra)
        if apps.header and "pid" in apps.header:
            _fill_apps(result, apps, apps.header)
    columns = gpu_part.header
    guessed = False
    if columns is None and gpu_part.rows:
        columns = _query_columns(commands, "query-gpu")
        if columns is None:
            if _fits_our_columns(gpu_part.rows):
                columns = list(QUERY_GPU_FIELDS)
            else:
                columns = _infer_gpu_columns(gpu_part.rows)
                guessed = True
    if columns is None:
        result.problems.append("no CSV row matched the header's columns")
        return result
    if "pid" in columns and "index" not in columns:
        # a --query-compute-apps CSV in this file
        _fill_apps(result, gpu_part, columns)
        return result
    skipped = 0
    for cells in gpu_part.rows:
        if len(cells) != len(columns):
            skipped += 1
            continue
        row = dict(zip(columns, cells, strict=True))
        if "index" in row and not row["index"].isdecimal():
            skipped += 1
            continue
        gpu = Gpu(index=int(row["index"]) if "index" in row else len(result.gpus))
        _fill_gpu(gpu, row)
        if row.get("driver_version"):
            result.driver.version = _clean(row["driver_version"])
        result.gpus.append(gpu)
    if result.gpus:
        result.driver.status = "ok"
    if skipped and result.gpus:
        result.problems.append(f"{skipped} line(s) did not match the columns and were skipped")
        result.partial.append(f"{skipped} line(s) did not fit the {len(columns)} columns")
    if gpu_part.elided:
        result.problems.append(f"{len(gpu_part.elided)} elided line(s) skipped: {gpu_part.elided[0]!r}")
        result.partial.append(f"rows left out by whoever pasted it ({gpu_part.elided[0]!r})")
    if guessed and result.gpus:
        named = [c for c in columns if c]
        result.partial.append(
            "no header and no --query-gpu= command line: columns inferred from the values' shapes "
            f"({', '.join(c or '?' for c in columns)})"
        )
        if not named:
            result.gpus = []
    if not result.gpus:
        result.problems.append("no CSV row matched the header's columns")
    return result


# Gpu attribute, --query-gpu column (after _ALIASES), reader
_CSV_FIELDS: tuple[tuple[str, str, Callable[[str | None], Any]], ...] = (
    ("name", "name", lambda v: "" if v is None else v),
    ("uuid", "uuid", _clean),
    ("bus_id", "pci.bus_id", _clean),
    ("memory_total_mib", "memory.total", _mib),
    ("memory_used_mib", "memory.used", _mib),
    ("utilization_pct", "utilization.gpu", _mib),
    ("persistence_mode", "persistence_mode", _clean),
    ("compute_mode", "compute_mode", _clean),
    ("mig_mode", "mig.mode.current", _clean),
    ("ecc_mode", "ecc.mode.current", _clean),
    ("ecc_volatile_uncorrectable", "ecc.errors.uncorrected.volatile.total", _count),
    ("ecc_aggregate_uncorrectable", "ecc.errors.uncorrected.aggregate.total", _count),
    ("ecc_volatile_correctable", "ecc.errors.corrected.volatile.total", _count),
    ("ecc_aggregate_correctable", "ecc.errors.corrected.aggregate.total", _count),
    ("remapped_rows_correctable", "remapped_rows.correctable", _count),
    ("remapped_rows_uncorrectable", "remapped_rows.uncorrectable", _count),
    ("remapped_rows_pending", "remapped_rows.pending", _yes_no),
    ("remapped_rows_failure", "remapped_rows.failure", _yes_no),
    ("retired_pages_pending", "retired_pages.pending", _yes_no),
    ("fabric_state", "fabric.state", _clean),
    ("fabric_status", "fabric.status", _clean),
)


def _fill_gpu(gpu: Gpu, row: dict[str, str]) -> None:
    for attr, column, convert in _CSV_FIELDS:
        setattr(gpu, attr, convert(row.get(column)))


def _infer_app_columns(rows: list[list[str]]) -> list[str]:
    width = max(len(r) for r in rows)
    columns = [""] * width
    ints: list[int] = []
    for k in range(width):
        values = [r[k] for r in rows if k < len(r)]
        if all(_TIMESTAMP.match(v) for v in values):
            columns[k] = "timestamp"
        elif all(_BUS_ID.match(v) for v in values):
            columns[k] = "pci.bus_id"
        elif all(_UUID.match(v) for v in values):
            columns[k] = "uuid"
        elif all(re.fullmatch(r"\d+\s*MiB", v) for v in values):
            columns[k] = "used_memory"
        elif all(re.fullmatch(r"\d+", v) for v in values):
            ints.append(k)
        elif all(("/" in v or not re.search(r"\b(NVIDIA|GeForce|Tesla|Quadro|RTX)\b", v)) for v in values):
            columns[k] = columns[k] or ("process_name" if "process_name" not in columns else "")
        else:
            columns[k] = "name" if "name" not in columns else ""
    # pid before used memory in every field list nvidia-smi documents
    for k, name in zip(ints, ("pid", "used_memory"), strict=False):
        if name not in columns:
            columns[k] = name
    return columns


def parse_compute_apps_csv(text: str, commands: list[str] | None = None) -> SmiQuery:
    """`--query-compute-apps=... --format=csv[,noheader][,nounits]`: the GPU processes."""
    result = SmiQuery()
    part = _split_csv(text.splitlines())
    columns = part.header or _query_columns(commands or [], "query-compute-apps")
    guessed = False
    if columns is None and part.rows:
        columns = _infer_app_columns(part.rows)
        guessed = True
    if columns is None:
        if text.strip():
            result.problems.append("no 'pid, ...' header, no command line and no rows")
        return result
    _fill_apps(result, part, columns)
    if guessed:
        result.partial.append(
            "no header and no --query-compute-apps= command line: columns inferred from the values "
            f"({', '.join(c or '?' for c in columns)})"
        )
    if part.elided:
        result.partial.append(f"rows left out by whoever pasted it ({part.elided[0]!r})")
    if not result.processes and part.rows:
        result.problems.append("no row matched the columns")
    return result


def _fill_apps(result: SmiQuery, part: _Csv, columns: list[str]) -> None:
    result.processes_section = True
    asked_pid = "pid" in columns  # a query may leave pid out (`--query-compute-apps=gpu_uuid,name`)
    for cells in part.rows:
        if len(cells) != len(columns):
            continue
        row = dict(zip(columns, cells, strict=True))
        pid = _count(row.get("pid"))
        if pid is None and (asked_pid or not any(row.get(c) for c in ("process_name", "uuid", "pci.bus_id"))):
            continue
        result.processes.append(
            GpuProcess(
                gpu_index=None,
                pid=pid,
                name=(row.get("process_name") or "").strip(),
                used_mib=_mib(row.get("used_memory")),
                type="C",
                gpu_uuid=_clean(row.get("uuid")),
                gpu_bus_id=_clean(row.get("pci.bus_id")),
            )
        )
