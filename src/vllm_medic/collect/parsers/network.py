"""RDMA and link state: `ibdev2netdev` and `ip link` / `ip -br link`."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vllm_medic.collect.parsers import is_prompt_line
from vllm_medic.snapshot import NetLink, RdmaPort

_IBDEV = re.compile(
    r"^\s*(?P<dev>[\w.\-]+)\s+port\s+(?P<port>\d+)\s+==>\s+(?P<netdev>\S+)\s*\((?P<state>[^)]*)\)"
)
_IP_LINK = re.compile(r"^\s*\d+:\s+(?P<name>[^:\s]+):\s+<(?P<flags>[^>]*)>(?P<rest>.*)$")
_IP_BRIEF = re.compile(
    r"^(?P<name>\S+)\s+(?P<state>UP|DOWN|UNKNOWN|LOWERLAYERDOWN|DORMANT|NOTPRESENT)\b(?P<rest>.*)$"
)


@dataclass
class RdmaResult:
    ports: list[RdmaPort] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


@dataclass
class LinksResult:
    links: list[NetLink] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def parse_ibdev2netdev(text: str) -> RdmaResult:
    result = RdmaResult()
    other = 0
    for line in text.splitlines():
        m = _IBDEV.match(line)
        if m:
            result.ports.append(
                RdmaPort(
                    ib_dev=m.group("dev"),
                    port=int(m.group("port")),
                    netdev=m.group("netdev"),
                    state=m.group("state").strip() or None,
                )
            )
        elif line.strip() and not is_prompt_line(line):
            other += 1
    if not result.ports and other:
        result.problems.append("no 'DEV port N ==> NETDEV (State)' line found")
    return result


def parse_ip_link(text: str) -> LinksResult:
    """Both the full (`ip link`) and brief (`ip -br link`) forms."""
    result = LinksResult()
    current: NetLink | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        full = _IP_LINK.match(line)
        if full:
            name = full.group("name").split("@")[0]
            rest = full.group("rest")
            mtu = re.search(r"\bmtu\s+(\d+)", rest)
            state = re.search(r"\bstate\s+(\S+)", rest)
            current = NetLink(
                name=name,
                state=state.group(1) if state else None,
                mtu=int(mtu.group(1)) if mtu else None,
                flags=[f for f in full.group("flags").split(",") if f],
            )
            result.links.append(current)
            continue
        kind = re.match(r"^\s+link/(\S+)", line)
        if kind and current is not None:
            current.kind = kind.group(1)
            continue
        brief = _IP_BRIEF.match(line.strip())
        if brief:
            flags = re.search(r"<([^>]*)>", brief.group("rest"))
            flag_list = [f for f in flags.group(1).split(",") if f] if flags else []
            kind_name = "loopback" if "LOOPBACK" in flag_list else None
            result.links.append(
                NetLink(
                    name=brief.group("name").split("@")[0],
                    state=brief.group("state"),
                    flags=flag_list,
                    kind=kind_name,
                )
            )
            current = None
    if not result.links and text.strip():
        result.problems.append("no 'N: name: <FLAGS> ...' or brief 'name STATE ...' line found")
    return result
