"""parallel_layout / oom_startup: enough GPUs of the right kind, a layout that fits them, free memory."""

from __future__ import annotations

from collections.abc import Callable

from vllm_medic.checks.facts import Facts
from vllm_medic.checks.registry import Rule, rule
from vllm_medic.model import Finding
from vllm_medic.recipes.model import Recipe

PARALLEL_DOCS = "https://docs.vllm.ai/en/latest/serving/parallelism_scaling.html"
DEFAULT_GPU_MEMORY_UTILIZATION = 0.92  # vLLM default since #38284 (2026-04-21; 0.9 before)


def _gpu_summary(facts: Facts) -> str:
    gpus = facts.snapshot.gpus
    names = sorted({g.name for g in gpus if g.name})
    mem = gpus[0].memory_total_mib if gpus else None
    return f"{facts.gpus_where(names[0] if names else 'MiB')} {len(gpus)} x {', '.join(names) or '?'}" + (
        f" ({mem} MiB each)" if mem else ""
    )


@rule(
    "LAY001",
    "parallel_layout",
    "GPU count and type meet the recipe's hardware baseline",
    "The recipe was verified on specific GPUs and counts; fewer GPUs than the baseline cannot hold the "
    "weights, and unlisted GPUs are an untested path.",
    [
        "Run on the recipe's hardware with at least its GPU count (multi-node where the baseline says so).",
        "Or pick a smaller variant/quantization of the model.",
    ],
    [PARALLEL_DOCS],
    by_hand="`nvidia-smi -L | wc -l` on every node",
)
def gpu_baseline(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    hw = facts.hardware()
    per_node = facts.gpus_per_node()
    if not recipe.hardware and recipe.strategy_min_gpus is None:
        return [
            r.not_applicable(
                f"Recipe {recipe.name} sets no hardware baseline",
                [_gpu_summary(facts)] if per_node else [f"recipe {recipe.name}: no hardware baselines"],
            )
        ]
    if per_node is None:
        return [
            r.not_checked(
                "GPU count not checked: no GPUs seen",
                [facts.unread("nvidia-smi") or "nvidia-smi listed no GPUs"],
                ["Fix DRV001, or pass --hardware and a bundle from a GPU node."],
            )
        ]
    ev = [_gpu_summary(facts), f"hardware class: {hw or 'unknown'}"]
    nodes, nodes_ev = facts.nnodes()
    ev.append(f"nodes: {nodes if nodes else 'unknown'} ({nodes_ev})")
    need = 0
    base = recipe.hardware.get(hw or "")
    if base is not None:
        need = base.min_gpus
        ev.append(f"recipe baseline for {hw}: >= {base.min_gpus} GPUs {base.note} ({base.source})")
    elif recipe.hardware:
        ev.append(f"recipe {recipe.name} lists: {', '.join(sorted(recipe.hardware))}")
        return [
            r.finding(
                "warn",
                f"GPU {hw or ', '.join(sorted(set(facts.gpu_names)))} is not in recipe {recipe.name}'s verified hardware",
                ev,
            )
        ]
    if facts.strategy and recipe.strategy_min_gpus and facts.strategy in recipe.strategy_min_gpus.value:
        smin = recipe.strategy_min_gpus.value[facts.strategy]
        ev.append(f"strategy {facts.strategy} needs >= {smin} GPUs ({recipe.strategy_min_gpus.source})")
        need = max(need, smin)
    total = per_node * (nodes or 1)
    if total >= need:
        return [r.finding("pass", f"{total} x {hw} meets the baseline of {need}", ev)]
    cut = facts.gpu_list_partial()
    if cut is not None:
        return [
            r.not_checked(
                f"GPU count not checked: the GPU list is partial ({per_node} listed, the baseline is {need})",
                [*ev, cut],
                ["Capture the whole `nvidia-smi` (or `nvidia-smi -L`) output."],
            )
        ]
    if nodes is None:
        return [
            r.finding(
                "warn",
                f"This node has {per_node} x {hw}; the recipe needs {need}: the launch must span "
                f"{-(-need // per_node)} nodes",
                ev,
            )
        ]
    return [r.finding("fail", f"{total} x {hw} is below the recipe baseline of {need} GPUs", ev)]


@rule(
    "LAY002",
    "oom_startup",
    "Total GPU memory holds the model's weights",
    "Weights must fit in the GPUs the layout spans before any KV cache; otherwise loading ends in "
    "'CUDA out of memory' or 'No available memory for the cache blocks'.",
    [
        "Add GPUs/nodes until total memory exceeds the weights with headroom.",
        "Or use a smaller quantization.",
    ],
    [PARALLEL_DOCS],
    by_hand="`nvidia-smi --query-gpu=memory.total --format=csv` x nodes vs the recipe's weight size",
)
def weights_fit(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    if recipe.weights is None:
        return [
            r.not_applicable(
                f"Recipe {recipe.name} gives no weight size", [f"recipe {recipe.name}: no weights.gb"]
            )
        ]
    mems = [g.memory_total_mib for g in facts.snapshot.gpus if g.memory_total_mib]
    if not mems:
        return [
            r.not_checked(
                "GPU memory not known: weights fit not checked",
                [facts.unread("nvidia-smi") or "no GPU memory totals"],
            )
        ]
    nodes, nodes_ev = facts.nnodes()
    per_node_gb = sum(mems) * 2**20 / 1e9
    total_gb = per_node_gb * (nodes or 1)
    need = float(recipe.weights.value)
    ev = [
        f"{facts.gpus_where('MiB')} {len(mems)} GPUs x {mems[0]} MiB = {per_node_gb:.0f} GB per node",
        f"nodes: {nodes or 'unknown (counted 1)'} ({nodes_ev}) -> {total_gb:.0f} GB",
        f"weights need {need:.0f} GB ({recipe.weights.source})",
    ]
    if total_gb >= need:
        return [r.finding("pass", f"{total_gb:.0f} GB of GPU memory holds {need:.0f} GB of weights", ev)]
    cut = facts.gpu_list_partial()
    if cut is not None:
        return [
            r.not_checked(
                f"Weights fit not checked: the GPU list is partial ({len(mems)} GPUs listed)", [*ev, cut]
            )
        ]
    nodes_needed = -(-need // per_node_gb)
    sev = "fail" if nodes is not None else "warn"
    return [
        r.finding(
            sev,
            f"{total_gb:.0f} GB of GPU memory cannot hold {need:.0f} GB of weights (needs {nodes_needed:.0f} such nodes)",
            ev,
        )
    ]


def _visible_count(facts: Facts, host: int) -> tuple[int, list[str]]:
    """GPUs the server will see: CUDA_VISIBLE_DEVICES and `docker run --gpus` narrow the host's set."""
    ev: list[str] = []
    count = host
    cvd, cvd_ev = facts.env("CUDA_VISIBLE_DEVICES")
    if cvd is not None and cvd.strip() not in ("", "all"):
        n = len([x for x in cvd.split(",") if x.strip()])
        count = min(count, n)
        ev.append(cvd_ev)
    gpus_opt = facts.snapshot.launch.runtime_options.get("gpus")
    if isinstance(gpus_opt, str) and gpus_opt.strip().strip("'\"") not in ("all", ""):
        spec = gpus_opt.strip().strip("'\"")
        if spec.startswith("device="):
            n = len([x for x in spec[len("device=") :].split(",") if x.strip()])
        elif spec.isdecimal():
            n = int(spec)
        else:
            n = count
        count = min(count, n)
        ev.append(f"docker run --gpus {gpus_opt}")
    return count, ev


@rule(
    "LAY003",
    "parallel_layout",
    "TP x PP x DP fits the GPUs per node and the nodes",
    "vLLM needs exactly tensor x pipeline x data parallel GPUs; more than the node (or the visible devices) "
    "hold and it waits for a placement group or fails with 'world size ... exceeds the available GPUs'.",
    [
        "Make TP x PP x DP(local) equal the GPUs per node x nodes (usually TP = GPUs per node).",
        "Spread across nodes explicitly: --nnodes/--node-rank/--master-addr (or -dp/-dpl for DP).",
    ],
    [PARALLEL_DOCS],
    by_hand="TP x PP x DP from the command line vs `nvidia-smi -L | wc -l` per node",
)
def layout_fits(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    if not facts.launch_known:
        return [
            r.not_checked(
                "Launch command not known: parallel layout not checked",
                ["no launch in the snapshot and no --launch given"],
                ["Pass --launch 'vllm serve ...' to check TP/PP/DP against the GPUs."],
            )
        ]
    tp = facts.int_arg("tensor_parallel_size", 1) or 1
    pp = facts.int_arg("pipeline_parallel_size", 1) or 1
    dp = facts.int_arg("data_parallel_size", 1) or 1
    dpl = facts.int_arg("data_parallel_size_local")
    ep = bool(facts.arg("enable_expert_parallel"))
    world = tp * pp * dp
    where = (
        facts.launch_where("-tp") if facts.launch_where("-tp") != "launch" else facts.launch_where("--tensor")
    )
    ev = [f"{where}: TP {tp} x PP {pp} x DP {dp}{f' (DP local {dpl})' if dpl else ''} = {world} GPUs"]
    if ep:
        ev.append(f"expert parallel on: EP size = TP x DP = {tp * dp}")
    host = facts.gpus_per_node()
    if host is None:
        return [
            r.not_checked(
                "GPUs per node unknown: layout not checked",
                ev + [facts.unread("nvidia-smi") or "no GPUs listed"],
            )
        ]
    cut = facts.gpu_list_partial()
    visible, vis_ev = _visible_count(facts, host)
    ev.append(f"{facts.gpus_where('MiB')} {host} GPUs on this node; {visible} visible to the server")
    ev += vis_ev
    nodes, nodes_ev = facts.nnodes()
    ev.append(f"nodes: {nodes if nodes else 'unknown'} ({nodes_ev})")
    if nodes is None:
        if tp > visible and pp == 1:
            return [
                r.finding(
                    "warn",
                    f"TP {tp} exceeds the {visible} GPUs of this node; needs a multi-node executor",
                    ev,
                )
            ]
        return [r.not_checked("Multi-node layout not checked: the per-node share is not in the launch", ev)]
    if dpl:
        per_node = tp * pp * dpl if pp == 1 or nodes == 1 else tp * dpl
    else:
        if world % nodes:
            return [r.finding("fail", f"{world} GPUs do not split evenly over {nodes} nodes", ev)]
        per_node = world // nodes
    ev.append(f"per node: {per_node} GPUs")
    if per_node > visible and cut is not None:
        return [
            r.not_checked(
                f"Layout needs {per_node} GPUs per node; the partial GPU list shows {visible}", [*ev, cut]
            )
        ]
    board = facts.board()
    if per_node > visible and board is not None and board.missing_gpus(host):
        ev.append(f"{board.board}: {board.gpus} GPUs per board, {host} seen ({board.source})")
        return [
            r.finding(
                "fail",
                f"Layout needs {per_node} GPUs per node; {visible} are visible: a GPU is missing from the board",
                ev,
                [
                    f"Do not shrink the layout to the {host} GPUs left: a GPU is missing from the board (LAY005), "
                    "and a smaller TP only hides the fault.",
                    "Restore it first (`lspci | grep -i nvidia`, `sudo dmesg -T | grep -i xid`), then launch with "
                    f"the board's {board.gpus} GPUs.",
                ],
            )
        ]
    if per_node > visible:
        return [r.finding("fail", f"Layout needs {per_node} GPUs per node; {visible} are visible", ev)]
    if per_node < visible:
        return [r.finding("info", f"Layout uses {per_node} of {visible} GPUs per node", ev)]
    return [r.finding("pass", f"TP {tp} x PP {pp} x DP {dp} fits {nodes} node(s) of {visible} GPUs", ev)]


@rule(
    "LAY004",
    "oom_startup",
    "No other process holds GPU memory",
    "vLLM claims --gpu-memory-utilization of each GPU's total at start; memory another process holds makes "
    "it fail with 'Free memory on device ... is less than desired GPU memory utilization'.",
    [
        "Stop the processes listed (an old vLLM, a notebook, a stuck container): `nvidia-smi`, then `kill PID`.",
        "If you are checking the vLLM that is already running, this is expected: ignore it.",
        "Or lower --gpu-memory-utilization to fit the free memory.",
    ],
    ["https://docs.vllm.ai/en/latest/configuration/conserving_memory.html"],
    by_hand="`nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv`",
)
def gpu_memory_held(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    gpus = facts.snapshot.gpus
    if not gpus:
        return [
            r.not_checked(
                "GPU memory use not checked: no GPUs seen", [facts.unread("nvidia-smi") or "no GPUs"]
            )
        ]
    util = facts.arg("gpu_memory_utilization")
    try:
        util_f = float(util) if util is not None else DEFAULT_GPU_MEMORY_UTILIZATION
    except (TypeError, ValueError):
        util_f = DEFAULT_GPU_MEMORY_UTILIZATION
    procs = facts.snapshot.gpu_processes
    ev = [
        f"{facts.gpus_where(str(p.pid) if p.pid else 'MiB')} GPU {p.gpu_index} pid {p.pid} {p.name} {p.used_mib} MiB"
        for p in procs[:8]
    ]
    if len(procs) > 8:
        ev.append(f"... {len(procs) - 8} more processes")
    blocking = []
    busy = []
    for g in gpus:
        if g.memory_total_mib and g.memory_used_mib is not None:
            if g.memory_used_mib > g.memory_total_mib * (1 - util_f):
                blocking.append(g)
            elif g.memory_used_mib > 1024:
                busy.append(g)
    for g in blocking + busy:
        ev.append(f"GPU {g.index}: {g.memory_used_mib} / {g.memory_total_mib} MiB used")
    if blocking:
        ev.append(f"--gpu-memory-utilization {util_f} needs {util_f:.0%} of each GPU free")
        return [
            r.finding("fail", f"{len(blocking)} GPU(s) have too little free memory for vLLM to start", ev)
        ]
    if busy or procs:
        return [r.finding("warn", f"{len(procs) or len(busy)} process(es) hold GPU memory", ev)]
    unknown = [g.index for g in gpus if g.memory_used_mib is None]
    cut = facts.gpu_list_partial()
    if unknown or cut:
        return [
            r.not_checked(
                "GPU memory use not checked: "
                + (
                    f"used memory not shown for GPU(s) {', '.join(map(str, unknown))}"
                    if unknown
                    else "partial GPU list"
                ),
                [cut or f"{len(gpus) - len(unknown)} of {len(gpus)} GPUs show their used memory"],
            )
        ]
    used = sorted({g.memory_used_mib for g in gpus if g.memory_used_mib is not None})
    return [
        r.finding(
            "pass",
            f"No process holds GPU memory on the {len(gpus)} GPUs listed",
            [
                f"{facts.gpus_where('MiB')} {len(gpus)} GPUs with {used[0]}-{used[-1]} MiB used, "
                "no process listed"
            ],
        )
    ]


@rule(
    "LAY005",
    "parallel_layout",
    "The server sees all the GPUs the host has",
    "A container started with fewer GPUs (--gpus, NVIDIA_VISIBLE_DEVICES) or a narrowed CUDA_VISIBLE_DEVICES "
    "silently shrinks the node: TP 8 then waits or fails.",
    [
        "Start the container with `--gpus all` (or the device list the layout needs).",
        "Unset or widen CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES for the server.",
    ],
    ["https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/docker-specialized.html"],
    by_hand="`nvidia-smi -L` on the host and inside the container; `echo $CUDA_VISIBLE_DEVICES`",
)
def container_sees_fewer(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    snap = facts.snapshot
    seen = facts.gpus_per_node()
    if seen is None:
        return [
            r.not_checked(
                "GPU visibility not checked: no GPUs seen", [facts.unread("nvidia-smi") or "no GPUs"]
            )
        ]
    inside = snap.container.in_container
    view = " (inside a container)" if inside else " (on the host)" if inside is False else ""
    ev = [f"{facts.gpus_where('MiB')} {seen} GPUs listed{view}"]
    cut = facts.gpu_list_partial()
    if cut is not None:
        return [r.not_checked(f"GPU count not checked: the GPU list is partial ({seen} listed)", [*ev, cut])]
    vis = snap.gpu_visibility
    host_count = vis.host_gpu_count if vis else None
    container_count = vis.container_gpu_count if vis else None
    missing = _missing_from_board(facts, seen, host_count)
    if missing is not None:
        return [missing(r, ev)]
    if isinstance(host_count, int) and isinstance(container_count, int) and container_count < host_count:
        return [_image_container_sees_fewer(facts, r, ev, host_count, container_count)]
    if isinstance(host_count, int) and host_count > seen:
        ev.append(f"host has {host_count} GPUs")
        return [r.finding("warn", f"This container sees {seen} of the host's {host_count} GPUs", ev)]
    narrower = _device_list_narrower(facts, r, ev, seen)
    if narrower is not None:
        return [narrower]
    above = _host_count_above(facts, r, ev, seen, host_count)
    if above is not None:
        return [above]
    if isinstance(host_count, int) and isinstance(container_count, int):
        ev.append(
            f"{(vis.source if vis else None) or 'in-image probe'}: a container sees "
            f"{container_count} of {host_count}"
        )
    board = facts.board()
    if board is not None and board.gpus == seen:
        ev.append(f"{board.board}: {board.gpus} GPUs per board ({board.source})")
    return [r.finding("pass", f"The server sees all {seen} GPUs nvidia-smi lists", ev)]


def _image_container_sees_fewer(
    facts: Facts, r: Rule, ev: list[str], host_count: int, container_count: int
) -> Finding:
    """The in-image probe's `docker run --gpus all` saw fewer GPUs than the host lists."""
    vis = facts.snapshot.gpu_visibility
    src = (vis.source if vis else None) or "in-image probe"
    ev += [
        f"host: {host_count} GPUs",
        f"{src}: `docker run --gpus all IMAGE nvidia-smi` sees {container_count} (also HLT-IMG003)",
    ]
    return r.finding(
        "warn",
        f"A container of the image sees {container_count} of the host's {host_count} GPUs even with --gpus all",
        ev,
        [
            "Compare `nvidia-smi -L` on the host with the container's; a GPU missing in the container "
            "only points at the NVIDIA Container Toolkit / CDI spec (`nvidia-ctk cdi list`) or an "
            "NVIDIA_VISIBLE_DEVICES baked into the image (`docker image inspect IMAGE`).",
            *r.fix,
        ],
    )


def _device_list_narrower(facts: Facts, r: Rule, ev: list[str], seen: int) -> Finding | None:
    """CUDA_VISIBLE_DEVICES / NVIDIA_VISIBLE_DEVICES hide some of the listed GPUs from the server."""
    visible, vis_ev = _visible_count(facts, seen)
    nvd, nvd_ev = _nvidia_visible_devices(facts)
    if nvd is not None:
        n = len([x for x in nvd.split(",") if x.strip()])
        if n < visible:
            visible = n
            vis_ev.append(nvd_ev)
    if visible >= seen:
        return None
    ev += vis_ev
    need, need_ev = _per_node_need(facts)
    if need is not None and need <= visible:
        return r.finding(
            "info",
            f"The server is limited to {visible} of {seen} GPUs, which its layout ({need_ev}) fits: "
            "a deliberate partition?",
            ev,
            [
                "If other servers are meant to use the remaining GPUs, nothing to do; otherwise widen the device list."
            ],
        )
    if need is not None:
        ev.append(f"the launch needs {need} GPUs per node ({need_ev})")
    return r.finding("warn", f"The server will see {visible} of {seen} GPUs", ev)


def _host_count_above(facts: Facts, r: Rule, ev: list[str], seen: int, host_count: object) -> Finding | None:
    """Inside a container: does the host hold more GPUs than it sees (or is the host's count unknown)?"""
    if not facts.snapshot.container.in_container:
        return None
    lower = _host_lower_bound(facts)
    if lower is not None and lower[0] > seen:
        return r.finding(
            "warn",
            f"This container sees {seen} GPUs; the host has at least {lower[0]}",
            ev + [lower[1]],
            [
                "If the server should use more GPUs, give the container more (`--gpus all`, a larger "
                "`nvidia.com/gpu` limit); a partition by design needs nothing."
            ],
        )
    if host_count is None:
        return r.not_checked(
            f"Inside a container that sees {seen} GPUs: the host's GPU count is unknown",
            ev,
            ["Run `nvidia-smi -L` on the host (or `vllm-medic collect --image IMAGE` there) to compare."],
        )
    return None


def _missing_from_board(
    facts: Facts, seen: int, host_count: object
) -> Callable[[Rule, list[str]], Finding] | None:
    """A GPU missing from a board of known size (7 on an 8-GPU HGX): the hardware path first, never "TP 7"."""
    board = facts.board()
    node = max(seen, host_count if isinstance(host_count, int) else 0)
    if board is None or not board.missing_gpus(node):
        return None
    lower = _host_lower_bound(facts) if facts.snapshot.container.in_container else None
    nvd = facts.snapshot.env.get("NVIDIA_VISIBLE_DEVICES", "")
    if lower is not None and len([x for x in nvd.split(",") if x.strip()]) == seen:
        return None  # a container deliberately given these GPUs (host indices listed)
    buses = [g.bus_id for g in facts.snapshot.gpus if g.bus_id]

    def make(r: Rule, ev: list[str]) -> Finding:
        evidence = [
            *ev,
            f"{board.board}: a complete board carries {board.gpus} GPUs; {node} is neither a whole board nor a "
            f"whole-GPU slice ({', '.join(map(str, board.partitions))}) ({board.source})",
        ]
        if buses:
            evidence.append(f"bus ids seen: {', '.join(buses)}")
        return r.finding(
            "fail",
            f"{node} of the board's {board.gpus} GPUs are seen: a GPU is missing from the bus or the driver",
            evidence,
            [
                f"Is every GPU still on the PCI bus? `lspci -d 10de: | grep -iE '3D controller|VGA'` must list "
                f"{board.gpus}; one missing, or shown as `rev ff`, has fallen off the bus (compare with the bus ids "
                "nvidia-smi lists).",
                "Find why it dropped: `sudo dmesg -T | grep -iE 'xid|fallen off the bus|RmInitAdapter'` (Xid 79 = "
                "fallen off the bus; 48/63/64/94/95 = memory/ECC; 119/120 = GSP).",
                "Drain the node (cordon it / take it out of the scheduler), then reset it: `sudo nvidia-smi -r` or "
                "a reboot / power cycle; if the GPU stays missing, reseat it or open an RMA (serial from "
                "`nvidia-smi -q`).",
                f"Launch only when all {board.gpus} GPUs are back, with the layout sized for the whole board: do "
                f"not shrink TP to {node} to fit the GPUs left.",
                "If the node is a deliberate slice (a VM or container given fewer GPUs), check `--gpus`, "
                "NVIDIA_VISIBLE_DEVICES and the VM size instead.",
            ],
            docs=["https://docs.nvidia.com/deploy/xid-errors/index.html", *r.docs],
        )

    return make


def _nvidia_visible_devices(facts: Facts) -> tuple[str | None, str]:
    """NVIDIA_VISIBLE_DEVICES that narrows the server's container: from the launch (docker -e, pod env)
    always; from the collected environment only on the host (inside a container it is already applied)."""
    env = facts.snapshot.launch.env.get("NVIDIA_VISIBLE_DEVICES")
    if env is None and not facts.snapshot.container.in_container:
        env = facts.snapshot.env.get("NVIDIA_VISIBLE_DEVICES")
    if env is None or env.strip().lower() in ("all", "void", "none", ""):
        return None, ""
    _, where = facts.env("NVIDIA_VISIBLE_DEVICES")
    return env.strip(), where


def _host_lower_bound(facts: Facts) -> tuple[int, str] | None:
    """Inside a container, NVIDIA_VISIBLE_DEVICES=4,5,6,7 (host indices) shows the host has >= 8 GPUs."""
    val = facts.snapshot.env.get("NVIDIA_VISIBLE_DEVICES", "")
    idx = [x.strip() for x in val.split(",") if x.strip()]
    if not idx or not all(x.isdecimal() for x in idx):
        return None
    return max(
        int(x) for x in idx
    ) + 1, f"{facts.where('env', 'NVIDIA_VISIBLE_DEVICES=')} NVIDIA_VISIBLE_DEVICES={val} (host indices)"


def _per_node_need(facts: Facts) -> tuple[int | None, str]:
    """GPUs the launch uses on this node, when the launch says (one node, or DP local given)."""
    if not facts.launch_known:
        return None, "launch not known"
    tp = facts.int_arg("tensor_parallel_size", 1) or 1
    pp = facts.int_arg("pipeline_parallel_size", 1) or 1
    dp = facts.int_arg("data_parallel_size", 1) or 1
    dpl = facts.int_arg("data_parallel_size_local")
    nodes, _ = facts.nnodes()
    if dpl:
        return tp * pp * dpl, f"TP {tp} x PP {pp} x DP local {dpl}"
    if nodes == 1:
        return tp * pp * dp, f"TP {tp} x PP {pp} x DP {dp}"
    return None, "multi-node launch"


MIG_DOCS = "https://docs.nvidia.com/datacenter/tesla/mig-user-guide/index.html"


@rule(
    "LAY006",
    "parallel_layout",
    "GPUs are whole (MIG off) for a multi-GPU server",
    "With MIG on, a GPU is split into instances with a fraction of its memory and SMs; vLLM then sees MIG "
    "devices, not the GPU, so the memory and layout the recipe assumes are not there.",
    [
        "For a multi-GPU server: disable MIG on its GPUs (`sudo nvidia-smi -i N -mig 0`, then reset the GPU "
        "or reboot) and check `nvidia-smi` shows 'MIG M.: Disabled'.",
        "Or run one single-GPU vLLM per MIG device: `CUDA_VISIBLE_DEVICES=MIG-<uuid>` (from `nvidia-smi -L`), "
        "--tensor-parallel-size 1, a model that fits the slice.",
    ],
    [MIG_DOCS],
    by_hand="`nvidia-smi --query-gpu=index,mig.mode.current --format=csv` and `nvidia-smi -L`",
)
def mig_enabled(facts: Facts, recipe: Recipe, r: Rule) -> list[Finding]:
    gpus = facts.snapshot.gpus
    on = sorted(
        {g.index for g in gpus if (g.mig_mode or "").lower() == "enabled"}
        | {d.gpu_index for d in facts.snapshot.mig_devices}
    )
    if not on:
        if not gpus:
            return [
                r.not_checked("MIG mode not checked: no GPUs seen", [facts.unread("nvidia-smi") or "no GPUs"])
            ]
        unknown = [g.index for g in gpus if not g.mig_mode]
        if unknown:
            return [
                r.not_checked(
                    f"MIG mode not checked: not shown for GPU(s) {', '.join(map(str, unknown[:8]))}",
                    [f"{len(gpus) - len(unknown)} of {len(gpus)} GPUs show a MIG mode"],
                )
            ]
        modes = sorted({g.mig_mode or "" for g in gpus})
        return [
            r.finding(
                "pass",
                "MIG is off: whole GPUs",
                [f"{facts.gpus_where('MIG')} {len(gpus)} GPUs, MIG mode {', '.join(modes)}"],
            )
        ]
    ev = []
    hit = facts.find("nvidia-smi", "MIG devices") or facts.find("nvidia-smi-q", "mig_mode")
    if hit is not None:
        ev.append(f"{hit[0]} {hit[1]}")
    ev.append(f"MIG enabled on GPU(s) {', '.join(map(str, on))}")
    mig_devices = facts.snapshot.mig_devices
    sizes = sorted({d.memory_total_mib for d in mig_devices if d.memory_total_mib})
    if mig_devices:
        ev.append(
            f"{len(mig_devices)} MIG device(s)"
            + (f" of {', '.join(f'{s} MiB' for s in sizes)} each" if sizes else "")
        )
    need, need_ev = _per_node_need(facts)
    if need is not None and need > 1:
        ev.append(f"the launch needs {need} GPUs ({need_ev})")
        return [
            r.finding(
                "warn", f"The launch needs {need} GPUs but MIG splits GPU(s) {', '.join(map(str, on))}", ev
            )
        ]
    return [
        r.finding(
            "warn", f"MIG is enabled on GPU(s) {', '.join(map(str, on))}: vLLM sees slices, not GPUs", ev
        )
    ]
