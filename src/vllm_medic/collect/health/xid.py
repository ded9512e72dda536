"""NVIDIA Xid events: find them in kernel-log text and classify them with NVIDIA's catalogue.

Pure functions over text. The catalogue is data (``data/xid_catalogue.yaml``); an Xid that is not in
it is still reported, as "unknown to this catalogue", never dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

import yaml

from vllm_medic.snapshot_health import XidEvent

# NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s ...
# NVRM: Xid (0000:01:00): 3, C 00000005 ...   (older drivers: no "PCI:")
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f:.]+)\):\s*(?P<xid>\d+)\s*,?\s*(?P<rest>.*)$")
_PID = re.compile(r"\bpid=(?P<pid>'?<?[\w]+>?'?)")
_NAME = re.compile(r"\bname=(?P<name>[^,\s]+)")
# Newer drivers print a lost GPU without an Xid line: "NVRM: The NVIDIA GPU 0000:b3:00.0 ... fallen off the bus"
_FALLEN = re.compile(r"NVRM: (?:The NVIDIA )?GPU (?:at )?(?:PCI:)?(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f:.]+)")
_FALLEN_TEXT = re.compile(r"fallen off\s+the bus", re.IGNORECASE)
_TIMESTAMP = re.compile(r"^\s*(\[[^\]]+\]|[A-Z][a-z]{2}\s+\d+\s+\d\d:\d\d:\d\d(?:\s+\S+\s+kernel:)?)")

DOCS_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"


@dataclass(frozen=True)
class XidInfo:
    id: int
    mnemonic: str
    description: str
    category: str
    severity: str
    explains_cuda_error: bool
    action: str
    nvidia_immediate: str = ""
    nvidia_investigatory: str = ""
    severity_if_nonfatal: str | None = None


@dataclass
class XidGroup:
    """All events with one Xid id on one GPU, summarised for a finding."""

    xid: int
    pci: str
    count: int
    first: XidEvent
    last: XidEvent
    info: XidInfo | None = None
    processes: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)  # distinct messages, at most 20


@cache
def catalogue() -> dict[int, XidInfo]:
    text = resources.files("vllm_medic.collect.health").joinpath("data/xid_catalogue.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    out: dict[int, XidInfo] = {}
    for e in data["entries"]:
        out[int(e["id"])] = XidInfo(
            id=int(e["id"]),
            mnemonic=str(e["mnemonic"]),
            description=str(e["description"]),
            category=str(e["category"]),
            severity=str(e["severity"]),
            explains_cuda_error=bool(e["explains_cuda_error"]),
            action=str(e["action"]),
            nvidia_immediate=str(e.get("nvidia_immediate") or ""),
            nvidia_investigatory=str(e.get("nvidia_investigatory") or ""),
            severity_if_nonfatal=e.get("severity_if_nonfatal"),
        )
    return out


def lookup(xid: int) -> XidInfo | None:
    return catalogue().get(xid)


def parse_xid_events(text: str) -> list[XidEvent]:
    """Every Xid event in ``text`` (dmesg, dmesg -T, journalctl -k or a log that quotes them)."""
    events: list[XidEvent] = []
    xid_pcis: set[str] = set()
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        m = _XID.search(line)
        if m:
            rest = m.group("rest").strip()
            pid = _PID.search(rest)
            name = _NAME.search(rest)
            message = rest
            for part in (pid, name):
                if part:
                    message = message.replace(part.group(0), "")
            message = message.strip(" ,")
            ts = _TIMESTAMP.match(line)
            pci = _norm_pci(m.group("pci"))
            events.append(
                XidEvent(
                    xid=int(m.group("xid")),
                    pci=pci,
                    line_no=no,
                    line=line.strip(),
                    when=ts.group(1).strip() if ts else "",
                    pid=pid.group("pid").strip("'") if pid else None,
                    process=name.group("name") if name else None,
                    message=message,
                )
            )
            xid_pcis.add(pci)
            continue
        if _FALLEN_TEXT.search(line):
            g = _FALLEN.search(line) or _previous_gpu(text.splitlines(), no - 1)
            pci = _norm_pci(g.group("pci")) if g else "unknown"
            if pci in xid_pcis or any(e.xid == 79 and e.pci == pci for e in events):
                continue  # already reported through its Xid 79 line
            ts = _TIMESTAMP.match(line)
            events.append(
                XidEvent(
                    xid=79,
                    pci=pci,
                    line_no=no,
                    line=line.strip(),
                    when=ts.group(1).strip() if ts else "",
                    message="GPU has fallen off the bus (printed without an Xid line)",
                    inferred=True,
                )
            )
    return events


def _previous_gpu(lines: list[str], idx: int) -> re.Match[str] | None:
    for back in range(idx - 1, max(idx - 4, -1), -1):
        m = _FALLEN.search(lines[back])
        if m:
            return m
    return None


def _norm_pci(pci: str) -> str:
    """'0000:9b:00' and '0000:9B:00.0' name the same GPU; keep domain:bus:device in lower case."""
    p = pci.lower().rstrip(".:")
    parts = p.split(":")
    if len(parts) >= 3:
        dev = parts[2].split(".")[0]
        return f"{parts[0]}:{parts[1]}:{dev}"
    return p


_NONFATAL = re.compile(r"\bNonfatal\b")


def group_severity(g: XidGroup) -> str:
    """The catalogue's severity, lowered for NVLink5 events that all say `Nonfatal`."""
    if g.info is None:
        return "warn"
    if g.info.severity_if_nonfatal and all(_NONFATAL.search(e) for e in g.messages):
        return g.info.severity_if_nonfatal
    return g.info.severity


def group_events(events: list[XidEvent]) -> list[XidGroup]:
    """One group per (Xid, GPU), in order of first appearance."""
    groups: dict[tuple[int, str], XidGroup] = {}
    for ev in events:
        key = (ev.xid, ev.pci)
        g = groups.get(key)
        if g is None:
            g = groups[key] = XidGroup(ev.xid, ev.pci, 0, ev, ev, lookup(ev.xid))
        g.count += 1
        g.last = ev
        if ev.process and ev.process not in g.processes:
            g.processes.append(ev.process)
        if ev.message not in g.messages and len(g.messages) < 20:
            g.messages.append(ev.message)
    return list(groups.values())
