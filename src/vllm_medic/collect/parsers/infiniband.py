"""RDMA port state: `ibstat`, `ibstatus`, `ibv_devinfo` (`-v`) and `rdma link`.

All four answer the question `ibdev2netdev` cannot: is the RDMA port itself up (logical state
Active, physical state LinkUp), at what rate, over InfiniBand or Ethernet (RoCE). Each reader
returns `IbPort`s with the states normalised (`PORT_ACTIVE (4)`, `4: ACTIVE` and `ACTIVE` are all
`Active`); a block that stops before its port lines (a paste cut short) makes the result partial.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vllm_medic.snapshot import IbPort

_STATES = {
    "active": "Active",
    "down": "Down",
    "init": "Init",
    "initialize": "Init",
    "armed": "Armed",
    "nop": "Nop",
    "active_defer": "ActiveDefer",
}
_PHYS = {
    "linkup": "LinkUp",
    "polling": "Polling",
    "disabled": "Disabled",
    "sleep": "Sleep",
    "portconfigurationtraining": "PortConfigurationTraining",
    "linkerrorrecovery": "LinkErrorRecovery",
    "phytest": "PhyTest",
}


@dataclass
class IbResult:
    ports: list[IbPort] = field(default_factory=list)
    partial: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # tool warnings printed with the output (ibwarn:)


def normalise_state(value: str | None) -> str | None:
    """`PORT_ACTIVE (4)`, `4: ACTIVE`, `ACTIVE`, `Active` -> `Active`."""
    if not value:
        return None
    word = re.sub(r"^\d+:\s*|\s*\(\d+\)\s*$", "", value.strip())
    word = word.lower().removeprefix("port_").replace(" ", "")
    return _STATES.get(word, value.strip())


def normalise_phys(value: str | None) -> str | None:
    """`LINK_UP (5)`, `5: LinkUp`, `LinkUp` -> `LinkUp`; `DISABLED (3)` -> `Disabled`."""
    if not value:
        return None
    word = re.sub(r"^\d+:\s*|\s*\(\d+\)\s*$", "", value.strip())
    return _PHYS.get(word.lower().replace("_", "").replace(" ", ""), value.strip())


def _link_layer(value: str | None) -> str | None:
    v = (value or "").strip().lower()
    return {"infiniband": "InfiniBand", "ethernet": "Ethernet"}.get(v, value.strip() if value else None)


def _rate(value: str | None) -> float | None:
    m = re.match(r"^\s*(\d+(?:\.\d+)?)", value or "")
    return float(m.group(1)) if m else None


def _int(value: str | None) -> int | None:
    v = (value or "").strip()
    try:
        return int(v, 16) if v.lower().startswith("0x") else int(v)
    except ValueError:
        return None


def _noise(line: str, result: IbResult) -> bool:
    s = line.strip()
    if re.match(
        r"^(ibwarn|ibpanic|ibstat|ibv_devinfo|Failed|mlx5dv|libibverbs)\b.*:", s
    ) and not s.startswith("ibv_devinfo:"):
        result.notes.append(s)
        if s.startswith("ibpanic"):
            result.partial.append(f"the tool stopped early: {s}")
        return True
    if re.match(r"^(\.{3}|…|\[\.\.\.\])\s*$", s):
        result.partial.append("lines left out by whoever pasted it (...)")
        return True
    return False


# ---------------------------------------------------------------- ibstat

_CA = re.compile(r"^CA\s+'(?P<ca>[^']+)'\s*$")
_KV = re.compile(r"^\s*(?P<k>[A-Za-z][A-Za-z _/\-]*?)\s*:\s*(?P<v>.*?)\s*$")


def parse_ibstat(text: str) -> IbResult:
    result = IbResult()
    try:
        _parse_ibstat(text, result)
    except Exception as exc:  # noqa: BLE001 - a parser never raises
        result.problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return result


def _parse_ibstat(text: str, result: IbResult) -> None:
    ca: str | None = None
    ca_info: dict[str, str] = {}
    expected: dict[str, int] = {}
    seen: dict[str, int] = {}
    port: IbPort | None = None
    cas: list[str] = []
    for line in text.splitlines():
        if not line.strip() or _noise(line, result):
            continue
        m = _CA.match(line.strip())
        if m:
            ca = m.group("ca")
            cas.append(ca)
            ca_info = {}
            port = None
            seen[ca] = 0
            continue
        if ca is None:
            continue
        pm = re.match(r"^\s*Port\s+(\d+)\s*:\s*$", line)
        if pm:
            port = IbPort(
                device=ca,
                port=int(pm.group(1)),
                ca_type=ca_info.get("CA type"),
                firmware=ca_info.get("Firmware version"),
                source="ibstat",
            )
            result.ports.append(port)
            seen[ca] += 1
            continue
        kv = _KV.match(line)
        if not kv:
            continue
        key, value = kv.group("k").strip(), kv.group("v")
        if value.strip() in ("...", "…", "[...]"):
            result.partial.append(f"{ca}: {key} elided in the paste")
            continue
        if port is None:
            ca_info[key] = value
            if key == "Number of ports":
                expected[ca] = _int(value) or 0
            continue
        if key == "State":
            port.state = normalise_state(value)
        elif key == "Physical state":
            port.physical_state = normalise_phys(value)
        elif key == "Rate":
            port.rate_gbps = _rate(value)
        elif key == "Base lid":
            port.lid = _int(value)
        elif key == "SM lid":
            port.sm_lid = _int(value)
        elif key == "Link layer":
            port.link_layer = _link_layer(value)
    for name in cas:
        if seen.get(name, 0) < expected.get(name, 0):
            result.partial.append(f"CA {name}: {expected[name]} port(s), {seen.get(name, 0)} shown (cut?)")
    _incomplete_ports(result, ("state", "link_layer"))
    if not cas and text.strip():
        result.problems.append("no \"CA 'name'\" block found")


def _incomplete_ports(result: IbResult, needed: tuple[str, ...]) -> None:
    for p in result.ports:
        missing = [f for f in needed if getattr(p, f) is None]
        if missing:
            result.partial.append(f"{p.device} port {p.port}: no {', '.join(missing)} (block cut?)")


# ---------------------------------------------------------------- ibstatus

_IBSTATUS = re.compile(r"^Infiniband device\s+'(?P<dev>[^']+)'\s+port\s+(?P<port>\d+)\s+status:\s*$")


def parse_ibstatus(text: str) -> IbResult:
    result = IbResult()
    port: IbPort | None = None
    for line in text.splitlines():
        if not line.strip() or _noise(line, result):
            continue
        m = _IBSTATUS.match(line.strip())
        if m:
            port = IbPort(device=m.group("dev"), port=int(m.group("port")), source="ibstatus")
            result.ports.append(port)
            continue
        kv = _KV.match(line)
        if port is None or not kv:
            continue
        key, value = kv.group("k").strip().lower(), kv.group("v")
        if key == "state":
            port.state = normalise_state(value)
        elif key == "phys state":
            port.physical_state = normalise_phys(value)
        elif key == "rate":
            port.rate_gbps = _rate(value)
        elif key == "link_layer":
            port.link_layer = _link_layer(value)
        elif key == "base lid":
            port.lid = _int(value)
        elif key == "sm lid":
            port.sm_lid = _int(value)
    _incomplete_ports(result, ("state",))
    if not result.ports and text.strip():
        result.problems.append("no \"Infiniband device 'X' port N status:\" block found")
    return result


# ---------------------------------------------------------------- ibv_devinfo

_LANES = {"1X": 1, "2X": 2, "4X": 4, "8X": 8, "12X": 12}


def parse_ibv_devinfo(text: str) -> IbResult:
    result = IbResult()
    try:
        _parse_ibv_devinfo(text, result)
    except Exception as exc:  # noqa: BLE001 - a parser never raises
        result.problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return result


def _parse_ibv_devinfo(text: str, result: IbResult) -> None:
    hca: str | None = None
    info: dict[str, str] = {}
    expected: dict[str, int] = {}
    seen: dict[str, int] = {}
    hcas: list[str] = []
    port: IbPort | None = None
    width: dict[int, int] = {}
    for line in text.splitlines():
        if not line.strip() or _noise(line, result):
            continue
        m = re.match(r"^\s*hca_id:\s*(\S+)\s*$", line)
        if m:
            hca = m.group(1)
            hcas.append(hca)
            info, port = {}, None
            seen[hca] = 0
            continue
        if hca is None:
            if re.match(r"^\s*[a-z_]+:\s*\S", line) and not result.partial:
                # the paste starts inside a device block: that device's name and port are not in it
                result.partial.append(f"starts inside a device block ({line.strip()!r} before any hca_id)")
            continue
        pm = re.match(r"^\s*port:\s*(\d+)\s*$", line)
        if pm:
            port = IbPort(
                device=hca,
                port=int(pm.group(1)),
                ca_type=f"MT{info['vendor_part_id']}" if info.get("vendor_part_id") else None,
                firmware=info.get("fw_ver"),
                source="ibv-devinfo",
            )
            result.ports.append(port)
            seen[hca] += 1
            continue
        kv = re.match(r"^\s*(?P<k>[A-Za-z_][\w \[\]]*?)\s*:\s*(?P<v>.*?)\s*$", line)
        if not kv:
            continue
        key, value = kv.group("k").strip(), kv.group("v")
        if port is None:
            info[key] = value
            if key == "phys_port_cnt":
                expected[hca] = _int(value) or 0
            continue
        if key == "state":
            port.state = normalise_state(value)
        elif key == "phys_state":
            port.physical_state = normalise_phys(value)
        elif key == "link_layer":
            port.link_layer = _link_layer(value)
        elif key == "port_lid":
            port.lid = _int(value)
        elif key == "sm_lid":
            port.sm_lid = _int(value)
        elif key == "active_width":
            lanes = _LANES.get(value.split()[0].upper()) if value.split() else None
            if lanes:
                width[id(port)] = lanes
        elif key == "active_speed":
            speed = _rate(value)
            lanes = width.get(id(port))
            if speed is not None and lanes:
                port.rate_gbps = speed * lanes
    for name in hcas:
        if seen.get(name, 0) < expected.get(name, 0):
            result.partial.append(
                f"{name}: {expected[name]} port(s), {seen.get(name, 0)} shown (the output stops before its port block)"
            )
    _incomplete_ports(result, ("state",))
    if not hcas and text.strip():
        result.problems.append("no 'hca_id: NAME' block found")


# ---------------------------------------------------------------- rdma link

_RDMA_LINK = re.compile(r"^\s*(?:\d+/\d+:\s*)?link\s+(?P<dev>[^/\s]+)/(?P<port>\d+)\s*(?P<rest>.*)$")


def parse_rdma_link(text: str) -> IbResult:
    """`rdma link` / `rdma link show`: `link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1`."""
    result = IbResult()
    other = 0
    for line in text.splitlines():
        if not line.strip() or _noise(line, result):
            continue
        m = _RDMA_LINK.match(line)
        if not m:
            other += 1
            continue
        words = m.group("rest").split()
        kv = {words[i]: words[i + 1] for i in range(0, len(words) - 1, 2)}
        port = IbPort(
            device=m.group("dev"),
            port=int(m.group("port")),
            state=normalise_state(kv.get("state")),
            physical_state=normalise_phys(kv.get("physical_state")),
            netdev=kv.get("netdev"),
            lid=_int(kv.get("lid")),
            sm_lid=_int(kv.get("sm_lid")),
            # an InfiniBand port shows its subnet prefix and LID; a RoCE port shows neither
            link_layer="InfiniBand" if "lid" in kv or "subnet_prefix" in kv else None,
            source="rdma-link",
        )
        result.ports.append(port)
    if not result.ports and other:
        result.problems.append("no 'link DEV/PORT state ...' line found")
    return result


def merge_ports(lists: list[list[IbPort]]) -> list[IbPort]:
    """One port per (device, port): the first source's values, gaps filled from the others."""
    merged: dict[tuple[str, int | None], IbPort] = {}
    for ports in lists:
        for p in ports:
            key = (p.device, p.port)
            base = merged.get(key)
            if base is None:
                merged[key] = IbPort(**vars(p))
                continue
            for name, value in vars(p).items():
                if getattr(base, name) is None and value is not None:
                    setattr(base, name, value)
    return list(merged.values())
