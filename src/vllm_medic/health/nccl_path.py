"""The real NCCL path, read from logs run with NCCL_DEBUG=INFO: one row per rank.

For each NCCL process/device seen in the logs: host, pid, CUDA device, global rank, NCCL version,
the network NCCL chose (IB, Socket, a plugin), the transports its channels use (P2P/IPC, P2P/CUMEM,
SHM, NVLS, NET/IB[/GDRDMA], NET/Socket), the interfaces (OOB/bootstrap, socket, HCAs) and whether
GPU Direct RDMA was enabled. Pure functions over text; ``nccl_findings`` judges the table.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from vllm_medic.model import Category, Finding, Severity

_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)(?:\+cuda(?P<cuda>[\d.]+))?")
_VLLM_NCCL = re.compile(r"vLLM is using nccl==(?P<v>\d+\.\d+\.\d+)")
_COMM_RANK = re.compile(r"\brank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<dev>\d+)", re.I)
_NNODES = re.compile(r"\bnRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+)")
_USING_NETWORK = re.compile(r"Using network (?P<net>.+?)\s*$")
_NET_IB = re.compile(r"NET/IB\s*: Using (?P<devs>.*?)(?:\s*;\s*OOB (?P<oob>\S+))?\s*$")
_NET_IB_NONE = re.compile(r"NET/IB\s*: No device found")
_NET_SOCKET = re.compile(r"NET/Socket\s*: Using (?P<ifs>.+?)\s*$")
_BOOTSTRAP = re.compile(r"Bootstrap\s*: Using (?P<ifs>.+?)\s*$")
_IFACE = re.compile(r"(?:\[\d+\])?(?P<name>[A-Za-z0-9_.\-]+):(?P<addr>[0-9A-Fa-f.:%]+)<\d+>")
_HCA = re.compile(r"\[\d+\](?P<dev>[A-Za-z0-9_]+):(?P<port>\d+)/(?P<kind>[A-Za-z]+)")
_PLUGIN = re.compile(r"(NET/Plugin\s*:?\s*(?P<a>.*)|P2P plugin (?P<b>\S+)|Plugin Path : (?P<c>\S+))")
_ENV_SET = re.compile(r"(?P<name>NCCL_[A-Z0-9_]+) set by environment to (?P<value>\S+?)\.?\s*$")
_GDR = re.compile(
    r"GPU Direct RDMA (?P<state>Enabled|Disabled) for (?:GPU \S+ / )?HCA (?P<idx>\d+) '?(?P<hca>[^'\s]*)'?(?P<why>.*)$"
)
_DMABUF = re.compile(r"DMA-BUF (?P<what>.*)$")
_CHANNEL = re.compile(
    r"Channel \d+(?:/\d+)? : (?P<src>\d+)\[[0-9a-fA-F]+\] -> (?P<dst>\d+)\[[0-9a-fA-F]+\](?: \[(?P<dir>send|receive)\])? via (?P<via>\S+)"
)
_NVLS = re.compile(r"(Connected NVLS|NVLS comm|nvlsSupport 1|NVLS multicast support is available)")

# Ray's log deduplication appends " [repeated 15x across cluster]" to worker lines
_RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")

RDMA_HCA_KINDS = {"IB", "RoCE"}
_VIRTUAL_IFACE = re.compile(
    r"^(lo|docker\d*|virbr\d*|veth\w*|cni\d*|flannel[\w.]*|cali\w+|br-\w+|tailscale\d*|wg\d*)$"
)


@dataclass
class RankRow:
    host: str
    pid: int
    device: int
    rank: int | None = None
    nranks: int | None = None
    nnodes: int | None = None
    nccl_version: str | None = None
    nccl_cuda: str | None = None
    network: str | None = None  # "IB", "Socket", "IBext_v8", "AWS Libfabric"
    hcas: list[str] = field(default_factory=list)  # "mlx5_0:1/IB"
    oob_iface: str | None = None  # "ib0:192.168.11.1"
    socket_ifaces: list[str] = field(default_factory=list)
    bootstrap_iface: str | None = None
    ib_absent: bool = False  # "NET/IB : No device found"
    plugin: list[str] = field(default_factory=list)
    transports: dict[str, int] = field(default_factory=dict)  # normalised transport -> channel lines
    gdr: dict[str, str] = field(default_factory=dict)  # hca -> "Enabled" | "Disabled (no module)"
    dmabuf: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    nvls: bool = False
    channel_ranks: dict[int, int] = field(default_factory=dict)  # rank implied by channel lines -> count
    source: str = ""  # file:line of the first line seen

    @property
    def key(self) -> str:
        return f"{self.host}:{self.pid}[{self.device}]"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["process"] = self.key  # not "key": JSON output redacts fields named like secrets
        d["gdr_rdma"] = gdr_summary(self)
        return d


def normalise_transport(via: str) -> str:
    """'NET/IB/0/GDRDMA' -> 'NET/IB/GDRDMA'; 'NET/IBext_v8/2' -> 'NET/IBext_v8'; 'P2P/IPC/read' -> 'P2P/IPC'."""
    parts = via.split("/")
    if parts[0] == "NET" and len(parts) >= 2:
        out = f"NET/{parts[1]}"
        if "GDRDMA" in parts[2:]:
            out += "/GDRDMA"
        return out
    if parts[0] == "P2P" and len(parts) >= 2:
        return f"P2P/{parts[1]}"
    return parts[0]


def gdr_summary(row: RankRow) -> str:
    if any(t.endswith("/GDRDMA") for t in row.transports):
        return "yes"
    if any(t.startswith("NET/IB") for t in row.transports):
        return "no"
    states = set(v.split()[0] for v in row.gdr.values())
    if "Enabled" in states:
        return "enabled"
    if "Disabled" in states:
        return "no"
    return "-"


def parse_nccl_logs(sources: list[tuple[str, str]]) -> dict[str, Any]:
    """(name, text) pairs -> {"ranks": [RankRow...], "unattributed_versions": [...], "vllm_nccl": [...]}."""
    rows: dict[tuple[str, int, int], RankRow] = {}
    pid_rank: dict[tuple[str, int, int], tuple[int, int]] = {}
    loose_versions: list[dict[str, str]] = []
    vllm_versions: list[dict[str, str]] = []
    for name, text in sources:
        last: RankRow | None = None
        for no, raw in enumerate(text.splitlines(), 1):
            hit = split_nccl_line(raw) if " NCCL " in raw else None
            if hit is None:
                if "NCCL version" in raw and (v := _VERSION.search(raw)):
                    if last is not None and last.nccl_version is None:
                        last.nccl_version, last.nccl_cuda = v.group("v"), v.group("cuda")
                    else:
                        loose_versions.append({"version": v.group("v"), "where": f"{name}:{no}"})
                if "vLLM is using nccl" in raw and (vv := _VLLM_NCCL.search(raw)):
                    vllm_versions.append({"version": vv.group("v"), "where": f"{name}:{no}"})
                continue
            key, msg = hit
            row = rows.get(key)
            if row is None:
                row = rows[key] = RankRow(host=key[0], pid=key[1], device=key[2], source=f"{name}:{no}")
            last = row
            _apply(row, msg, pid_rank)
    for key, (rank, nranks) in pid_rank.items():
        if key in rows:
            rows[key].rank, rows[key].nranks = rank, nranks
    for row in rows.values():
        if row.rank is None and row.channel_ranks:
            row.rank = max(row.channel_ranks, key=lambda k: row.channel_ranks[k])
    ordered = sorted(
        rows.values(), key=lambda r: (r.rank if r.rank is not None else 10**9, r.host, r.pid, r.device)
    )
    return {"ranks": ordered, "unattributed_versions": loose_versions, "vllm_nccl": vllm_versions}


def split_nccl_line(raw: str) -> tuple[tuple[str, int, int], str] | None:
    """'host:pid:tid [dev] NCCL INFO msg' (behind any wrapper prefix) -> ((host, pid, dev), msg).

    Plain string splits, not a regex search: this runs on every line of logs that can be millions long.
    """
    for level in (" NCCL INFO ", " NCCL WARN "):
        idx = raw.find(level)
        if idx > 0:
            break
    else:
        return None
    head, msg = raw[:idx], raw[idx + len(level) :]
    tokens = head.split()
    # "... host:pid:tid [dev]" or, on WARN lines, "... host:pid:tid [dev] misc/shmutils.cc:112"
    for i in range(len(tokens) - 1, 0, -1):
        dev = tokens[i]
        if len(dev) > 2 and dev[0] == "[" and dev[-1] == "]" and dev[1:-1].isdecimal():
            parts = tokens[i - 1].rsplit(":", 2)
            if len(parts) == 3 and parts[0] and parts[1].isdecimal() and parts[2].isdecimal():
                where = " ".join(tokens[i + 1 :])
                msg = _RAY_REPEATED.sub("", msg.rstrip())
                return (parts[0], int(parts[1]), int(dev[1:-1])), (f"{where} " if where else "") + msg
            return None
    return None


def _apply(row: RankRow, msg: str, pid_rank: dict[tuple[str, int, int], tuple[int, int]]) -> None:
    # Channel lines are most of an NCCL INFO log: test them first; every other regex sits behind a
    # cheap substring guard so a 100k-line log is not run through a dozen regexes per line.
    if " via " in msg and msg.startswith("Channel"):
        if ch := _CHANNEL.search(msg):
            t = normalise_transport(ch.group("via"))
            row.transports[t] = row.transports.get(t, 0) + 1
            # the sender prints plain and [send] lines, the receiver prints [receive] lines
            own = int(ch.group("dst") if ch.group("dir") == "receive" else ch.group("src"))
            row.channel_ranks[own] = row.channel_ranks.get(own, 0) + 1
        return
    if "NCCL version" in msg and (v := _VERSION.search(msg)):
        if row.nccl_version is None:
            row.nccl_version, row.nccl_cuda = v.group("v"), v.group("cuda")
        return
    if "cudaDev" in msg and (c := _COMM_RANK.search(msg)):
        pid_rank[(row.host, row.pid, int(c.group("dev")))] = (int(c.group("rank")), int(c.group("nranks")))
    if "nNodes" in msg and (n := _NNODES.search(msg)):
        row.nnodes = int(n.group("nnodes"))
    if "Using network" in msg and (u := _USING_NETWORK.search(msg)):
        row.network = u.group("net")
        return
    if "NET/IB" in msg:
        if _NET_IB_NONE.search(msg):
            row.ib_absent = True
            return
        if g := _GDR.search(msg):
            why = g.group("why").strip()
            row.gdr[g.group("hca") or f"HCA{g.group('idx')}"] = g.group("state") + (f" {why}" if why else "")
            return
        if ib := _NET_IB.search(msg):
            row.hcas = [
                f"{h.group('dev')}:{h.group('port')}/{h.group('kind')}"
                for h in _HCA.finditer(ib.group("devs"))
            ]
            if ib.group("oob"):
                i = _IFACE.search(ib.group("oob"))
                row.oob_iface = f"{i.group('name')}:{i.group('addr')}" if i else ib.group("oob")
            return
    if "NET/Socket" in msg and (s := _NET_SOCKET.search(msg)):
        row.socket_ifaces = [f"{i.group('name')}:{i.group('addr')}" for i in _IFACE.finditer(s.group("ifs"))]
        return
    if "Bootstrap" in msg and (b := _BOOTSTRAP.search(msg)):
        i = _IFACE.search(b.group("ifs"))
        row.bootstrap_iface = f"{i.group('name')}:{i.group('addr')}" if i else b.group("ifs")
        return
    if "GPU Direct RDMA" in msg and (g := _GDR.search(msg)):
        why = g.group("why").strip()
        row.gdr[g.group("hca") or f"HCA{g.group('idx')}"] = g.group("state") + (f" {why}" if why else "")
        return
    if "DMA-BUF" in msg and (d := _DMABUF.search(msg)):
        row.dmabuf.append(d.group("what")[:120])
        return
    if "set by environment" in msg and (e := _ENV_SET.search(msg)):
        row.env[e.group("name")] = e.group("value")
        return
    if "NVLS" in msg or "nvlsSupport" in msg:
        if _NVLS.search(msg):
            row.nvls = True
            if "Connected NVLS" in msg or "NVLS comm" in msg:
                row.transports["NVLS"] = row.transports.get("NVLS", 0) + 1
        return
    if "lugin" in msg and (p := _PLUGIN.search(msg)):
        text = (p.group("a") or p.group("b") or p.group("c") or "").strip()
        if text and text not in row.plugin:
            row.plugin.append(text[:120])


def read_logs(paths: list[Path]) -> list[tuple[str, str]]:
    """Read plain or .gz logs as text; a directory means every file under it."""
    from vllm_medic.safeio import MAX_FILE_BYTES, gunzip_capped, is_regular, read_bytes

    out: list[tuple[str, str]] = []
    for p in paths:
        files = sorted(x for x in p.rglob("*") if is_regular(x)) if p.is_dir() else [p]
        for f in files:
            data, _cut = read_bytes(f, MAX_FILE_BYTES, "log")
            if f.suffix == ".gz" or data[:2] == b"\x1f\x8b":
                data, _cut = gunzip_capped(data)
            out.append((str(f), data.decode("utf-8", "replace")))
    return out


def _inter_node_transports(row: RankRow) -> list[str]:
    return [t for t in row.transports if t.startswith("NET/")]


def _is_bad_iface(iface: str | None) -> str | None:
    """Why an interface NCCL picked is not one to carry traffic between nodes, or None."""
    if not iface:
        return None
    name, _, addr = iface.partition(":")
    if _VIRTUAL_IFACE.match(name):
        return f"{name} is a loopback/virtual/container interface"
    try:
        ip = ipaddress.ip_address(addr.split("%")[0])
    except ValueError:
        return None
    if ip.is_loopback:
        return f"{addr} is a loopback address"
    if ip.is_link_local:
        return f"{addr} is link-local (169.254/16 or fe80::) - not routable between nodes"
    return None


DOCS_NCCL_ENV = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
DOCS_NCCL_TROUBLE = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"


def nccl_findings(parsed: dict[str, Any], rdma_hint: list[str] | None = None) -> list[Finding]:
    """Judge the per-rank table. ``rdma_hint``: RDMA devices known from the host snapshot (ibdev2netdev...)."""
    rows: list[RankRow] = parsed["ranks"]
    if not rows:
        return [
            Finding(
                "HLT-NCCL000",
                Severity.INFO,
                Category.NCCL_NETWORK,
                "No NCCL INFO lines found: the NCCL path could not be read",
                ["no line of the form `host:pid:tid [dev] NCCL INFO ...` in the given logs"],
                [
                    "Re-run the launch with `NCCL_DEBUG=INFO` (and `NCCL_DEBUG_SUBSYS=INIT,NET`) and pass that log."
                ],
                [DOCS_NCCL_ENV],
            )
        ]
    versions = _versions_seen(parsed, rows)
    findings = [
        *_versions_differ(versions),
        *_sockets_between_nodes(rows, rdma_hint),
        *_rdma_without_gdr(rows),
        *_wrong_interface(rows),
    ]
    return findings or [_nothing_wrong(rows, versions)]


def _versions_seen(parsed: dict[str, Any], rows: list[RankRow]) -> dict[str, list[str]]:
    """``{NCCL version: ranks (or log places) that printed it}``."""
    versions: dict[str, list[str]] = {}
    for r in rows:
        if r.nccl_version:
            versions.setdefault(r.nccl_version, []).append(r.key)
    for v in parsed.get("unattributed_versions", []):
        versions.setdefault(v["version"], []).append(v["where"])
    return versions


def _versions_differ(versions: dict[str, list[str]]) -> list[Finding]:
    """HLT-NCCL001: every rank runs one NCCL version."""
    findings: list[Finding] = []
    if len(versions) > 1:
        findings.append(
            Finding(
                "HLT-NCCL001",
                Severity.FAIL,
                Category.NCCL_NETWORK,
                f"Ranks run different NCCL versions: {', '.join(sorted(versions))}",
                [
                    f"NCCL {v}: {', '.join(keys[:6])}{' …' if len(keys) > 6 else ''}"
                    for v, keys in sorted(versions.items())
                ],
                [
                    "Run every node from the same image digest (same torch / nvidia-nccl wheel); "
                    "check `python3 -c 'import torch; print(torch.cuda.nccl.version())'` on each node.",
                    "Unset LD_LIBRARY_PATH/LD_PRELOAD entries that pull a host libnccl into some containers.",
                ],
                [DOCS_NCCL_TROUBLE],
            )
        )
    return findings


def _sockets_between_nodes(rows: list[RankRow], rdma_hint: list[str] | None) -> list[Finding]:
    """HLT-NCCL002: traffic between nodes on TCP sockets, worse when RDMA devices exist."""
    findings: list[Finding] = []
    rdma_seen = sorted(
        {h for r in rows for h in r.hcas if h.split("/")[-1] in RDMA_HCA_KINDS} | set(rdma_hint or [])
    )
    socket_rows = [
        r
        for r in rows
        if any(t.startswith("NET/Socket") for t in r.transports)
        or (r.network == "Socket" and (r.nnodes or 1) > 1)
    ]
    if socket_rows:
        ev = [
            f"{r.key}: network {r.network or '?'}, transports {', '.join(sorted(r.transports)) or '-'}"
            + (f", sockets on {', '.join(r.socket_ifaces)}" if r.socket_ifaces else "")
            for r in socket_rows[:8]
        ]
        ib_missing = [r.key for r in socket_rows if r.ib_absent]
        if ib_missing:
            ev.append(f"`NET/IB : No device found` on {', '.join(ib_missing[:6])}")
        if rdma_seen:
            findings.append(
                Finding(
                    "HLT-NCCL002",
                    Severity.FAIL,
                    Category.NCCL_NETWORK,
                    "Traffic between nodes goes over TCP sockets although RDMA devices exist",
                    ev + [f"RDMA devices seen: {', '.join(rdma_seen[:8])}"],
                    [
                        "Make the HCAs visible where NCCL runs: pass `/dev/infiniband` (or `--device` each uverbs) "
                        "and `--cap-add IPC_LOCK`/`--ulimit memlock=-1` to the container; check NCCL_IB_DISABLE is not 1.",
                        "Set NCCL_IB_HCA to the RDMA rails (e.g. `mlx5`) and re-run with NCCL_DEBUG=INFO: expect "
                        "`Using network IB` and channels `via NET/IB/<n>/GDRDMA`.",
                    ],
                    [DOCS_NCCL_ENV],
                )
            )
        else:
            findings.append(
                Finding(
                    "HLT-NCCL002",
                    Severity.WARN,
                    Category.NCCL_NETWORK,
                    "Traffic between nodes goes over TCP sockets (no RDMA device found by NCCL)",
                    ev,
                    [
                        "If the nodes have InfiniBand/RoCE NICs, NCCL cannot see them: check `ibv_devinfo` inside the "
                        "container and mount `/dev/infiniband`; sockets are far too slow for multi-node TP/EP.",
                    ],
                    [DOCS_NCCL_ENV],
                )
            )
    return findings


def _rdma_without_gdr(rows: list[RankRow]) -> list[Finding]:
    """HLT-NCCL003: RDMA used without GPU Direct RDMA (staged through host memory)."""
    findings: list[Finding] = []
    no_gdr = [
        r
        for r in rows
        if any(t.startswith("NET/IB") and not t.endswith("/GDRDMA") for t in r.transports)
        or any(s.startswith("Disabled") for s in r.gdr.values())
    ]
    if no_gdr:
        ev = []
        for r in no_gdr[:8]:
            parts = [f"{t} x{n}" for t, n in sorted(r.transports.items()) if t.startswith("NET/")]
            dis = [f"{h}: {s}" for h, s in r.gdr.items() if s.startswith("Disabled")]
            ev.append(f"{r.key}: {', '.join(parts + dis)}")
        findings.append(
            Finding(
                "HLT-NCCL003",
                Severity.WARN,
                Category.NCCL_NETWORK,
                "RDMA is used without GPU Direct RDMA: data is staged through host memory",
                ev,
                [
                    "Load `nvidia_peermem` on every node (`modprobe nvidia_peermem`; `lsmod | grep nvidia_peermem`), "
                    "or use DMA-BUF (open kernel modules, kernel >= 5.12, NCCL >= 2.13, NCCL_DMABUF_ENABLE=1).",
                    "Re-run with NCCL_DEBUG=INFO: channels should read `via NET/IB/<n>/GDRDMA`.",
                ],
                [DOCS_NCCL_TROUBLE],
            )
        )
    return findings


def _wrong_interface(rows: list[RankRow]) -> list[Finding]:
    """HLT-NCCL004: an OOB/bootstrap/socket interface that cannot carry traffic between nodes."""
    findings: list[Finding] = []
    bad = []
    for r in rows:
        for label, iface in (("OOB", r.oob_iface), ("bootstrap", r.bootstrap_iface)) + tuple(
            ("socket", i) for i in r.socket_ifaces
        ):
            why = _is_bad_iface(iface)
            if why:
                bad.append(f"{r.key}: {label} interface {iface} - {why}")
    if bad and (
        len({r.host for r in rows}) > 1
        or any((r.nnodes or 1) > 1 for r in rows)
        or any(_inter_node_transports(r) for r in rows)
    ):
        findings.append(
            Finding(
                "HLT-NCCL004",
                Severity.WARN,
                Category.NCCL_NETWORK,
                "NCCL picked an interface that is not the cluster (RDMA) network",
                sorted(set(bad))[:10],
                [
                    "Pin the interface on every node: NCCL_SOCKET_IFNAME=<rdma/cluster iface> and "
                    "GLOO_SOCKET_IFNAME=<same> (the recipe's $IFACE_NAME); make VLLM_HOST_IP an address on it.",
                ],
                [DOCS_NCCL_ENV],
            )
        )
    return findings


def _nothing_wrong(rows: list[RankRow], versions: dict[str, list[str]]) -> Finding:
    """HLT-NCCL000 when no other NCCL finding spoke: the path looks right, or its channels were not logged."""
    if not any(r.transports for r in rows):
        return Finding(
            "HLT-NCCL000",
            Severity.INFO,
            Category.NCCL_NETWORK,
            "NCCL init seen but no channel lines: the transports actually used are not in the log",
            [
                f"{len(rows)} rank(s); NCCL {', '.join(sorted(versions)) or 'version not logged'}; networks "
                + ", ".join(sorted({r.network for r in rows if r.network}) or ["not logged"])
            ],
            [
                "Capture the log with `NCCL_DEBUG=INFO` from process start through the first collective "
                "(`Channel xx : a -> b via ...` lines appear when communicators connect)."
            ],
            [DOCS_NCCL_ENV],
        )
    return Finding(
        "HLT-NCCL000",
        Severity.PASS,
        Category.NCCL_NETWORK,
        "NCCL path looks right",
        [
            f"{len(rows)} rank(s); NCCL {', '.join(sorted(versions)) or 'version not logged'}; transports "
            + ", ".join(sorted({t for r in rows for t in r.transports}) or ["-"])
        ],
    )


def table_rows(rows: list[RankRow]) -> list[dict[str, str]]:
    """The per-rank communication table as strings, for terminal and JSON."""
    out = []
    for r in rows:
        out.append(
            {
                "rank": "?" if r.rank is None else str(r.rank),
                "host": r.host,
                "pid": str(r.pid),
                "dev": str(r.device),
                "nccl": r.nccl_version or "-",
                "network": r.network or ("Socket (no IB device)" if r.ib_absent else "-"),
                "transports": ", ".join(f"{t}" for t in sorted(r.transports))
                or ("- (NVLS multicast available)" if r.nvls else "-"),
                "interfaces": ", ".join(
                    x
                    for x in [
                        f"NCCL_SOCKET_IFNAME={r.env['NCCL_SOCKET_IFNAME']}"
                        if "NCCL_SOCKET_IFNAME" in r.env
                        else "",
                        f"OOB {r.oob_iface}" if r.oob_iface else "",
                        f"bootstrap {r.bootstrap_iface}" if r.bootstrap_iface else "",
                        ("socket " + " ".join(r.socket_ifaces)) if r.socket_ifaces else "",
                        ("HCA " + " ".join(r.hcas)) if r.hcas else "",
                    ]
                    if x
                )
                or "-",
                "gdr": gdr_summary(r),
            }
        )
    return out
