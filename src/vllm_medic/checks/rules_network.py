"""nccl_network: the MoE all-to-all and NCCL/UCX settings match the interconnect, and RDMA is healthy."""

from __future__ import annotations

from vllm_medic.checks.facts import Facts
from vllm_medic.checks.hardware import DmabufNeeds, gpudirect_needs
from vllm_medic.checks.launch_topology import choose_strategy, launch_topology
from vllm_medic.checks.registry import Rule, rule
from vllm_medic.collect.parsers.residue import grep_shows
from vllm_medic.model import Finding
from vllm_medic.recipes.model import Recipe
from vllm_medic.recipes.versions import parse_version, version_lt
from vllm_medic.snapshot import IbPort, RdmaPort

EP_DOCS = "https://docs.vllm.ai/en/latest/serving/expert_parallel_deployment.html"
NCCL_ENV_DOCS = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
NVLINK_ONLY_A2A = ("flashinfer_nvlink_one_sided", "flashinfer_nvlink_two_sided", "flashinfer_all2allv")


def _multi_node(facts: Facts) -> tuple[bool | None, str]:
    nodes, ev = facts.nnodes()
    if nodes is None:
        return None, ev
    return nodes > 1, ev


@rule(
    "NET001",
    "nccl_network",
    "All-to-all backend matches the cross-node interconnect",
    "Expert-parallel MoE exchanges tokens all-to-all; an NVLink-only backend across RDMA-linked nodes fails "
    "or falls back, and the wrong one for the fabric costs throughput.",
    [
        "Over RDMA (InfiniBand/RoCE): --all2all-backend deepep_v2.",
        "Over multi-node NVLink (GB200/GB300 NVL): --all2all-backend flashinfer_nvlink_one_sided.",
    ],
    [EP_DOCS],
    by_hand="`ibdev2netdev` and `nvidia-smi topo -m` vs --all2all-backend",
)
def all2all_vs_interconnect(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    if not facts.launch_known:
        return [
            r.not_checked(
                "Launch not known: all-to-all backend not checked",
                [facts.unread("launch") or "no launch"],
                ["Pass --launch."],
            )
        ]
    ep = bool(facts.arg("enable_expert_parallel"))
    backend = facts.arg("all2all_backend")
    multi, multi_ev = _multi_node(facts)
    ic, ic_ev = facts.cross_node_interconnect()
    topo = launch_topology(facts)
    spans, spans_ev = topo.ep_spans_nodes() if topo is not None else (None, "no launch")
    ev = [
        f"{facts.launch_where('--all2all-backend')}: --all2all-backend {backend or '(default allgather_reducescatter)'}",
        f"expert parallel: {ep}",
        multi_ev,
        spans_ev,
        ic_ev,
    ]
    # the expert all-to-all crosses nodes only when the EP group does (TP8 x PP2 + EP keeps it in a node)
    if not ep or multi is False or spans is False:
        return [
            r.finding(
                "pass", "Expert all-to-all does not cross nodes (no EP, or the EP group fits a node)", ev
            )
        ]
    if ic is None:
        return [
            r.not_checked(
                "All-to-all backend not checked: the cross-node interconnect is unknown",
                ev,
                ["Bundle ibdev2netdev and nvidia-smi topo -m."],
            )
        ]
    if ic == "rdma" and isinstance(backend, str) and backend in NVLINK_ONLY_A2A:
        return [r.finding("fail", f"{backend} is NVLink-only; these nodes talk over RDMA", ev)]
    want = (recipe.network.all2all or {}).get(ic)
    if want:
        ev.append(f"recipe: {ic} -> {want} ({recipe.network.all2all_source})")
        if backend != want:
            return [
                r.finding(
                    "warn",
                    f"--all2all-backend {backend or 'default'} over {ic}; the recipe uses {want}",
                    ev,
                    [f"Set --all2all-backend {want}."],
                )
            ]
    return [r.finding("pass", f"All-to-all backend {backend or 'default'} fits {ic}", ev)]


@rule(
    "NET002",
    "nccl_network",
    "deep_gemm_mega_moe used where it works",
    "deep_gemm_mega_moe is a --moe-backend (not an --all2all-backend value) and is not compatible with "
    "cross-node RDMA: it is for DEP over multi-node NVLink (GB200/GB300).",
    [
        "Pass it as --moe-backend deep_gemm_mega_moe, never as --all2all-backend.",
        "On RDMA-linked nodes drop it (leave --moe-backend unset) and use --all2all-backend deepep_v2.",
    ],
    [EP_DOCS],
    by_hand="grep the command line for deep_gemm_mega_moe and check the nodes' fabric (`ibdev2netdev`)",
)
def mega_moe_placement(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    a2a, moe = facts.arg("all2all_backend"), facts.arg("moe_backend")
    nvl = recipe.network.nvlink_only_moe_backends
    nvlink_only = list(nvl.value) if nvl else ["deep_gemm_mega_moe"]
    src = nvl.source if nvl else ""
    if not facts.launch_known:
        return [
            r.not_checked(
                "Launch not known: MoE backend placement not checked",
                [facts.unread("launch") or "no launch"],
                ["Pass --launch."],
            )
        ]
    if a2a in nvlink_only:
        return [
            r.finding(
                "fail",
                f"{a2a} given as --all2all-backend: it is a --moe-backend value",
                [f"--all2all-backend {a2a}", f"source: {src}"],
            )
        ]
    if moe in nvlink_only:
        multi, multi_ev = _multi_node(facts)
        ic, ic_ev = facts.cross_node_interconnect()
        ev = [
            f"{facts.launch_where('--moe-backend')}: --moe-backend {moe}",
            multi_ev,
            ic_ev,
            f"source: {src}",
        ]
        if multi and ic == "rdma":
            return [r.finding("fail", f"--moe-backend {moe} across RDMA-linked nodes", ev)]
        if multi is None or (multi and ic is None):
            return [r.not_checked(f"--moe-backend {moe} not checked: the cross-node fabric is unknown", ev)]
        return [r.finding("pass", f"--moe-backend {moe} on {ic if multi else 'one node'}", ev)]
    return [
        r.finding("pass", "No NVLink-only MoE backend in the launch", [f"--moe-backend {moe or 'unset'}"])
    ]


def _rdma_in_use(facts: Facts) -> tuple[bool | None, list[str]]:
    """True / False, or None when the evidence cannot tell (launch or RDMA devices not read)."""
    ic, ic_ev = facts.cross_node_interconnect()
    multi, multi_ev = _multi_node(facts)
    kvt = str(facts.arg("kv_transfer_config") or "")
    nixl = "Nixl" in kvt or "nixl" in kvt
    ev = [ic_ev, multi_ev] + (["kv-transfer via NIXL"] if nixl else [])
    crossing = True if nixl else multi
    if ic == "rdma" and crossing:
        return True, ev
    if crossing is False or ic == "nvlink":
        return False, ev
    if ic is None:
        why = facts.rdma_absence_unproven()
        if why is not None:
            return None, [*ev, why]
        return (False if crossing is not None else None), ev
    return None, ev  # RDMA devices present, launch does not say whether it crosses nodes


@rule(
    "NET003",
    "nccl_network",
    "UCX_TLS routes transfers over RDMA",
    "With RDMA, UCX must be allowed the rc transport and cuda_copy, or KV-cache transfer (NIXL) silently "
    "goes over TCP.",
    ['Set UCX_TLS="rc,cuda_copy" in the server environment on every node.'],
    ["https://openucx.readthedocs.io/en/master/faq.html"],
    by_hand="`echo $UCX_TLS` in the server's environment",
)
def ucx_tls(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    want = recipe.network.rdma_env.get("UCX_TLS")
    in_use, ev = _rdma_in_use(facts)
    if want is None:
        return [
            r.not_applicable(
                f"Recipe {recipe.name} sets no UCX_TLS requirement",
                [f"recipe {recipe.name}: no network.rdma_env"],
            )
        ]
    scope = recipe.network.rdma_env_strategies.get("UCX_TLS")
    if scope and facts.launch_known:
        choice = choose_strategy(facts, recipe)
        if choice.name not in scope:
            return [
                r.not_applicable(
                    f"UCX_TLS not needed: the recipe sets it for {', '.join(scope)} only (KV-cache transfer)",
                    [choice.evidence(), f"recipe: UCX_TLS={want.value} ({want.source})"],
                )
            ]
    if in_use is None:
        return [r.not_checked("UCX_TLS not checked: whether transfers cross RDMA is unknown", ev)]
    if not in_use:
        return [r.finding("pass", "RDMA transfers not in use here: UCX_TLS not needed", ev)]
    val, where = facts.env("UCX_TLS")
    ev += [where, f"recipe: UCX_TLS={want.value} ({want.source})"]
    if val is None:
        return [r.finding("warn", "UCX_TLS is not set on an RDMA deployment", ev)]
    toks = [t.strip() for t in val.split(",")]
    has_rc = any(t == "rc" or t.startswith("rc_") for t in toks) or "all" in toks
    has_cuda = any(t in ("cuda_copy", "cuda") for t in toks) or "all" in toks
    if val.startswith("^") or not (has_rc and has_cuda):
        return [r.finding("warn", f"UCX_TLS={val} lacks rc and/or cuda_copy", ev)]
    return [r.finding("pass", f"UCX_TLS={val} includes rc and cuda_copy", ev)]


def _modules(facts: Facts, *wanted: str) -> tuple[set[str], str | None]:
    """The loaded modules listed, and why absence of ``wanted`` cannot be read from them (missing,
    partial, not captured). A grepped listing proves absence only of what its grep would have shown:
    `lsmod | grep nvidia` for nvidia_peermem, never for mlx5_ib."""
    mods = set(facts.snapshot.kernel_modules)
    unread = facts.unread("lsmod", bool(mods))
    commands = _lsmod_commands(facts)
    only_grep = unread is not None and facts.missing("lsmod") is None and len(commands) == 1
    if only_grep and wanted and all(grep_shows(commands[0], m) for m in wanted):
        return mods, None
    return mods, unread


def _lsmod_commands(facts: Facts) -> list[str]:
    grep = facts.snapshot.lsmod_grep
    return grep.commands if grep else []


def _absence_line(facts: Facts, module: str, listed: int) -> str:
    commands = _lsmod_commands(facts)
    through = f" (`{commands[0]}` would have listed it)" if commands else ""
    return f"{facts._file_of('lsmod')}: no {module} among {listed} modules{through}"


def _module_line(facts: Facts, module: str) -> str:
    hit = facts.find("lsmod", module)
    return f"{hit[0]} {hit[1]}" if hit else f"lsmod: {module} loaded"


def _kernel_facts(facts: Facts, needs: DmabufNeeds) -> tuple[bool | None, list[str]]:
    """Does this host meet dma-buf's needs (kernel, open kernel modules)? None when a fact is missing."""
    ev: list[str] = []
    ok: bool | None = True
    kernel = facts.snapshot.host.kernel
    if kernel and parse_version(kernel):
        good = not version_lt(kernel, needs.min_kernel)
        ev.append(
            f"{facts.where('uname', kernel)} kernel {kernel} ({'>=' if good else '<'} {needs.min_kernel})"
        )
        ok = ok and good
    else:
        ev.append(f"kernel version unknown ({facts.unread('uname') or 'no uname -r'})")
        ok = None
    open_module = facts.snapshot.driver.open_kernel_module
    if needs.needs_open_kernel_modules:
        if open_module is None:
            ev.append(
                "kernel module flavour unknown "
                f"({facts.unread('proc-driver-nvidia-version') or 'no /proc/driver/nvidia/version'})"
            )
            ok = None if ok is not False else False
        else:
            hit = facts.find("proc-driver-nvidia-version", "Kernel Module")
            ev.append(
                f"{hit[0] + ' ' if hit else ''}{'open' if open_module else 'proprietary'} NVIDIA kernel modules"
                + ("" if open_module else " (dma-buf needs the open ones)")
            )
            if not open_module:
                ok = False
    if facts.snapshot.driver.version:
        ev.append(f"driver {facts.snapshot.driver.version}")
    return ok, ev


@rule(
    "NET004",
    "nccl_network",
    "GPUDirect RDMA has a registration path: dma-buf, or nvidia_peermem",
    "NCCL registers GPU memory with the NIC through the kernel's dma-buf (default) or the legacy "
    "nvidia_peermem module. NCCL_DMABUF_ENABLE=0 (the fix for mlx5dv_reg_dmabuf_mr errno 524) leaves only "
    "nvidia_peermem; dma-buf needs a recent kernel and the open GPU kernel modules. With neither, GPUDirect "
    "RDMA is gone and every cross-node transfer is staged through host memory.",
    [
        "Load it on every node: `sudo modprobe nvidia_peermem` (persist in /etc/modules-load.d/).",
        "Or, if the kernel and mlx5 driver support dmabuf, unset NCCL_DMABUF_ENABLE.",
    ],
    [
        NCCL_ENV_DOCS,
        "https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-operator-rdma.html",
    ],
    by_hand="`lsmod` (the whole list, not a grep) on every node, with `uname -r` and `cat /proc/driver/nvidia/version`",
)
def dmabuf_needs_peermem(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    fb = recipe.network.dmabuf_fallback or {
        "env": "NCCL_DMABUF_ENABLE",
        "value": "0",
        "requires_module": "nvidia_peermem",
        "source": "",
    }
    needs = gpudirect_needs()
    val, where = facts.env(fb["env"])
    mods, unread = _modules(facts, fb["requires_module"])
    peer = [m for m in (fb["requires_module"], *needs.peermem_modules) if m in mods]
    if val == fb["value"]:
        return [_dmabuf_off_needs_peermem(facts, r, fb, val, where, peer, mods, unread)]
    env_known = facts.launch_known or facts.captured("env") or bool(facts.snapshot.env)
    dmabuf_ev = where if env_known else f"{fb['env']}: {facts.unread('launch') or 'launch not known'}"
    if peer:
        return [
            r.finding(
                "pass",
                f"{peer[0]} loaded: GPUDirect RDMA has the peermem path",
                [_module_line(facts, peer[0]), dmabuf_ev],
            )
        ]
    devs = facts.rdma_devices()
    if not devs and "mlx5_ib" not in mods:
        return [_no_rdma_here(facts, r, mods, unread)]
    ev = [
        (_module_line(facts, "mlx5_ib") if "mlx5_ib" in mods else facts.rdma_devices_where(devs)),
        dmabuf_ev,
    ]
    if unread is not None:
        return [r.not_checked("RDMA host: whether nvidia_peermem is loaded was not checked", ev + [unread])]
    return [_rdma_host_without_peermem(facts, r, needs, mods, ev)]


def _dmabuf_off_needs_peermem(
    facts: Facts,
    r: Rule,
    fb: dict[str, str],
    val: str,
    where: str,
    peer: list[str],
    mods: set[str],
    unread: str | None,
) -> Finding:
    """NCCL_DMABUF_ENABLE=0 sends GPUDirect RDMA through nvidia_peermem: is it loaded?"""
    ev = [where, f"source: {fb['source']}"]
    if peer:
        return r.finding(
            "pass", f"{peer[0]} loaded for {fb['env']}={val}", ev + [_module_line(facts, peer[0])]
        )
    if unread is not None:
        return r.not_checked(
            f"{fb['env']}={val}: whether {fb['requires_module']} is loaded was not checked", ev + [unread]
        )
    return r.finding(
        "fail",
        f"{fb['env']}={val} without {fb['requires_module']} loaded",
        ev + [_absence_line(facts, fb["requires_module"], len(mods))],
    )


def _no_rdma_here(facts: Facts, r: Rule, mods: set[str], unread: str | None) -> Finding:
    """No RDMA device and no mlx5_ib: not applicable, unless the absence itself is unproven."""
    absence = "; ".join(w for w in (unread, facts.rdma_absence_unproven()) if w)
    if absence:
        return r.not_checked(
            "GPUDirect RDMA path not checked: whether this host has RDMA is unknown", [absence]
        )
    return r.not_applicable(
        "No RDMA device and no mlx5_ib: GPUDirect RDMA not in play here",
        [
            f"{facts._file_of('lsmod')}: {len(mods)} modules, no mlx5_ib",
            "ibdev2netdev/topology list no RDMA device",
        ],
    )


def _rdma_host_without_peermem(
    facts: Facts, r: Rule, needs: DmabufNeeds, mods: set[str], ev: list[str]
) -> Finding:
    """An RDMA host with no nvidia_peermem: GPUDirect RDMA rests on dma-buf, if the kernel allows it."""
    ev.append(f"{facts._file_of('lsmod')}: no {' / '.join(needs.peermem_modules)} among {len(mods)} modules")
    rdma_mods = sorted(m for m in mods if m in ("mlx5_ib", "ib_core", "mlx5_core"))
    if rdma_mods:
        ev.append(f"RDMA modules loaded: {', '.join(rdma_mods)}")
    ok, kernel_ev = _kernel_facts(facts, needs)
    ev += kernel_ev + [
        f"dma-buf needs kernel >= {needs.min_kernel} and the open GPU kernel modules ({needs.source})"
    ]
    multi, multi_ev = _multi_node(facts)
    if ok is False:
        return r.finding(
            "fail" if multi else "warn",
            "No GPUDirect RDMA path: nvidia_peermem is not loaded and this host cannot use dma-buf",
            ev + [multi_ev],
            [
                "Load the module on every node: `sudo modprobe nvidia_peermem` (persist it in "
                "/etc/modules-load.d/), then set NCCL_DMABUF_ENABLE=0 so NCCL uses it.",
                f"Or give dma-buf what it needs: kernel >= {needs.min_kernel} and the open kernel modules "
                "(DRV007), then re-run.",
            ],
        )
    if ok is None:
        return r.finding(
            "warn",
            "RDMA host without nvidia_peermem: GPUDirect RDMA depends on dma-buf, whose needs were not captured",
            ev,
            [
                "Capture `uname -r` and `cat /proc/driver/nvidia/version`: dma-buf needs kernel >= "
                f"{needs.min_kernel} and the open GPU kernel modules.",
                "Or load `nvidia_peermem` on every node (`sudo modprobe nvidia_peermem`).",
            ],
        )
    return r.finding(
        "info",
        "GPUDirect RDMA relies on dma-buf (nvidia_peermem not loaded): kernel and kernel modules allow it",
        ev,
        [
            "If NCCL logs `ibv_reg_dmabuf_mr` / `mlx5dv_reg_dmabuf_mr` errno 524, the NIC driver lacks dma-buf: "
            "load nvidia_peermem (`sudo modprobe nvidia_peermem`) and set NCCL_DMABUF_ENABLE=0."
        ],
    )


@rule(
    "NET005",
    "nccl_network",
    "mlx5 kernel modules loaded for the Mellanox NICs",
    "ConnectX NICs need mlx5_core (Ethernet) and mlx5_ib (RDMA verbs); without mlx5_ib NCCL cannot use "
    "InfiniBand/RoCE and falls back to TCP sockets.",
    ["`sudo modprobe mlx5_core mlx5_ib` (install MLNX_OFED/DOCA-OFED or the distro rdma-core if missing)."],
    ["https://docs.nvidia.com/networking/display/mlnxofedv24010331/installing+mlnx_ofed"],
    by_hand="`lsmod` (the whole list, not a grep) and `ibdev2netdev`",
)
def mlx5_modules(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    devs = [d for d in facts.rdma_devices() if d.startswith("mlx5")]
    mods, unread = _modules(facts, "mlx5_core", "mlx5_ib")
    loaded = [m for m in ("mlx5_core", "mlx5_ib") if m in mods]
    if len(loaded) == 2:
        ev = [_module_line(facts, m) for m in loaded]
        if devs:
            ev.insert(0, facts.rdma_devices_where(devs))
        return [r.finding("pass", "mlx5_core and mlx5_ib loaded", ev)]
    if not devs and "mlx5_core" not in mods:
        absence = facts.rdma_absence_unproven()
        if absence:
            return [
                r.not_checked(
                    "mlx5 modules not checked: whether this host has Mellanox NICs is unknown",
                    [absence, *([unread] if unread else [])],
                )
            ]
        return [
            r.not_applicable(
                "No Mellanox (mlx5) RDMA device listed: mlx5 modules not needed",
                [
                    f"{facts._file_of('ibdev2netdev')} and {facts._file_of('nvidia-smi-topo-m')} list no mlx5 device"
                ],
            )
        ]
    ev = (
        [facts.rdma_devices_where(devs)]
        if devs
        else [_module_line(facts, "mlx5_core") + " (a ConnectX NIC is present)"]
    )
    ev += [_module_line(facts, m) for m in loaded]
    missing = [m for m in ("mlx5_core", "mlx5_ib") if m not in mods]
    if unread is not None:
        return [
            r.not_checked(
                f"mlx5 devices present; whether {', '.join(missing)} is loaded was not checked",
                ev + [unread],
            )
        ]
    return [
        r.finding(
            "fail",
            f"{', '.join(missing)} not loaded for {len(devs) or 'the'} mlx5 device(s)",
            ev + [f"{facts._file_of('lsmod')}: no {', '.join(missing)} among {len(mods)} modules"],
        )
    ]


def _ib_port_down(p: IbPort) -> bool:
    state = (p.state or "").lower()
    phys = (p.physical_state or "").lower()
    return (bool(state) and state != "active") or (bool(phys) and phys != "linkup")


def _link_layer(facts: Facts, port: RdmaPort) -> str | None:
    """InfiniBand / Ethernet for an ibdev2netdev row: from the port listing, `ip link`, or the netdev name."""
    for p in facts.snapshot.ib_ports:
        if p.device == port.ib_dev and (port.port is None or p.port in (None, port.port)) and p.link_layer:
            return p.link_layer
    for link in facts.snapshot.net_links:
        if port.netdev and link.name == port.netdev and link.kind:
            return "InfiniBand" if link.kind == "infiniband" else "Ethernet" if link.kind == "ether" else None
    if port.netdev and port.netdev.startswith("ib"):
        return "InfiniBand"  # IPoIB netdev names (ib0, ibp12s0, ibs1)
    return None


@rule(
    "NET006",
    "nccl_network",
    "RDMA ports are up",
    "A Down port is a NIC NCCL will not use; with every port down, multi-node traffic falls back to TCP or "
    "hangs at the first collective. On InfiniBand, ibdev2netdev's (Up)/(Down) is the IPoIB netdev's state, not "
    "the link's: the port state comes from ibstat / ibv_devinfo / rdma link.",
    [
        "Check cabling and the switch: `ibstat` / `ibv_devinfo` (state, physical state).",
        "Bring the interface up (`ip link set DEV up`) or exclude the port via NCCL_IB_HCA.",
    ],
    [NCCL_ENV_DOCS],
    by_hand="`ibstat` (or `ibv_devinfo`, `rdma link`) and `ibdev2netdev`",
)
def rdma_ports(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    multi, multi_ev = _multi_node(facts)
    if facts.snapshot.ib_ports:
        return [_judge_ib_ports(facts, r, multi, multi_ev)]
    ports = facts.snapshot.rdma
    if not ports:
        why = facts.unread("ibdev2netdev")
        if why is not None:
            return [r.not_checked("RDMA ports not checked: no port listing", [why])]
        return [
            r.not_applicable("No RDMA port listed", [f"{facts._file_of('ibdev2netdev')} lists no device"])
        ]
    partial = facts.incomplete("ibdev2netdev")
    down = [p for p in ports if (p.state or "").lower() != "up"]
    ib_down = [p for p in down if _link_layer(facts, p) == "InfiniBand"]
    eth_down = [p for p in down if p not in ib_down]

    def line(p: RdmaPort) -> str:
        return f"{facts.where('ibdev2netdev', p.ib_dev)} {p.ib_dev} port {p.port} ==> {p.netdev} ({p.state})"

    if eth_down:
        sev = "fail" if len(eth_down) == len(ports) and multi else "warn"
        ev = [line(p) for p in eth_down[:8]] + [multi_ev]
        if ib_down:
            ev.append(
                f"{len(ib_down)} more InfiniBand port(s) show a Down IPoIB netdev: the link state is not in "
                "ibdev2netdev (capture `ibstat`)"
            )
        return [r.finding(sev, f"{len(eth_down)} of {len(ports)} RDMA (RoCE/Ethernet) ports are not Up", ev)]
    if ib_down:
        return [
            r.not_checked(
                f"{len(ib_down)} of {len(ports)} InfiniBand ports show a Down IPoIB netdev: the link state was not "
                "captured",
                [line(p) for p in ib_down[:8]]
                + ["ibdev2netdev prints the IPoIB netdev's state; an IB link can be Active with IPoIB down"],
                [
                    "Capture `ibstat` (State: Active, Physical state: LinkUp) or `ibv_devinfo` for these ports."
                ],
            )
        ]
    if partial is not None:
        return [
            r.not_checked(f"The {len(ports)} RDMA ports listed are Up, but the listing is partial", [partial])
        ]
    return [
        r.finding(
            "pass",
            f"All {len(ports)} RDMA ports Up",
            [f"{facts._file_of('ibdev2netdev')}: {len(ports)} ports, every one (Up)"],
        )
    ]


def _judge_ib_ports(facts: Facts, r: Rule, multi: bool | None, multi_ev: str) -> Finding:
    ports = facts.snapshot.ib_ports
    down = [p for p in ports if _ib_port_down(p)]
    unknown = [p for p in ports if not p.state and not p.physical_state]
    src = sorted({p.source or "ibstat" for p in ports})

    def line(p: IbPort) -> str:
        return (
            f"{', '.join(src)}: {p.device} port {p.port}: State {p.state or '?'}, Physical state "
            f"{p.physical_state or '?'}" + (f" ({p.link_layer})" if p.link_layer else "")
        )

    if down:
        sev = "fail" if len(down) == len(ports) and multi else "warn"
        return r.finding(
            sev,
            f"{len(down)} of {len(ports)} RDMA ports are not Active / LinkUp",
            [line(p) for p in down[:8]] + [multi_ev],
        )
    partial = [w for w in (facts.incomplete(s) for s in src) if w]
    if unknown or partial:
        return r.not_checked(
            "RDMA port state not checked: " + ("partial port listing" if partial else "state not shown"),
            partial + [line(p) for p in unknown[:4]],
        )
    return r.finding(
        "pass",
        f"All {len(ports)} RDMA ports Active / LinkUp",
        [
            f"{', '.join(src)}: {len(ports)} ports, every one Active"
            + (f" ({line(ports[0])})" if ports else "")
        ],
    )


@rule(
    "NET007",
    "nccl_network",
    "NVLink and RDMA settings are not mixed",
    "Settings for multi-node NVLink (flashinfer_nvlink all-to-all, MegaMoE, NCCL_MNNVL_ENABLE) and for RDMA "
    "(deepep_v2, UCX rc) describe different fabrics; mixing them means part of the launch was copied from "
    "the other recipe profile.",
    ["Keep one profile: the NVLink set on GB200/GB300 NVL, the RDMA set elsewhere."],
    [EP_DOCS],
    by_hand="compare the launch's all2all/moe backend and NCCL/UCX env with the recipe profile for the fabric",
)
def mixed_fabric(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    if not facts.launch_known:
        return [
            r.not_checked(
                "Launch not known: fabric settings not checked", [facts.unread("launch") or "no launch"]
            )
        ]
    nv, rd = facts.nvlink_settings(), facts.rdma_settings()
    ic, ic_ev = facts.cross_node_interconnect()
    if nv and rd:
        return [
            r.finding(
                "warn",
                "Launch mixes NVLink-only and RDMA-only settings",
                [f"NVLink: {', '.join(nv)}", f"RDMA: {', '.join(rd)}", ic_ev],
            )
        ]
    mn = [s for s in nv if s.startswith("NCCL_MNNVL")]
    if mn and ic == "rdma" and not facts.mnnvl():
        return [r.finding("warn", "NCCL_MNNVL_ENABLE=1 on hardware without multi-node NVLink", [*mn, ic_ev])]
    return [
        r.finding(
            "pass",
            "One fabric profile in the launch",
            [
                f"{facts.launch_where('vllm')}: NVLink-only settings: {', '.join(nv) or 'none'}; RDMA-only "
                f"settings: {', '.join(rd) or 'none'}"
            ],
        )
    ]


@rule(
    "NET008",
    "nccl_network",
    "Multi-node NVLink (MNNVL) NCCL settings on GB200/GB300 NVL",
    "On NVL trays cross-node traffic rides NVLink only when NCCL is told to use the multi-node NVLink "
    "fabric (MNNVL) with cuMem and NVLS; otherwise it falls back to the slower network path.",
    ["Set NCCL_MNNVL_ENABLE=1 NCCL_CUMEM_ENABLE=1 NCCL_NVLS_ENABLE=1 in the server environment."],
    [NCCL_ENV_DOCS],
    by_hand="`env | grep -E 'NCCL_(MNNVL|CUMEM|NVLS)_ENABLE'` in the server's environment",
)
def mnnvl_env(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    want = recipe.network.mnnvl_env
    if want is None:
        return [
            r.not_applicable(
                f"Recipe {recipe.name} sets no MNNVL environment",
                [f"recipe {recipe.name}: no network.mnnvl_env"],
            )
        ]
    multi, multi_ev = _multi_node(facts)
    if multi is False:
        return [r.finding("pass", "One node: MNNVL settings not needed", [multi_ev])]
    if not facts.mnnvl():
        names = facts.gpu_names
        if not names:
            return [
                r.not_checked(
                    "MNNVL settings not checked: no GPU seen",
                    [multi_ev, facts.unread("nvidia-smi") or "no GPU names"],
                )
            ]
        return [
            r.finding(
                "pass",
                f"{names[0]} has no multi-node NVLink: MNNVL settings not needed",
                [f"{facts.gpus_where(names[0])} {len(names)} x {names[0]}", multi_ev],
            )
        ]
    missing, ev = [], [f"hardware {facts.hardware()}", multi_ev, f"recipe: {want.source}"]
    for k, v in want.value.items():
        have, where = facts.env(k)
        ev.append(where)
        if have != v:
            missing.append(f"{k}={v}")
    if missing:
        return [r.finding("warn" if multi else "info", f"MNNVL settings missing: {', '.join(missing)}", ev)]
    return [r.finding("pass", "MNNVL NCCL settings present", ev)]
