"""`nvidia-smi topo -m`: the GPU/NIC link matrix, CPU/NUMA affinity and the NIC legend.

Real captures come tab-separated (with empty affinity cells under Slurm cgroups) or with tabs
expanded / collapsed to spaces by whoever pasted them, so cells are read by tab when there are tabs
and by column position otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vllm_medic.snapshot import Topology

_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx5_\w+|CPU\d*|[a-z]+\d+_\d+)$")
_LINK = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|NA|N/A)$")
_AFFINITY_HEADERS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


@dataclass
class TopologyResult:
    topology: Topology = field(default_factory=Topology)
    gpu_numa_id: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def parse_topology(text: str) -> TopologyResult:
    result = TopologyResult()
    try:
        _parse(text, result)
    except Exception as exc:  # noqa: BLE001 - a parser never raises
        result.problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return result


def _find_header(lines: list[str]) -> int | None:
    for i, line in enumerate(lines):
        tokens = line.split()
        if tokens and tokens[0] in ("GPU0", "NIC0", "mlx5_0") and line[:1] in (" ", "\t"):
            return i
        if (
            tokens
            and tokens[0] == "GPU0"
            and len(tokens) > 1
            and tokens[1] in ("GPU1", "NIC0", "mlx5_0", "CPU")
        ):
            return i
    return None


def _parse(text: str, result: TopologyResult) -> None:
    topo = result.topology
    lines = text.splitlines()
    h = _find_header(lines)
    if h is None:
        result.problems.append("no matrix header (a line starting with GPU0 ...) found")
        return
    header = lines[h]
    aff_starts: dict[str, int] = {}
    device_part = header
    for name in _AFFINITY_HEADERS:
        pos = header.find(name)
        if pos >= 0:
            aff_starts[name] = pos
    if aff_starts:
        device_part = header[: min(aff_starts.values())]
    devices = [t for t in device_part.split() if _DEVICE.match(t)]
    topo.devices = devices
    n = len(devices)
    if n == 0:
        result.problems.append("matrix header lists no devices")
        return
    for line in lines[h + 1 :]:
        if not line.strip():
            if topo.matrix:
                # a blank line ends the matrix; the legend follows
                pass
            continue
        first = line.split()[0]
        if first not in devices:
            legend = _LEGEND.match(line)
            if legend:
                topo.nic_legend[legend.group(1)] = legend.group(2)
            continue
        if first in topo.matrix:
            continue
        if "\t" in line:
            fields = [f.strip() for f in line.split("\t")]
            links = fields[1 : 1 + n]
            rest = fields[1 + n :]
            cpu = rest[0] if rest else ""
            numa = rest[1] if len(rest) > 1 else ""
            tail = [r for r in rest[2:] if r]
            gpu_numa = tail[-1] if tail else ""
        else:
            tokens = [(m.start(), m.group(0)) for m in re.finditer(r"\S+", line)]
            links = [t for _, t in tokens[1 : 1 + n]]
            cpu = numa = gpu_numa = ""
            rest_tokens = tokens[1 + n :]
            ordered = sorted(aff_starts, key=aff_starts.__getitem__)
            in_order = len(rest_tokens) == len(ordered)
            # Fewer values than columns: the empty cells are on the left (a cgroup-limited CPU
            # Affinity, then NUMA Affinity); GPU NUMA ID is always printed. Tab stops shift once a
            # cell is empty, so positions cannot tell which column a value sits under.
            short = 0 < len(rest_tokens) < len(ordered)
            for k, (pos, tok) in enumerate(rest_tokens):
                if in_order:
                    column = ordered[k]
                elif short:
                    column = ordered[len(ordered) - len(rest_tokens) + k]
                else:
                    column = _nearest(aff_starts, pos) if aff_starts else "NUMA Affinity"
                if column == "CPU Affinity" and not cpu:
                    cpu = tok
                elif column == "NUMA Affinity" and not numa:
                    numa = tok
                elif column == "GPU NUMA ID" and not gpu_numa:
                    gpu_numa = tok
        if len(links) < n or not all(_LINK.match(x) for x in links if x):
            result.problems.append(f"row {first}: expected {n} link cells, read {links!r}")
        topo.matrix[first] = {dev: link for dev, link in zip(devices, links, strict=False) if link}
        if cpu:
            topo.cpu_affinity[first] = cpu
        if numa:
            topo.numa_affinity[first] = numa
        if gpu_numa:
            result.gpu_numa_id[first] = gpu_numa
    if not topo.matrix:
        result.problems.append("matrix header found but no device rows")


def _nearest(starts: dict[str, int], pos: int) -> str:
    return min(starts, key=lambda name: abs(starts[name] - pos))
