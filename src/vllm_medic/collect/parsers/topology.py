"""`nvidia-smi topo -m`: the GPU/NIC link matrix, CPU/NUMA affinity and the NIC legend.

Read by grammar, not by column position: the header names the devices (GPU0.., NIC0.., or
`mlx5_N` on older drivers) and the affinity columns (`CPU Affinity`, `NUMA Affinity`,
`GPU NUMA ID`); every row must hold one link cell per device. Cells are split by tab when the row
has tabs, else by whitespace *and* by the link tokens of NVIDIA's legend when two were glued in a
paste (`NODENODE`, `SYS0-63`). A row that still does not fit the header is recorded as a problem
and kept only as far as it could be read — never shifted into the wrong columns — and a matrix
without a row for every device it names is a partial one (`TopologyResult.partial`).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from vllm_medic.snapshot import Topology

_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\w+|CPU\d*|[a-z]+\d+_\d+)$")
_DEVICE_GLUED = re.compile(r"GPU\d+|NIC\d+|mlx\d+_\d+")
# NVIDIA's legend (X, SYS, NODE, PHB, PXB, PIX, NV#), SOC (older drivers' name for SYS), and the
# placeholders a cell can hold
_LINK = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|NA|N/A)$")
_LINK_RUN = re.compile(r"X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC")
# between spaces "N/A" is GPU NUMA ID's value, never taken for a link cell (that would shift a row)
_LINK_WORD = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")
_AFFINITY_HEADERS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_AFFINITY_VALUE = re.compile(r"^(\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*|N/A)$")


@dataclass
class TopologyResult:
    topology: Topology = field(default_factory=Topology)
    gpu_numa_id: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)  # why the matrix is not the whole one
    not_nvidia: str | None = None  # a matrix of another tool (rocm-smi weights) was found instead


def parse_topology(text: str) -> TopologyResult:
    result = TopologyResult()
    try:
        _parse(text, result)
    except Exception as exc:  # noqa: BLE001 - a parser never raises
        result.problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return result


@dataclass
class _Header:
    index: int
    devices: list[str]
    affinity: list[str]  # affinity column names in header order
    affinity_pos: dict[str, int]
    tabbed: bool


def _header_devices(part: str) -> list[str] | None:
    devices: list[str] = []
    for tok in part.split():
        if _DEVICE.match(tok):
            devices.append(tok)
            continue
        glued = _DEVICE_GLUED.findall(tok)
        if glued and "".join(glued) == tok:
            devices.extend(glued)
            continue
        return None
    return devices


def _find_header(lines: list[str]) -> _Header | None:
    for i, line in enumerate(lines):
        if "GPU0" not in line and "NIC0" not in line and "mlx5_0" not in line:
            continue
        positions = {name: line.find(name) for name in _AFFINITY_HEADERS if name in line}
        cut = min(positions.values()) if positions else len(line)
        devices = _header_devices(line[:cut])
        if not devices or devices[0] not in ("GPU0", "NIC0", "mlx5_0"):
            continue
        # a header names each device once; a data row starts with a device followed by link cells
        if len(devices) < 2 and not positions:
            continue
        if len(set(devices)) != len(devices):
            continue
        return _Header(
            index=i,
            devices=devices,
            affinity=sorted(positions, key=positions.__getitem__),
            affinity_pos=positions,
            tabbed="\t" in line,
        )
    return None


def _split_glued(token: str, common_nv: str | None) -> list[str] | None:
    """`NODENODE` -> [NODE, NODE]; `SYS0-63` -> [SYS, 0-63]; None if it is not made of link tokens."""
    if common_nv and token.startswith(common_nv) and token != common_nv:
        rest = _split_glued(token[len(common_nv) :], common_nv)
        return [common_nv, *rest] if rest is not None else None
    m = _LINK_RUN.match(token)
    if not m or not m.group(0):
        return [token] if _AFFINITY_VALUE.match(token) else None
    head = m.group(0)
    if head.startswith("NV") and common_nv and head != common_nv and head.startswith(common_nv):
        head = common_nv  # NV18 glued to "0-71" reads NV180-71: the matrix's own NV width decides
    suffix = token[len(head) :]
    if not suffix:
        return [head]
    tail = _split_glued(suffix, common_nv)
    return [head, *tail] if tail is not None else None


_WHOLE_LINKS = ("SYS", "NODE", "PHB", "PXB", "PIX")


def _maybe_cut(cell: str, common_nv: str | None) -> bool:
    """The last cell of a paste that ends mid-row: a proper prefix of a link token may be cut short."""
    if any(t.startswith(cell) and t != cell for t in _WHOLE_LINKS):
        return True
    return bool(cell.startswith("NV") and common_nv and cell != common_nv and common_nv.startswith(cell))


def _parse(text: str, result: TopologyResult) -> None:
    topo = result.topology
    lines = text.splitlines()
    header = _find_header(lines)
    if header is None:
        result.problems.append("no matrix header (a line naming GPU0 ... and the affinity columns) found")
        return
    devices = header.devices
    topo.devices = devices
    n = len(devices)
    common_nv = _common_nv(lines[header.index + 1 :])
    numeric_rows = 0
    last_line = next((ln for ln in reversed(lines) if ln.strip()), None)
    for line in lines[header.index + 1 :]:
        if not line.strip():
            continue
        is_last = line is last_line
        legend = _LEGEND.match(line)
        if legend:
            topo.nic_legend[legend.group(1)] = legend.group(2)
            continue
        first = line.split()[0]
        glued_first = _DEVICE_GLUED.match(first)
        if first not in devices and glued_first and glued_first.group(0) in devices:
            # the row label glued to its first cell ("GPU0X"): split it off
            line = line.replace(first, f"{glued_first.group(0)} {first[glued_first.end() :]}", 1)
            first = glued_first.group(0)
        if first not in devices or first in topo.matrix:
            continue
        body = line.split(first, 1)[1]
        if "\t" in body and (header.tabbed or body.count("\t") >= n):
            links, affinity, problem = _row_by_tabs(body, n, header, common_nv)
        else:
            links, affinity, problem = _row_by_tokens(body, n, header, line, common_nv)
        if re.fullmatch(r"(\s+\d+){" + str(n) + r"}\s*", body):
            numeric_rows += 1
        if problem:
            result.problems.append(f"row {first}: {problem}")
            result.partial.append(f"row {first} does not fit the header's {n} columns ({problem})")
        filled = [i for i, link in enumerate(links) if link]
        if is_last and not any(affinity.values()) and filled:
            result.partial.append(
                f"row {first} is the last line and stops after {len(filled)} of {n} cells, "
                "before its affinity columns"
            )
            if _maybe_cut(links[filled[-1]], common_nv):  # "NV1" of "NV18", "NO" of "NODE"
                links = list(links)
                links[filled[-1]] = ""
        topo.matrix[first] = {dev: link for dev, link in zip(devices, links, strict=False) if link}
        for column, value in affinity.items():
            if not value:
                continue
            if column == "CPU Affinity":
                topo.cpu_affinity[first] = value
            elif column == "NUMA Affinity":
                topo.numa_affinity[first] = value
            elif column == "GPU NUMA ID":
                result.gpu_numa_id[first] = value
    if numeric_rows and numeric_rows == len(topo.matrix):
        result.not_nvidia = "the matrix holds numbers, not link types (a rocm-smi weight/hops table?)"
        result.topology = Topology()
        result.gpu_numa_id = {}
        result.problems = []
        result.partial = []
        return
    if not topo.matrix:
        result.problems.append("matrix header found but no device rows")
        return
    missing = [d for d in devices if d not in topo.matrix]
    if missing:
        result.partial.append(
            f"no row for {', '.join(missing[:6])}{' ...' if len(missing) > 6 else ''} "
            f"({len(topo.matrix)} of {n} rows: the table is cut)"
        )


def _common_nv(lines: list[str]) -> str | None:
    counts = Counter(tok for line in lines for tok in line.split() if re.fullmatch(r"NV\d+", tok))
    return counts.most_common(1)[0][0] if counts else None


def _row_by_tabs(
    body: str, n: int, header: _Header, common_nv: str | None
) -> tuple[list[str], dict[str, str], str | None]:
    fields = [f.strip() for f in body.split("\t")]
    if fields and fields[0] == "":
        fields = fields[1:]
    cells: list[str] = []
    problem = None
    k = 0
    while len(cells) < n and k < len(fields):
        f = fields[k]
        k += 1
        if _LINK.match(f):
            cells.append(f)
            continue
        parts = _split_glued(f, common_nv) if f else None
        if parts and all(_LINK.match(p) for p in parts) and len(cells) + len(parts) <= n:
            cells.extend(parts)
            continue
        problem = f"cell {len(cells) + 1} is {f!r}, not a link type"
        break
    if problem is None and len(cells) < n:
        problem = f"{len(cells)} link cells for {n} devices"
    rest = fields[k:] if problem is None else []
    affinity: dict[str, str] = {}
    names = header.affinity
    if names:
        # nvidia-smi writes CPU Affinity, NUMA Affinity, then an empty field before GPU NUMA ID
        if "GPU NUMA ID" in names:
            tail = [r for r in rest[len(names) - 1 :] if r]
            affinity["GPU NUMA ID"] = tail[-1] if tail else ""
            plain = [name for name in names if name != "GPU NUMA ID"]
        else:
            plain = list(names)
        for name, value in zip(plain, rest, strict=False):
            affinity[name] = value
    return cells, affinity, problem


def _row_by_tokens(
    body: str, n: int, header: _Header, line: str, common_nv: str | None
) -> tuple[list[str], dict[str, str], str | None]:
    offset = len(line) - len(body)
    tokens = [(m.start() + offset, m.group(0)) for m in re.finditer(r"\S+", body)]
    cells: list[str] = []
    leftover: list[tuple[int, str]] = []
    problem = None
    k = 0
    while k < len(tokens):
        pos, tok = tokens[k]
        k += 1
        if len(cells) >= n:
            leftover.append((pos, tok))
            continue
        if _LINK_WORD.match(tok):
            cells.append(tok)
            continue
        parts = _split_glued(tok, common_nv)
        if parts is None:
            problem = f"cell {len(cells) + 1} is {tok!r}, not a link type"
            break
        links = [p for p in parts if _LINK_WORD.match(p)]
        extra = parts[len(links) :]
        if len(cells) + len(links) > n or any(not _LINK_WORD.match(p) for p in parts[: len(links)]):
            problem = f"{tok!r} does not split into the remaining link cells"
            break
        cells.extend(links)
        leftover.extend((pos, e) for e in extra)
    if problem is None and len(cells) < n:
        problem = f"{len(cells)} link cells for {n} devices"
    affinity: dict[str, str] = {}
    if problem is None and header.affinity:
        ordered = header.affinity
        if len(leftover) == len(ordered):
            affinity = {name: tok for name, (_, tok) in zip(ordered, leftover, strict=True)}
        elif 0 < len(leftover) < len(ordered):
            # Fewer values than columns: the empty cells are on the left (a cgroup-limited CPU
            # Affinity, then NUMA Affinity); GPU NUMA ID is always printed. Tab stops shift once a
            # cell is empty, so positions cannot tell which column a value sits under.
            names = ordered[len(ordered) - len(leftover) :]
            affinity = {name: tok for name, (_, tok) in zip(names, leftover, strict=True)}
        else:
            for pos, tok in leftover:
                name = min(header.affinity_pos, key=lambda c: abs(header.affinity_pos[c] - pos))
                affinity.setdefault(name, tok)
    return cells, affinity, problem
