"""nccl_network: the MoE all-to-all and NCCL/UCX settings match the interconnect, and RDMA is healthy."""

from __future__ import annotations

from vllm_medic.checks.facts import Facts
from vllm_medic.checks.launch_topology import choose_strategy, launch_topology
from vllm_medic.checks.registry import Rule, rule
from vllm_medic.model import Finding
from vllm_medic.recipes.model import Recipe

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
            r.finding(
                "info", "Launch not known: all-to-all backend not checked", ["no launch"], ["Pass --launch."]
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
            r.finding(
                "info",
                "Cross-node interconnect unknown: all-to-all backend not judged",
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
            r.finding(
                "info",
                "Launch not known: MoE backend placement not checked",
                ["no launch"],
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
        if multi is None or ic is None:
            return [r.finding("info", f"--moe-backend {moe}: cross-node fabric unknown", ev)]
        return [r.finding("pass", f"--moe-backend {moe} on {ic if multi else 'one node'}", ev)]
    return [
        r.finding("pass", "No NVLink-only MoE backend in the launch", [f"--moe-backend {moe or 'unset'}"])
    ]


def _rdma_in_use(facts: Facts) -> tuple[bool, list[str]]:
    ic, ic_ev = facts.cross_node_interconnect()
    multi, multi_ev = _multi_node(facts)
    kvt = str(facts.arg("kv_transfer_config") or "")
    nixl = "Nixl" in kvt or "nixl" in kvt
    return ic == "rdma" and (bool(multi) or nixl), [ic_ev, multi_ev] + (
        ["kv-transfer via NIXL"] if nixl else []
    )


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
        return [r.finding("pass", f"Recipe {recipe.name} sets no UCX_TLS requirement", [])]
    scope = recipe.network.rdma_env_strategies.get("UCX_TLS")
    if scope and facts.launch_known:
        choice = choose_strategy(facts, recipe)
        if choice.name not in scope:
            return [
                r.finding(
                    "pass",
                    f"UCX_TLS not needed: the recipe sets it for {', '.join(scope)} only (KV-cache transfer)",
                    [choice.evidence(), f"recipe: UCX_TLS={want.value} ({want.source})"],
                )
            ]
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


def _modules(facts: Facts) -> tuple[set[str] | None, str]:
    mods = facts.snapshot.kernel_modules
    if mods:
        return set(mods), "lsmod.txt"
    return None, facts.missing("lsmod") or "lsmod not collected"


@rule(
    "NET004",
    "nccl_network",
    "NCCL_DMABUF_ENABLE=0 has nvidia_peermem loaded",
    "Turning dmabuf off (the fix for mlx5dv_reg_dmabuf_mr errno 524) makes NCCL register GPU memory through "
    "nvidia_peermem; without the module GPUDirect RDMA is gone.",
    [
        "Load it on every node: `sudo modprobe nvidia_peermem` (persist in /etc/modules-load.d/).",
        "Or, if the kernel and mlx5 driver support dmabuf, unset NCCL_DMABUF_ENABLE.",
    ],
    [NCCL_ENV_DOCS],
    by_hand="`lsmod | grep nvidia_peermem` on every node",
)
def dmabuf_needs_peermem(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    fb = recipe.network.dmabuf_fallback or {
        "env": "NCCL_DMABUF_ENABLE",
        "value": "0",
        "requires_module": "nvidia_peermem",
        "source": "",
    }
    val, where = facts.env(fb["env"])
    if val != fb["value"]:
        return [r.finding("pass", f"{fb['env']} is not {fb['value']}: dmabuf path in use", [where])]
    mods, mods_ev = _modules(facts)
    ev = [where, f"source: {fb['source']}"]
    if mods is None:
        return [
            r.finding(
                "info",
                f"{fb['env']}={val} but loaded modules unknown: {fb['requires_module']} not checked",
                ev + [mods_ev],
                [f"Check by hand: `lsmod | grep {fb['requires_module']}`."],
            )
        ]
    if fb["requires_module"] in mods:
        return [
            r.finding(
                "pass",
                f"{fb['requires_module']} loaded for {fb['env']}={val}",
                ev + [facts.where("lsmod", fb["requires_module"])],
            )
        ]
    return [
        r.finding(
            "fail",
            f"{fb['env']}={val} without {fb['requires_module']} loaded",
            ev + [f"{mods_ev}: no {fb['requires_module']}"],
        )
    ]


@rule(
    "NET005",
    "nccl_network",
    "mlx5 kernel modules loaded for the Mellanox NICs",
    "ConnectX NICs need mlx5_core (Ethernet) and mlx5_ib (RDMA verbs); without mlx5_ib NCCL cannot use "
    "InfiniBand/RoCE and falls back to TCP sockets.",
    ["`sudo modprobe mlx5_core mlx5_ib` (install MLNX_OFED/DOCA-OFED or the distro rdma-core if missing)."],
    ["https://docs.nvidia.com/networking/display/mlnxofedv24010331/installing+mlnx_ofed"],
    by_hand="`lsmod | grep mlx5`",
)
def mlx5_modules(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    devs = [d for d in facts.rdma_devices() if d.startswith("mlx5")]
    if not devs:
        return [
            r.finding(
                "pass",
                "No Mellanox (mlx5) RDMA devices seen",
                [facts.missing("ibdev2netdev") or "ibdev2netdev/topology list none"],
            )
        ]
    mods, mods_ev = _modules(facts)
    ev = [f"{facts.where('ibdev2netdev', devs[0])} RDMA devices {', '.join(devs[:4])}"]
    if mods is None:
        return [
            r.finding(
                "info",
                "mlx5 devices present but loaded modules unknown",
                ev + [mods_ev],
                ["Check: `lsmod | grep mlx5`."],
            )
        ]
    missing = [m for m in ("mlx5_core", "mlx5_ib") if m not in mods]
    if missing:
        return [
            r.finding(
                "fail",
                f"{', '.join(missing)} not loaded for {len(devs)} mlx5 device(s)",
                ev + [f"lsmod.txt: no {', '.join(missing)}"],
            )
        ]
    return [r.finding("pass", "mlx5_core and mlx5_ib loaded", ev)]


@rule(
    "NET006",
    "nccl_network",
    "RDMA ports are up",
    "A Down port is a NIC NCCL will not use; with every port down, multi-node traffic falls back to TCP or "
    "hangs at the first collective.",
    [
        "Check cabling and the switch: `ibstat` / `ibv_devinfo` (state, physical state).",
        "Bring the interface up (`ip link set DEV up`) or exclude the port via NCCL_IB_HCA.",
    ],
    [NCCL_ENV_DOCS],
    by_hand="`ibdev2netdev` / `ibstat`",
)
def rdma_ports(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    ports = facts.snapshot.rdma
    if not ports:
        return [
            r.finding(
                "pass", "No RDMA ports listed", [facts.missing("ibdev2netdev") or "ibdev2netdev listed none"]
            )
        ]
    down = [p for p in ports if (p.state or "").lower() != "up"]
    ev = [
        f"{facts.where('ibdev2netdev', p.ib_dev)} {p.ib_dev} port {p.port} ==> {p.netdev} ({p.state})"
        for p in down[:8]
    ]
    if not down:
        return [r.finding("pass", f"All {len(ports)} RDMA ports Up", [f"{len(ports)} ports Up"])]
    multi, multi_ev = _multi_node(facts)
    sev = "fail" if len(down) == len(ports) and multi else "warn"
    return [r.finding(sev, f"{len(down)} of {len(ports)} RDMA ports are not Up", ev + [multi_ev])]


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
            [f"NVLink: {', '.join(nv) or '-'}", f"RDMA: {', '.join(rd) or '-'}"],
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
        return [r.finding("pass", f"Recipe {recipe.name} sets no MNNVL environment", [])]
    multi, multi_ev = _multi_node(facts)
    if not facts.mnnvl() or multi is False:
        return [
            r.finding("pass", "Not a multi-node NVLink deployment: MNNVL settings not needed", [multi_ev])
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
