"""nccl_network: the node's topology judged, not only parsed - NVLink between every GPU pair of an NVLink
board (NET009), and a NIC on each GPU's own PCIe switch for multi-node traffic (NET010).

What a board should look like (GPU count, NVLink wiring, NIC placement) is data: checks/data/hardware.yaml.
"""

from __future__ import annotations

import re

from vllm_medic.checks.facts import Facts
from vllm_medic.checks.hardware import LOCAL_NIC, NON_NVLINK, is_nvlink
from vllm_medic.checks.registry import Rule, rule
from vllm_medic.model import Finding
from vllm_medic.recipes.model import Recipe

NCCL_ENV_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
FM_DOCS = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html"
XID_DOCS = "https://docs.nvidia.com/deploy/xid-errors/index.html"
TOPO = "nvidia-smi-topo-m"
TOPO_SOURCES = (TOPO, "vllm-collect-env")  # collect-env prints the same matrix
# nvidia-smi topo -m link kinds, nearest first (the legend's order)
_RANK = {"X": 0, "PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5}


def _gpus(facts: Facts) -> list[str]:
    return [d for d in facts.snapshot.topology.devices if re.fullmatch(r"GPU\d+", d)]


def _nics(facts: Facts) -> list[str]:
    topo = facts.snapshot.topology
    return [d for d in topo.devices if not d.startswith("GPU")]


def _link(facts: Facts, a: str, b: str) -> str | None:
    m = facts.snapshot.topology.matrix
    return (m.get(a) or {}).get(b) or (m.get(b) or {}).get(a)


def _topo_file(facts: Facts) -> str:
    """The file the matrix was read from: `nvidia-smi topo -m`, or the copy inside `vllm collect-env`."""
    for source in TOPO_SOURCES:
        if facts.captured(source):
            return facts._file_of(source)
    return facts._file_of(TOPO)


def _row_line(facts: Facts, device: str) -> str:
    """``file:line`` of the device's row in the captured matrix (the first line that starts with it)."""
    for source in TOPO_SOURCES:
        for loc, line in facts.find_all(
            source, rf"^\s*{re.escape(device)}\s+(X|NV\d+|SYS|NODE|PHB|PXB|PIX)\b"
        ):
            return f"{loc} {' '.join(line.split())[:160]}"
    return f"{_topo_file(facts)}: row {device}"


def _topology_unread(facts: Facts) -> str | None:
    return facts.unread(TOPO, bool(facts.snapshot.topology.devices))


@rule(
    "NET009",
    "nccl_network",
    "Every GPU pair of an NVLink board talks over NVLink",
    "On HGX/DGX and NVL boards every GPU pair is NVLink-connected (NVSwitch, or direct links on 4-GPU boards); "
    "`nvidia-smi topo -m` showing SYS/NODE/PHB between two of them means a link is down, and NCCL silently "
    "routes that pair over PCIe and the CPU at a fraction of the bandwidth (or hangs).",
    [
        "Read the links of the GPUs named: `nvidia-smi nvlink -s -i N` (each link's speed; inactive links show "
        "no speed) and `nvidia-smi nvlink -e -i N` (error counters).",
        "On NVSwitch boards check the fabric: `systemctl status nvidia-fabricmanager` (HLT-FAB) and "
        "`nvidia-smi -q | grep -A 3 Fabric`.",
        "Look for NVLink faults: `sudo dmesg -T | grep -i xid` (Xid 74 NVLink error; 144-150 NVLink 5).",
        "Drain the node, reset the GPUs (`sudo nvidia-smi -r`) or reboot; if a link stays down, the GPU or "
        "baseboard needs service (RMA).",
    ],
    [FM_DOCS, XID_DOCS],
    by_hand="`nvidia-smi topo -m` (the whole matrix) and `nvidia-smi -L`",
)
def nvlink_pairs(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    names = facts.gpu_names
    board = facts.board()
    if not names:
        return [
            r.not_checked(
                "NVLink wiring not checked: the GPU model is unknown",
                [facts.unread("nvidia-smi") or "no GPU names"],
            )
        ]
    if board is None:
        return [
            r.not_checked(
                f"NVLink wiring not judged: {names[0]} is not in the tool's board data",
                [
                    f"{facts.gpus_where(names[0])} {names[0]}",
                    "checks/data/hardware.yaml has no entry for it",
                ],
                ["Read `nvidia-smi topo -m` by hand: GPU pairs meant to be NVLink-connected show NV<n>."],
            )
        ]
    if not board.nvlink_all_pairs:
        return [
            r.not_applicable(
                f"{board.board}: not every GPU pair is NVLink by design", [f"{names[0]} ({board.source})"]
            )
        ]
    gpus = _gpus(facts)
    unread = _topology_unread(facts)
    if not gpus:
        return [
            r.not_checked("NVLink wiring not checked: no GPU topology", [unread or "no GPU rows in topo -m"])
        ]
    bad: list[tuple[str, str, str]] = []
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            link = _link(facts, a, b)
            if link in NON_NVLINK:
                bad.append((a, b, link or ""))
    board_ev = f"{board.board}: every GPU pair NVLink-connected ({board.source})"
    if bad:
        down_rows = [
            g for g in gpus if all(_link(facts, g, o) in NON_NVLINK for o in gpus if o != g) and len(gpus) > 1
        ]
        pairs = ", ".join(f"{a}-{b} {link}" for a, b, link in bad[:12]) + (" ..." if len(bad) > 12 else "")
        ev = [_row_line(facts, g) for g in (down_rows or sorted({a for a, _, _ in bad}))[:4]]
        ev += [f"not NVLink: {pairs}", board_ev]
        if down_rows:
            title = (
                f"NVLink down on {', '.join(down_rows)}: "
                f"{'its row is' if len(down_rows) == 1 else 'their rows are'} all PCIe/CPU links on an NVLink board"
            )
        else:
            title = f"{len(bad)} GPU pair(s) on an NVLink board are not NVLink-connected: {pairs}"
        fix = [step.replace("-i N", f"-i {(down_rows or [bad[0][0]])[0][3:]}") for step in r.fix]
        return [r.finding("fail", title, ev, fix)]
    if unread is not None:
        return [
            r.not_checked(
                f"NVLink seen between the {len(gpus)} GPU rows listed, but the matrix is not whole", [unread]
            )
        ]
    kinds = sorted({_link(facts, a, b) or "?" for i, a in enumerate(gpus) for b in gpus[i + 1 :]})
    if not all(is_nvlink(k) for k in kinds):
        return [
            r.not_checked("NVLink wiring not checked: some GPU pairs have no link value", [f"links: {kinds}"])
        ]
    n_pairs = len(gpus) * (len(gpus) - 1) // 2
    return [
        r.finding(
            "pass",
            f"All {n_pairs} GPU pairs NVLink-connected ({', '.join(kinds)})",
            [
                _row_line(facts, gpus[0]),
                f"{_topo_file(facts)}: {len(gpus)} GPUs, every pair {', '.join(kinds)}",
                board_ev,
            ],
        )
    ]


def _nearest_nic(facts: Facts, gpu: str, nics: list[str]) -> tuple[str | None, str | None]:
    best: tuple[int, str, str] | None = None
    for nic in nics:
        link = _link(facts, gpu, nic)
        if link in _RANK and (best is None or _RANK[link] < best[0]):
            best = (_RANK[link], nic, link)
    return (best[1], best[2]) if best else (None, None)


@rule(
    "NET010",
    "nccl_network",
    "Each GPU has a NIC on its own PCIe switch (multi-node)",
    "NCCL sends each GPU's cross-node traffic through the nearest RDMA NIC (the GPU's rail). A GPU whose nearest "
    "NIC is across the CPU (PHB/NODE/SYS) shares another GPU's NIC or crosses the CPU interconnect, and "
    "GPUDirect RDMA between them is slow or off.",
    [
        "Map each GPU to the NIC behind its own PCIe switch (PIX/PXB in `nvidia-smi topo -m`) and list exactly "
        "those HCAs in NCCL_IB_HCA (e.g. `NCCL_IB_HCA==mlx5_0,mlx5_1,...`).",
        "If a rail's NIC is missing or down, fix it (NET005/NET006) before launching across nodes.",
        "On a server built with fewer NICs than GPUs this is by design: expect lower cross-node bandwidth.",
    ],
    [NCCL_ENV_DOCS],
    by_hand="`nvidia-smi topo -m` (the whole matrix, with its NIC legend)",
)
def gpu_nic_affinity(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    from vllm_medic.checks.rules_network import _multi_node

    multi, multi_ev = _multi_node(facts)
    one_node = r.not_applicable("One node: GPU-to-NIC placement carries no NCCL traffic", [multi_ev])
    board = facts.board()
    if board is not None and not board.local_nic:
        return [
            r.not_applicable(
                f"{board.board}: GPU-to-NIC traffic does not run over a shared PCIe switch (topo shows SYS by "
                "design)",
                [board.source],
            )
        ]
    gpus, nics = _gpus(facts), _nics(facts)
    unread = _topology_unread(facts)
    if not gpus:
        return [r.not_checked("GPU-to-NIC placement not checked: no GPU topology", [unread or "no GPU rows"])]
    legend = facts.snapshot.topology.nic_legend
    if not nics:
        if unread is not None:
            return [r.not_checked("GPU-to-NIC placement not checked: no NIC in a partial matrix", [unread])]
        ev = [f"{_topo_file(facts)}: {len(gpus)} GPUs and no NIC column", multi_ev]
        if multi is False:
            return [one_node]
        if multi:
            return [r.finding("warn", "No RDMA NIC in the topology of a multi-node launch", ev)]
        return [r.not_checked("No NIC in the topology; whether the launch spans nodes is unknown", ev)]
    far: list[str] = []
    near: list[str] = []
    for g in gpus:
        nic, link = _nearest_nic(facts, g, nics)
        label = f"{nic} ({legend[nic]})" if nic in legend else str(nic)
        line = f"{g}: nearest NIC {label} via {link}"
        (near if link in LOCAL_NIC else far).append(line)
    if far:
        ev = [*far[:8], f"{len(near)} of {len(gpus)} GPUs have a local NIC", multi_ev]
        title = f"{len(far)} of {len(gpus)} GPUs have no NIC on their own PCIe switch"
        if multi is False:
            return [one_node]
        if multi:
            return [r.finding("warn", title, ev)]
        return [r.not_checked(title + ": matters only if the launch spans nodes, which it does not say", ev)]
    if unread is not None:
        return [
            r.not_checked(
                f"The {len(gpus)} GPU rows listed each have a local NIC; the matrix is not whole", [unread]
            )
        ]
    return [
        r.finding(
            "pass",
            f"Each of the {len(gpus)} GPUs has a NIC on its own PCIe switch",
            [*near[:8], f"{_topo_file(facts)}: {len(nics)} NICs"],
        )
    ]
