"""Health rules: small pure functions from the health facts (``Snapshot.health``) to findings.

Each rule has a stable id (HLT-…), reads only the facts, and when a source could not be read says
what could not be checked and how to check it by hand, instead of passing silently.
"""

from __future__ import annotations

from collections.abc import Callable

from vllm_medic.collect.health import fabric as fabric_mod
from vllm_medic.collect.health.xid import DOCS_URL as XID_DOCS
from vllm_medic.collect.health.xid import XidGroup, group_events, group_severity
from vllm_medic.model import Category, Finding, Severity
from vllm_medic.snapshot import Snapshot
from vllm_medic.snapshot_health import (
    CgroupMemory,
    DockerError,
    FabricFacts,
    FabricGpu,
    FmMismatch,
    HealthFacts,
    InImageFacts,
    InImageSmi,
    InImageVersions,
    LimitsFacts,
    ServiceState,
    SmiSummary,
    UlimitFacts,
    XidFacts,
)

GIB = 1024**3
MIB = 1024**2

#: Docker's default /dev/shm without --ipc=host or --shm-size.
DOCKER_DEFAULT_SHM = 64 * MIB
#: Below this, NCCL's SHM transport and vLLM's shared-memory message queue run out with several GPUs.
SHM_MIN_MULTI_GPU = 1 * GIB
#: RDMA memory registration needs far more than the usual 64 KiB/8 MiB default; NCCL asks for unlimited.
MEMLOCK_MIN_RDMA = 1 * GIB
NOFILE_MIN = 65535
#: Resident CPU memory per vLLM worker process besides swap/offload (python, CUDA context, pinned buffers).
WORKER_BASELINE_BYTES = 4 * GIB
#: vLLM's historical --swap-space default, in GiB per GPU worker.
DEFAULT_SWAP_SPACE_GIB = 4.0

DOCS_FM = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html"
DOCS_IMEX = "https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/overview.html"
DOCS_DOCKER_SHM = "https://docs.docker.com/reference/cli/docker/container/run/#ipc"
DOCS_NCCL_TROUBLE = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"
DOCS_CUDA_COMPAT = "https://docs.nvidia.com/deploy/cuda-compatibility/"

Rule = Callable[[Snapshot, HealthFacts], list[Finding]]


def _gib(n: int | float | None) -> str:
    if n is None:
        return "unlimited"
    if n < GIB:
        return f"{n / MIB:.0f} MiB"
    return f"{n / GIB:.1f} GiB"


def _world_size(snap: Snapshot) -> int | None:
    args = snap.launch.args or {}
    tp = args.get("tensor_parallel_size") or 1
    pp = args.get("pipeline_parallel_size") or 1
    try:
        size = int(tp) * int(pp)
    except (TypeError, ValueError):
        return None
    if args.get("tensor_parallel_size") is None and args.get("pipeline_parallel_size") is None:
        return len(snap.gpus) or None
    return size


def _env(snap: Snapshot, health: HealthFacts) -> dict[str, str]:
    env = dict(snap.env or {})
    env.update(snap.launch.env or {})
    env.update(health.env or {})
    return env


# ---------------------------------------------------------------- GPU faults (Xid)


def rule_xid(snap: Snapshot, health: HealthFacts) -> list[Finding]:
    xid = health.xid
    if xid is None:
        return []
    if not xid.readable:
        tried = [f"{a.source}: {a.kind} - {a.message}" for a in xid.attempts]
        return [
            Finding(
                "HLT-XID000",
                Severity.NOT_CHECKED,
                Category.DRIVER_CUDA,
                "Kernel log not readable: GPU faults (Xid) not checked",
                tried or ["no kernel log source was given"],
                [xid.how_to_check or "Read the host's kernel log as root and grep for `NVRM: Xid`."],
                [XID_DOCS],
            )
        ]
    events = xid.events
    cut = _partial_log(snap)
    if not events and cut:
        return [
            Finding(
                "HLT-XID000",
                Severity.NOT_CHECKED,
                Category.DRIVER_CUDA,
                "No Xid in a partial kernel log: GPU faults not checked",
                [f"{xid.source}: {_lines(xid)} lines scanned", cut],
                [xid.how_to_check or "Capture the whole kernel log: `sudo dmesg -T > dmesg.txt`."],
                [XID_DOCS],
            )
        ]
    if not events:
        return [
            Finding(
                "HLT-XID000",
                Severity.PASS,
                Category.DRIVER_CUDA,
                "No NVIDIA Xid events in the kernel log",
                [f"{xid.source}: {_lines(xid)} lines scanned, no `NVRM: Xid` / fallen-off-the-bus line"],
            )
        ]
    return [_xid_group_finding(g, xid, xid.events_total, len(events)) for g in group_events(events)]


def _lines(xid: XidFacts) -> str:
    return "?" if xid.lines is None else str(xid.lines)


def _xid_group_finding(g: XidGroup, xid: XidFacts, total: int | None, n_events: int) -> Finding:
    """One finding per Xid id and GPU: the first line, how many, which processes, NVIDIA's resolution."""
    info = g.info
    sev = Severity(group_severity(g))
    name = f"{info.description} ({info.mnemonic})" if info else "not in this tool's Xid catalogue"
    cat = Category.NCCL_NETWORK if info and info.category == "nvlink" else Category.DRIVER_CUDA
    where = f"{xid.source} line {g.first.line_no}"
    ev = [f"{where}: {g.first.line}"]
    if g.count > 1:
        ev.append(f"{g.count} events on GPU {g.pci}; last at line {g.last.line_no}: {g.last.line}")
    if g.processes:
        ev.append(f"processes: {', '.join(g.processes[:6])}")
    if total:
        ev.append(f"{total} Xid events in the log; counts above are over the first {n_events}")
    if info:
        ev.append(
            f"NVIDIA resolution: immediate {info.nvidia_immediate or '-'}, investigatory {info.nvidia_investigatory or '-'}"
        )
    fix = (
        [info.action]
        if info
        else [f"Look Xid {g.xid} up in NVIDIA's catalogue and follow its resolution bucket."]
    )
    if info and info.explains_cuda_error:
        fix.append(
            "A hardware/driver fault explains a `CUDA error` or NCCL `unhandled cuda error` in vLLM's log "
            "at the same time: deal with this GPU before any software theory."
        )
    return Finding(
        f"HLT-XID{g.xid:03d}",
        sev,
        cat,
        f"Xid {g.xid} on GPU {g.pci}: {name}",
        ev,
        fix,
        [XID_DOCS],
    )


def _partial_log(snap: Snapshot) -> str | None:
    """Why the captured kernel log cannot show the absence of an Xid (an excerpt, a grep), or None."""
    for source in ("dmesg", "journalctl-k"):
        if source in snap.partial:
            return f"{source}: partial: {snap.partial[source]}"
    return None


# ---------------------------------------------------------------- fabric


def rule_fabric(snap: Snapshot, health: HealthFacts) -> list[Finding]:
    fab = health.fabric
    if fab is None:
        if not any(g.fabric_state for g in snap.gpus):
            return []
        fab = FabricFacts()
    gpus = _fabric_gpus(snap, fab)
    kind = fabric_mod.system_kind(gpus)
    fm = fab.fabric_manager or ServiceState()
    out: list[Finding] = []
    if not gpus:
        out.append(
            Finding(
                "HLT-FAB000",
                Severity.NOT_CHECKED,
                Category.DRIVER_CUDA,
                "Fabric state not checked: no `nvidia-smi -q` output",
                [fab.nvidia_smi_q_error or "nvidia-smi -q was not captured"],
                [
                    "Run `nvidia-smi -q | grep -A 4 Fabric` on the host: every GPU of an NVSwitch/NVL system must show "
                    "State Completed / Status Success."
                ],
                [DOCS_FM],
            )
        )
        return out
    bad = _unregistered(gpus)
    fm_state = fm.state
    mismatch = fm.fm_version_mismatch
    out.extend(_fab_unregistered(bad, fm, fm_state, mismatch))
    out.extend(_fab_manager_version(mismatch, fm_state))
    if kind == "nvswitch":
        out.extend(_fab_manager_service(gpus, fm, fm_state, bad))
    if kind == "nvl" and fabric_mod.is_multi_node_nvlink(gpus):
        out.extend(_rule_imex(snap, health, fab, gpus))
    if not out:
        out.extend(_fab_all_registered(gpus, kind, fm_state))
    return out


def _fabric_gpus(snap: Snapshot, fab: FabricFacts) -> list[FabricGpu]:
    """Each GPU's fabric fields: from the health probe's `nvidia-smi -q`, else what collect read."""
    gpus = fab.nvidia_smi_q.gpus if fab.nvidia_smi_q else []
    if not gpus and any(g.fabric_state for g in snap.gpus):
        # collect already read the fabric state (nvidia-smi -q -x / NVML) into the snapshot
        gpus = [
            FabricGpu(
                bus_id=g.bus_id or str(g.index),
                product=g.name,
                fabric_state=g.fabric_state,
                fabric_status=g.fabric_status,
            )
            for g in snap.gpus
        ]
    return gpus


def _unregistered(gpus: list[FabricGpu]) -> list[FabricGpu]:
    """GPUs on a fabric whose registration is not Completed/Success."""
    return [
        g
        for g in gpus
        if g.fabric_state not in (None, "N/A", "Not Supported")
        and not (g.fabric_state == "Completed" and g.fabric_status in ("Success", None))
    ]


def _fab_unregistered(
    bad: list[FabricGpu], fm: ServiceState, fm_state: str, mismatch: FmMismatch | None
) -> list[Finding]:
    """HLT-FAB001: GPUs whose fabric registration did not complete."""
    out: list[Finding] = []
    if bad:
        ev = [
            f"GPU {g.bus_id} ({g.product or '?'}): Fabric State {g.fabric_state}, Status {g.fabric_status}"
            for g in bad[:8]
        ]
        ev.append(f"nvidia-fabricmanager: {fm_state}" + (f" ({fm.detail})" if fm.detail else ""))
        if mismatch and mismatch.line not in (fm.detail or ""):
            ev.append(mismatch.line)
        out.append(
            Finding(
                "HLT-FAB001",
                Severity.FAIL,
                Category.DRIVER_CUDA,
                "GPUs are not registered with the NVLink fabric: CUDA init fails with error 802 'system not yet initialized'",
                ev,
                [
                    "Start Fabric Manager and make it start at boot: `systemctl enable --now nvidia-fabricmanager`; "
                    "its version must equal the driver's exactly.",
                    "On HGX/DGX B200/B300 (NVLink 5) install and run NVLSM with it (nvidia-fabricmanager-start.sh).",
                    "Re-check with `nvidia-smi -q | grep -A 3 Fabric` (State Completed, Status Success) before starting vLLM.",
                ],
                [DOCS_FM],
            )
        )
    return out


def _fab_manager_version(mismatch: FmMismatch | None, fm_state: str) -> list[Finding]:
    """HLT-FAB002: Fabric Manager's version equals the driver's."""
    out: list[Finding] = []
    if mismatch:
        out.append(
            Finding(
                "HLT-FAB002",
                Severity.FAIL,
                Category.DRIVER_CUDA,
                f"Fabric Manager {mismatch.fabric_manager} does not match driver {mismatch.driver}",
                [mismatch.line, f"nvidia-fabricmanager: {fm_state}"],
                [
                    f"Install nvidia-fabricmanager of exactly the driver's version ({mismatch.driver}) and hold both "
                    "packages together (`apt-mark hold`), then `systemctl restart nvidia-fabricmanager`."
                ],
                [DOCS_FM],
            )
        )
    return out


def _fab_manager_service(
    gpus: list[FabricGpu], fm: ServiceState, fm_state: str, bad: list[FabricGpu]
) -> list[Finding]:
    """HLT-FAB003: on an NVSwitch system, Fabric Manager runs (so the fabric survives a reset)."""
    out: list[Finding] = []
    if fm_state in ("no_systemd", "unknown") and not bad:
        out.append(
            Finding(
                "HLT-FAB003",
                Severity.NOT_CHECKED,
                Category.DRIVER_CUDA,
                "Fabric Manager service state not checked",
                [
                    fm.detail
                    or "no `systemctl` answer (not captured, or no systemd here - e.g. inside a container)"
                ],
                ["On the host: `systemctl is-active nvidia-fabricmanager` must print `active`."],
                [DOCS_FM],
            )
        )
    elif fm_state in ("inactive", "failed", "not_found") and not bad:
        out.append(
            Finding(
                "HLT-FAB003",
                Severity.WARN,
                Category.DRIVER_CUDA,
                f"Fabric Manager is {fm_state} on an NVSwitch system",
                [
                    f"nvidia-fabricmanager: {fm_state} ({fm.detail})",
                    f"{len(gpus)} GPU(s): {gpus[0].product}; fabric state {gpus[0].fabric_state}",
                ],
                [
                    "The fabric stays registered until the next reboot or GPU reset; enable the service "
                    "(`systemctl enable --now nvidia-fabricmanager`) so it survives one."
                ],
                [DOCS_FM],
            )
        )
    return out


def _fab_all_registered(gpus: list[FabricGpu], kind: str, fm_state: str) -> list[Finding]:
    """HLT-FAB000 when nothing else spoke: every GPU registered, or no fabric to register with."""
    out: list[Finding] = []
    states = sorted({f"{g.fabric_state}/{g.fabric_status}" for g in gpus})
    out.append(
        Finding(
            "HLT-FAB000",
            Severity.PASS if kind in ("nvswitch", "nvl") else Severity.INFO,
            Category.DRIVER_CUDA,
            f"Every GPU registered with the NVLink fabric ({', '.join(states)})"
            if kind in ("nvswitch", "nvl")
            else "No NVSwitch fabric on these GPUs: nothing to register",
            [
                f"{len(gpus)} GPU(s) ({gpus[0].product}), system kind {kind}; fabric {', '.join(states)}; "
                f"fabric manager {fm_state}"
            ],
        )
    )
    return out


def _rule_imex(snap: Snapshot, health: HealthFacts, fab: FabricFacts, gpus: list[FabricGpu]) -> list[Finding]:
    out: list[Finding] = []
    imex = fab.imex or ServiceState()
    state = imex.state
    clusters = sorted({str(g.cluster_uuid) for g in gpus if g.cluster_uuid})
    cliques = sorted({str(g.clique_id) for g in gpus if g.clique_id is not None})
    base_ev = [f"ClusterUUID {', '.join(clusters)}; CliqueId {', '.join(cliques)}"]
    if state not in ("active",):
        sev = Severity.NOT_CHECKED if state in ("unknown", "no_systemd") else Severity.FAIL
        out.append(
            Finding(
                "HLT-FAB004",
                sev,
                Category.NCCL_NETWORK,
                "IMEX service not active on a multi-node NVLink system"
                if sev is Severity.FAIL
                else "IMEX service state not checked",
                base_ev
                + [
                    f"nvidia-imex: {state}" + (f" ({imex.detail})" if imex.detail else ""),
                    f"/etc/nvidia-imex/nodes_config.cfg: {fab.imex_nodes_config or 'not checked'}",
                ],
                [
                    "List every node's IP in /etc/nvidia-imex/nodes_config.cfg (same file on all nodes), then "
                    "`systemctl enable --now nvidia-imex` and check `nvidia-imex-ctl -N`."
                ],
                [DOCS_IMEX],
            )
        )
    channels = fab.imex_channels
    if channels is not None and not channels:
        out.append(
            Finding(
                "HLT-FAB005",
                Severity.FAIL,
                Category.NCCL_NETWORK,
                "No IMEX channel device: cross-node NVLink memory cannot be imported",
                base_ev + ["/dev/nvidia-caps-imex-channels/ has no channel0"],
                [
                    "Create the channel on the host (`nvidia-modprobe -i 0:1` or the driver's NVreg_CreateImexChannel0=1) "
                    "and pass `/dev/nvidia-caps-imex-channels` into the container."
                ],
                [DOCS_IMEX],
            )
        )
    env = _env(snap, health)
    wanted = {"NCCL_MNNVL_ENABLE": "1", "NCCL_CUMEM_ENABLE": "1", "NCCL_NVLS_ENABLE": "1"}
    missing = [f"{k}={env.get(k, '<unset>')}" for k, v in wanted.items() if env.get(k) != v]
    if missing:
        out.append(
            Finding(
                "HLT-FAB006",
                Severity.WARN,
                Category.NCCL_NETWORK,
                "MNNVL system without the NCCL settings the recipe recommends",
                base_ev + [", ".join(missing)],
                [
                    "Add `NCCL_MNNVL_ENABLE=1 NCCL_CUMEM_ENABLE=1 NCCL_NVLS_ENABLE=1` to the launch environment "
                    "(K3 recipe, GB200/GB300 NVL)."
                ],
                ["https://github.com/vllm-project/recipes"],
            )
        )
    return out


# ---------------------------------------------------------------- container limits


def rule_limits(snap: Snapshot, health: HealthFacts) -> list[Finding]:
    lim = health.limits
    if lim is None:
        return []
    ul = lim.ulimit or UlimitFacts()
    return [*_shm_size(snap, lim), *_memlock(snap, ul), *_open_files(ul), *_cgroup_memory(snap, lim)]


def _shm_size(snap: Snapshot, lim: LimitsFacts) -> list[Finding]:
    """HLT-LIM001: /dev/shm big enough for NCCL's shared-memory transport between local ranks."""
    out: list[Finding] = []
    world = _world_size(snap)
    multi = world is None or world > 1
    shm = lim.shm.size_bytes if lim.shm else None
    if lim.shm is not None and shm is None:
        out.append(
            Finding(
                "HLT-LIM001",
                Severity.NOT_CHECKED,
                Category.NCCL_NETWORK,
                "/dev/shm size not checked: it could not be read",
                [str(lim.shm.error or lim.shm.unparsed or "no value")],
                ["Inside the container: `df -h /dev/shm`."],
                [DOCS_DOCKER_SHM],
            )
        )
    elif shm is not None and shm < SHM_MIN_MULTI_GPU:
        default = " (Docker's default without --ipc=host or --shm-size)" if shm <= DOCKER_DEFAULT_SHM else ""
        out.append(
            Finding(
                "HLT-LIM001",
                Severity.FAIL if multi else Severity.WARN,
                Category.NCCL_NETWORK,
                f"/dev/shm is only {_gib(shm)}{default}",
                [
                    f"/dev/shm size {_gib(shm)}; world size {world if world else 'unknown'}",
                    "symptoms: NCCL `Error while creating shared memory segment` / `posix_fallocate failed`, "
                    "`Bus error (core dumped)` in workers",
                ],
                [
                    "Run the container with `--ipc=host` (what vLLM's docs use) or `--shm-size=16g`; on Kubernetes mount an "
                    "`emptyDir: {medium: Memory}` at /dev/shm."
                ],
                [DOCS_DOCKER_SHM],
            )
        )
    elif shm is not None:
        out.append(
            Finding(
                "HLT-LIM001",
                Severity.PASS,
                Category.NCCL_NETWORK,
                f"/dev/shm is {_gib(shm)}",
                [f"/dev/shm {_gib(shm)}"],
            )
        )
    return out


def _memlock(snap: Snapshot, ul: UlimitFacts) -> list[Finding]:
    """HLT-LIM002: the locked-memory limit RDMA registration needs."""
    out: list[Finding] = []
    rdma = bool(snap.rdma)
    if ul.memlock_bytes is not None:
        ml = ul.memlock_bytes.value
        if ml is not None and ml < MEMLOCK_MIN_RDMA:
            out.append(
                Finding(
                    "HLT-LIM002",
                    Severity.FAIL if rdma else Severity.INFO,
                    Category.NCCL_NETWORK,
                    f"Locked-memory limit (ulimit -l) is {_gib(ml)}"
                    + (" on a host with RDMA devices" if rdma else ""),
                    [
                        f"ulimit -l = {ml // 1024} KiB",
                        f"RDMA devices: {', '.join(p.ib_dev for p in snap.rdma) or ('present' if rdma else 'none seen')}",
                        "symptom: NCCL WARN `Call to ibv_reg_mr failed with error Cannot allocate memory`",
                    ],
                    [
                        "Run the container with `--ulimit memlock=-1` (and `--cap-add IPC_LOCK`); on bare metal set "
                        "`* - memlock unlimited` in /etc/security/limits.conf or LimitMEMLOCK=infinity in the unit."
                    ],
                    [DOCS_NCCL_TROUBLE],
                )
            )
        else:
            out.append(
                Finding(
                    "HLT-LIM002",
                    Severity.PASS,
                    Category.NCCL_NETWORK,
                    f"Locked-memory limit is {_gib(ml)}",
                    [f"ulimit -l = {'unlimited' if ml is None else ml // 1024}"],
                )
            )
    return out


def _open_files(ul: UlimitFacts) -> list[Finding]:
    """HLT-LIM003: enough file descriptors for connections and NCCL/ZMQ sockets."""
    out: list[Finding] = []
    if ul.nofile is not None:
        nf = ul.nofile.value
        hard = ul.nofile_hard.value if ul.nofile_hard is not None else nf
        best = hard if hard is None or (nf is not None and hard > nf) else nf
        if best is not None and best < NOFILE_MIN:
            out.append(
                Finding(
                    "HLT-LIM003",
                    Severity.WARN,
                    Category.OTHER,
                    f"Open-files limit (ulimit -n) is {best}",
                    [f"ulimit -n soft {nf}, hard {hard}"],
                    [
                        "Raise it to at least 65535 (`--ulimit nofile=1048576:1048576`): the API server needs a descriptor "
                        "per connection and NCCL/ZMQ open many sockets per rank."
                    ],
                )
            )
    return out


def _cgroup_memory(snap: Snapshot, lim: LimitsFacts) -> list[Finding]:
    """HLT-LIM004: the container memory limit against the CPU memory vLLM needs."""
    out: list[Finding] = []
    cg = lim.cgroup_memory or CgroupMemory()
    if cg.known and cg.limit_bytes is None:
        out.append(
            Finding(
                "HLT-LIM004",
                Severity.PASS,
                Category.OOM_STARTUP,
                "No container memory limit (cgroup)",
                ["cgroup memory limit: max (unlimited)"],
            )
        )
    if cg.limit_bytes is not None:
        need, parts = cpu_memory_need(snap)
        limit = cg.limit_bytes
        if limit < need:
            out.append(
                Finding(
                    "HLT-LIM004",
                    Severity.FAIL,
                    Category.OOM_STARTUP,
                    f"Container memory limit {_gib(limit)} is below the CPU memory vLLM needs (~{_gib(need)})",
                    [
                        f"cgroup memory limit {_gib(limit)}",
                        "estimate: " + "; ".join(parts),
                        "symptom: workers SIGKILLed by the OOM killer during weight loading (exit code -9 / 137)",
                    ],
                    [
                        "Raise the container/pod memory limit (or remove it), or lower --swap-space / --cpu-offload-gb / "
                        "VLLM_CPU_KVCACHE_SPACE; check `dmesg | grep -i 'killed process'` for OOM kills."
                    ],
                )
            )
        else:
            out.append(
                Finding(
                    "HLT-LIM004",
                    Severity.PASS,
                    Category.OOM_STARTUP,
                    f"Container memory limit {_gib(limit)} covers the estimated need (~{_gib(need)})",
                    ["estimate: " + "; ".join(parts)],
                )
            )
    return out


def cpu_memory_need(snap: Snapshot) -> tuple[int, list[str]]:
    """Estimated CPU memory for one node's vLLM: per-worker baseline + swap space + CPU offload + CPU KV cache."""
    args = snap.launch.args or {}
    workers = _world_size(snap) or 1
    swap = args.get("swap_space")
    try:
        swap_gib = float(swap) if swap is not None else DEFAULT_SWAP_SPACE_GIB
    except (TypeError, ValueError):
        swap_gib = DEFAULT_SWAP_SPACE_GIB
    try:
        offload_gib = float(args.get("cpu_offload_gb") or 0)
    except (TypeError, ValueError):
        offload_gib = 0.0
    env = _env(snap, HealthFacts())
    try:
        kv_gib = float(env.get("VLLM_CPU_KVCACHE_SPACE") or 0)
    except ValueError:
        kv_gib = 0.0
    parts = [
        f"{workers} worker(s) x {_gib(WORKER_BASELINE_BYTES)} baseline",
        f"swap space {swap_gib:g} GiB x {workers}" + ("" if swap is not None else " (vLLM default)"),
    ]
    total = workers * WORKER_BASELINE_BYTES + int(swap_gib * GIB) * workers
    if offload_gib:
        parts.append(f"cpu offload {offload_gib:g} GiB x {workers}")
        total += int(offload_gib * GIB) * workers
    if kv_gib:
        parts.append(f"VLLM_CPU_KVCACHE_SPACE {kv_gib:g} GiB")
        total += int(kv_gib * GIB)
    return total, parts


# ---------------------------------------------------------------- inside the image


def rule_in_image(snap: Snapshot, health: HealthFacts) -> list[Finding]:
    img = health.in_image
    if img is None:
        return []
    name = img.image or snap.image.tag or "the image"
    smi = img.nvidia_smi
    versions = img.versions if img.versions is not None and img.versions.reported() else None
    host = health.host_gpu or SmiSummary()
    host_driver = snap.driver.version or host.driver_version
    host_count = len(snap.gpus) or host.gpu_count
    return [
        *_img_nvidia_smi(img, name, smi, host_driver),
        *_img_driver_vs_cuda(snap, versions, smi, host_driver),
        *_img_gpu_count(smi, host_count),
        *_img_torch_sees_gpus(name, smi, versions),
        *_img_one_cuda_line(img),
        *_img_versions(snap, host, img, name, versions, host_driver, host_count),
    ]


def _shown(value: str | None) -> str:
    """A version the probe may not have reported, as the evidence has always printed it."""
    return "?" if value is None else value


def _img_nvidia_smi(
    img: InImageFacts, name: str, smi: InImageSmi | None, host_driver: str | None
) -> list[Finding]:
    """HLT-IMG001: `nvidia-smi` inside the image failed; the fix depends on how."""
    out: list[Finding] = []
    if smi is not None and not smi.ok:
        err = smi.error or DockerError("unknown", "")
        kind = err.kind
        fixes = {
            "cuda_requirement": [
                f"The image needs CUDA >= {err.required_cuda}: upgrade the host driver "
                "(CUDA 13 images need r580+), or use an image built for the installed driver's CUDA."
            ],
            "no_gpu_runtime": [
                "Install/configure the NVIDIA Container Toolkit (`nvidia-ctk runtime configure --runtime=docker`, "
                "restart dockerd), then re-run `docker run --rm --gpus all --entrypoint nvidia-smi IMAGE`."
            ],
            "no_nvidia_runtime": [
                "Install the NVIDIA Container Toolkit and register the runtime with Docker."
            ],
            "driver_not_loaded": ["Load the NVIDIA driver on the host (`nvidia-smi` must work there first)."],
            "image_missing": [
                "The tag does not exist or cannot be pulled: check the exact tag/digest (never rename another "
                "CUDA tag) and `docker login` for private registries."
            ],
            "daemon_unreachable": [
                "Start dockerd or point DOCKER_HOST at it; the in-image checks need a Docker engine."
            ],
        }.get(
            kind,
            ["Run `docker run --rm --gpus all --entrypoint nvidia-smi IMAGE` by hand and read its error."],
        )
        out.append(
            Finding(
                "HLT-IMG001",
                Severity.FAIL,
                Category.DRIVER_CUDA if kind != "image_missing" else Category.IMAGE_DEPENDENCY,
                f"The container cannot see the GPUs: `nvidia-smi` failed inside {name}",
                [
                    _probe_status(img, "nvidia-smi", "docker run … nvidia-smi"),
                    f"{kind}: {err.line}",
                ]
                + ([f"host driver {host_driver}"] if host_driver else []),
                fixes,
                [DOCS_CUDA_COMPAT],
            )
        )
    return out


def _probe_status(img: InImageFacts, probe: str, default: str) -> str:
    run = (img.probes or {}).get(probe)
    return run.status if run is not None else default


def _img_driver_vs_cuda(
    snap: Snapshot, versions: InImageVersions | None, smi: InImageSmi | None, host_driver: str | None
) -> list[Finding]:
    """HLT-IMG002: the driver the container sees against the CUDA torch in the image was built for."""
    out: list[Finding] = []
    from vllm_medic.recipes.cuda import family_floor, native_requirement
    from vllm_medic.recipes.versions import version_lt

    image_cuda = (versions.torch_cuda if versions else None) or snap.image.cuda_version
    driver_in_container = (smi.driver_version if smi else None) or host_driver
    if image_cuda and driver_in_container:
        floor = family_floor(image_cuda)
        native = native_requirement(image_cuda)
        ev = [
            f"in-image CUDA {image_cuda} (torch.version.cuda)",
            f"driver {driver_in_container} (max CUDA {(smi.cuda_version if smi else None) or '?'})",
        ]
        if floor and version_lt(driver_in_container, floor.min_driver):
            out.append(
                Finding(
                    "HLT-IMG002",
                    Severity.FAIL,
                    Category.DRIVER_CUDA,
                    f"Host driver {driver_in_container} is too old for the image's CUDA {image_cuda}",
                    ev + [f"CUDA {floor.cuda} needs driver >= {floor.min_driver} ({floor.source})"],
                    [
                        f"Upgrade the host driver to >= {native.min_driver if native else floor.min_driver} "
                        "(installing a CUDA toolkit does not upgrade the driver), then re-run nvidia-smi inside the container.",
                        "Or use an image built for the driver's CUDA and record torch/CUDA/vLLM versions.",
                    ],
                    [DOCS_CUDA_COMPAT],
                )
            )
        elif native and version_lt(driver_in_container, native.min_driver):
            out.append(
                Finding(
                    "HLT-IMG002",
                    Severity.WARN,
                    Category.DRIVER_CUDA,
                    f"Driver {driver_in_container} runs CUDA {image_cuda} only through minor-version compatibility",
                    ev + [f"CUDA {native.cuda} native minimum {native.min_driver} ({native.release})"],
                    [
                        "Works for most kernels; PTX JIT and some new APIs fail. Upgrade the driver to "
                        f">= {native.min_driver} for a supported combination."
                    ],
                    [DOCS_CUDA_COMPAT],
                )
            )
        else:
            out.append(
                Finding(
                    "HLT-IMG002",
                    Severity.PASS,
                    Category.DRIVER_CUDA,
                    f"Driver {driver_in_container} supports the image's CUDA {image_cuda}",
                    ev,
                )
            )
    return out


def _img_gpu_count(smi: InImageSmi | None, host_count: int | None) -> list[Finding]:
    """HLT-IMG003: the container sees every GPU the host has."""
    out: list[Finding] = []
    seen = smi.gpu_count if smi is not None and smi.ok else None
    if host_count and seen is not None:
        if seen < host_count:
            out.append(
                Finding(
                    "HLT-IMG003",
                    Severity.FAIL,
                    Category.OOM_STARTUP,
                    f"The container sees {seen} of the host's {host_count} GPUs",
                    [f"host: {host_count} GPU(s); `docker run --gpus all … nvidia-smi`: {seen}"],
                    [
                        "Check CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES and the --gpus/device request; a GPU missing "
                        "from the host's view too points at Xid 79 / hardware (see the Xid findings)."
                    ],
                )
            )
        else:
            out.append(
                Finding(
                    "HLT-IMG003",
                    Severity.PASS,
                    Category.OOM_STARTUP,
                    f"The container sees all {seen} GPUs",
                    [f"host {host_count}, container {seen}"],
                )
            )
    return out


def _img_torch_sees_gpus(
    name: str, smi: InImageSmi | None, versions: InImageVersions | None
) -> list[Finding]:
    """HLT-IMG006: torch in the image can use the GPUs nvidia-smi shows there."""
    out: list[Finding] = []
    if (
        versions is not None
        and smi is not None
        and smi.ok
        and (versions.cuda_available is False or versions.device_count == 0)
    ):
        out.append(
            Finding(
                "HLT-IMG006",
                Severity.FAIL,
                Category.DRIVER_CUDA,
                f"torch inside {name} cannot use the GPUs that nvidia-smi shows",
                [
                    f"torch.cuda.is_available() = {versions.cuda_available}, device_count = {versions.device_count}",
                    f"torch {_shown(versions.torch)} built for CUDA {versions.torch_cuda_shown()}; "
                    f"driver {smi.driver_version} (max CUDA {smi.cuda_version}); nvidia-smi sees {smi.gpu_count} GPU(s)",
                ],
                [
                    "A torch CUDA newer than the driver supports, or CUDA_VISIBLE_DEVICES/NVIDIA_VISIBLE_DEVICES hiding the GPUs: "
                    "compare torch.version.cuda with the driver's CUDA, and run "
                    "`docker run --rm --gpus all --entrypoint python3 IMAGE -c 'import torch; torch.cuda.init()'` to see the error."
                ],
                [DOCS_CUDA_COMPAT],
            )
        )
    return out


def _img_one_cuda_line(img: InImageFacts) -> list[Finding]:
    """HLT-IMG004: the image's CUDA user-space libraries come from one CUDA major."""
    out: list[Finding] = []
    fams = img.cuda_userspace or {}
    if len([f for f in fams if f in ("12", "13")]) > 1:
        out.append(
            Finding(
                "HLT-IMG004",
                Severity.FAIL,
                Category.IMAGE_DEPENDENCY,
                "The image mixes CUDA 12.x and 13.x user-space libraries",
                [
                    f"CUDA {fam}: {', '.join(pkgs[:5])}{' …' if len(pkgs) > 5 else ''}"
                    for fam, pkgs in sorted(fams.items())
                ],
                [
                    "Rebuild from one CUDA line (the K3 image is CUDA 13 only): remove the other family's nvidia-*-cuXX "
                    "wheels, reinstall torch/vLLM/FlashInfer from the same index, and re-run the whole launch - "
                    "`import vllm` working proves nothing."
                ],
            )
        )
    return out


def _img_versions(
    snap: Snapshot,
    host: SmiSummary,
    img: InImageFacts,
    name: str,
    versions: InImageVersions | None,
    host_driver: str | None,
    host_count: int | None,
) -> list[Finding]:
    """HLT-IMG005: the versions inside the image next to the host's, or why they could not be read."""
    out: list[Finding] = []
    if versions is not None:
        v = versions
        rows = [
            f"vLLM {_shown(v.vllm)}; torch {_shown(v.torch)} (CUDA {v.torch_cuda_shown()}); "
            f"NCCL {v.nccl or v.nccl_cu13 or v.nccl_cu12 or '?'}; "
            f"FlashInfer {v.flashinfer_python or v.flashinfer or '-'}",
            f"host: driver {host_driver or '?'}, max CUDA {snap.driver.cuda_version or host.cuda_version or '?'}, "
            f"{host_count or '?'} GPU(s); host vLLM {snap.vllm.version or '-'}",
        ]
        if v.torch_error:
            rows.append(f"torch import failed in the image: {v.torch_error}")
        out.append(
            Finding("HLT-IMG005", Severity.INFO, Category.IMAGE_DEPENDENCY, f"Versions inside {name}", rows)
        )
    elif img.versions_error is not None:
        e = img.versions_error
        out.append(
            Finding(
                "HLT-IMG005",
                Severity.WARN,
                Category.IMAGE_DEPENDENCY,
                f"Could not read the versions inside {name}",
                [f"{e.kind}: {e.line}"],
                [
                    "Run `docker run --rm --entrypoint python3 IMAGE -c 'import vllm, torch; print(vllm.__version__, "
                    "torch.__version__, torch.version.cuda)'` by hand."
                ],
            )
        )
    return out


HEALTH_RULES: list[tuple[str, Rule]] = [
    ("HLT-XID", rule_xid),
    ("HLT-FAB", rule_fabric),
    ("HLT-LIM", rule_limits),
    ("HLT-IMG", rule_in_image),
]


def run_health_rules(snap: Snapshot) -> list[Finding]:
    health = snap.health
    out: list[Finding] = []
    for _prefix, rule in HEALTH_RULES:
        out.extend(rule(snap, health))
    return out
