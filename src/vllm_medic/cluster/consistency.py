"""Cross-node consistency: the faults the method fears most only show when nodes are compared.

Pure functions over ``{node name: Snapshot}``: which facts must be equal on every node, the table of
what differs by node, and the findings (one per differing fact) in the method's order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from vllm_medic.collect.env_vocabulary import MUST_MATCH_ACROSS_NODES
from vllm_medic.collect.parsers.residue import grep_shows
from vllm_medic.model import Category, Finding, Severity
from vllm_medic.snapshot import Snapshot

UNKNOWN = "(not collected)"
PARTIAL = "(partial"

CHECKED_MODULES = (
    "nvidia",
    "nvidia_uvm",
    "nvidia_peermem",
    "nv_peer_mem",
    "mlx5_core",
    "mlx5_ib",
    "ib_core",
    "gdrdrv",
)


@dataclass(frozen=True)
class Fact:
    id: str
    name: str
    category: Category
    severity: Severity
    read: Callable[[Snapshot], str | None]
    fix: tuple[str, ...]
    # sources whose partial capture (a grep, a cut table) makes the value unknown, not different
    sources: tuple[str, ...] = ()

    def value(self, s: Snapshot) -> str:
        cut = [src for src in self.sources if src in s.partial]
        if cut:
            return f"{PARTIAL} {cut[0]}: {s.partial[cut[0]]})"
        return self.read(s) or UNKNOWN


def _pkg(*names: str) -> Callable[[Snapshot], str | None]:
    def read(s: Snapshot) -> str | None:
        for n in names:
            v = s.python.packages.get(n)
            if v:
                return f"{n}=={v}"
        return None

    return read


def _nccl(s: Snapshot) -> str | None:
    if s.python.nccl_version:
        return s.python.nccl_version
    for n in ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11"):
        if n in s.python.packages:
            return f"{n}=={s.python.packages[n]}"
    return s.image.env.get("NCCL_VERSION") or s.env.get("NCCL_VERSION")


def _gpus(s: Snapshot) -> str | None:
    if not s.gpus:
        return None
    names = sorted({g.name for g in s.gpus})
    return f"{len(s.gpus)}x {'/'.join(names)}"


def _rdma_up(s: Snapshot) -> str | None:
    if not s.rdma:
        return None
    up = sorted(f"{p.ib_dev}:{p.port}" for p in s.rdma if (p.state or "").lower() in ("up", "active"))
    return ",".join(up) or "(none up)"


MODULES_FACT = "GPU/RDMA kernel modules"
MODULES_FIX = (
    "Load the same modules on every node: `modprobe nvidia_peermem` (GPUDirect RDMA), `mlx5_core`/`mlx5_ib`",
    "Re-check `lsmod | grep -E 'mlx5|nvidia_peermem'` on each node, then the NCCL init log",
)


def _grep_command(s: Snapshot) -> str:
    """The `lsmod | grep X` a node's module list was captured through."""
    return s.lsmod_grep.commands[0] if s.lsmod_grep and s.lsmod_grep.commands else "lsmod | grep"


def _module_shown(s: Snapshot, module: str) -> bool | None:
    """Is ``module`` loaded on the node (True/False), or unknown (None): not captured, or captured through
    a filter that would have hidden it. `lsmod | grep nvidia` answers for nvidia_peermem, not for mlx5_ib."""
    if not s.kernel_modules:
        return None
    if "lsmod" in s.partial:
        commands = s.lsmod_grep.commands if s.lsmod_grep else []
        if module in s.kernel_modules:
            return True  # what a filter let through is there
        if len(commands) != 1 or not grep_shows(str(commands[0]), module):
            return None
    return module in s.kernel_modules


def _modules_value(s: Snapshot) -> str:
    if not s.kernel_modules:
        return UNKNOWN
    loaded = ",".join(m for m in CHECKED_MODULES if m in s.kernel_modules) or "(none of the GPU/RDMA modules)"
    if "lsmod" in s.partial:
        unknown = [m for m in CHECKED_MODULES if _module_shown(s, m) is None]
        return f"{PARTIAL} lsmod: {s.partial['lsmod']}) {loaded}" + (
            f"; not shown whether loaded: {','.join(unknown)}" if unknown else ""
        )
    return loaded


def _extra(key: str) -> Callable[[Snapshot], str | None]:
    def read(s: Snapshot) -> str | None:
        v = s.extra.get(key)
        return None if v in (None, "", {}) else str(v)

    return read


_UPGRADE_SAME = (
    "Install the same version on every node (one image, one driver branch), then re-run the whole launch"
)

FACTS: tuple[Fact, ...] = (
    Fact(
        "CLU001",
        "driver version",
        Category.DRIVER_CUDA,
        Severity.FAIL,
        lambda s: s.driver.version,
        (
            "Put every node on the same NVIDIA driver release (the recipe floor or newer)",
            "Reboot or reload the modules after the upgrade and re-run `nvidia-smi` in the container on each node",
        ),
    ),
    Fact(
        "CLU002",
        "driver CUDA version",
        Category.DRIVER_CUDA,
        Severity.FAIL,
        lambda s: s.driver.cuda_version,
        ("The driver's CUDA version follows the driver: align the driver release across nodes",),
    ),
    Fact(
        "CLU003",
        "image digest",
        Category.IMAGE_DEPENDENCY,
        Severity.FAIL,
        lambda s: s.image.digest or s.image.id,
        (
            "Pin the image by digest (`image@sha256:...`) in the launch on every node",
            "Pull that digest on every node; a floating tag resolves differently per pull",
        ),
    ),
    Fact(
        "CLU004",
        "vLLM version",
        Category.IMAGE_DEPENDENCY,
        Severity.FAIL,
        lambda s: s.vllm.raw or s.vllm.version,
        (_UPGRADE_SAME,),
    ),
    Fact(
        "CLU005",
        "torch version / CUDA build",
        Category.IMAGE_DEPENDENCY,
        Severity.FAIL,
        lambda s: (
            f"{s.python.torch.version} (cuda {s.python.torch.cuda})" if s.python.torch.version else None
        ),
        (_UPGRADE_SAME,),
    ),
    Fact(
        "CLU006",
        "NCCL version",
        Category.NCCL_NETWORK,
        Severity.FAIL,
        _nccl,
        (
            "Use one NCCL build on every rank (the one in the image); unset LD_LIBRARY_PATH overrides that load a host NCCL",
        ),
    ),
    Fact(
        "CLU007",
        "UCX version",
        Category.NCCL_NETWORK,
        Severity.FAIL,
        _pkg("ucx-py-cu12", "ucx-py-cu13", "libucx-cu12", "libucx-cu13"),
        (_UPGRADE_SAME,),
    ),
    Fact(
        "CLU008",
        "RDMA user-space libraries",
        Category.NCCL_NETWORK,
        Severity.FAIL,
        _extra("rdma_userspace"),
        ("Install the same MLNX_OFED / rdma-core release on every node (`ofed_info -s`)",),
    ),
    Fact(
        "CLU009",
        "GPUs",
        Category.PARALLEL_LAYOUT,
        Severity.FAIL,
        _gpus,
        (
            "Every node in one deployment needs the same GPU count and model; check `nvidia-smi -L` per node",
            "A node with fewer GPUs visible: check the container's `--gpus`/`NVIDIA_VISIBLE_DEVICES` and Xid in `dmesg`",
        ),
        ("nvidia-smi",),
    ),
    Fact(
        "CLU010",
        "RDMA ports up",
        Category.NCCL_NETWORK,
        Severity.FAIL,
        _rdma_up,
        (
            "Bring the same RDMA ports up on every node (`ibdev2netdev`, `ibstat`); a down rail on one node slows or hangs every collective",
            "Keep NCCL_IB_HCA / UCX_NET_DEVICES consistent with the ports that are really up",
        ),
        ("ibdev2netdev",),
    ),
)


@dataclass
class ConsistencyReport:
    nodes: list[str]
    rows: list[dict[str, object]] = field(
        default_factory=list
    )  # {"fact", "id", "values": {node: value}, "differs"}
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"nodes": self.nodes, "rows": self.rows, "findings": [f.to_dict() for f in self.findings]}


def _relevant_env(s: Snapshot) -> dict[str, str]:
    env = dict(s.launch.env)
    env.update(s.env)
    # must_match_across_nodes in data/env_vocabulary.yaml (interface names may legitimately differ per
    # node only when the hardware naming differs; then the finding tells the operator to confirm)
    return MUST_MATCH_ACROSS_NODES.select(env)


def _describe(values: Mapping[str, str]) -> list[str]:
    groups: dict[str, list[str]] = {}
    for node, v in values.items():
        groups.setdefault(v, []).append(node)
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return [f"{v}: {', '.join(sorted(nodes))}" for v, nodes in ordered]


def compare(snapshots: Mapping[str, Snapshot]) -> ConsistencyReport:
    nodes = sorted(snapshots)
    report = ConsistencyReport(nodes=nodes)
    if len(nodes) < 2:
        return report
    for fact in FACTS:
        values = {n: fact.value(snapshots[n]) for n in nodes}
        known = {n: v for n, v in values.items() if v != UNKNOWN and not v.startswith(PARTIAL)}
        differs = len(set(known.values())) > 1
        report.rows.append({"fact": fact.name, "id": fact.id, "values": values, "differs": differs})
        if differs:
            report.findings.append(
                Finding(
                    id=fact.id,
                    severity=fact.severity,
                    category=fact.category,
                    title=f"{fact.name} differs between nodes",
                    evidence=_describe(known)
                    + (
                        [f"not collected whole on: {', '.join(n for n in nodes if n not in known)}"]
                        if len(known) < len(nodes)
                        else []
                    ),
                    fix=list(fact.fix),
                )
            )
    _compare_modules(snapshots, nodes, report)
    _compare_env(snapshots, nodes, report)
    return report


def _compare_modules(snapshots: Mapping[str, Snapshot], nodes: list[str], report: ConsistencyReport) -> None:
    """CLU011 module by module: a node whose capture could not show a module (a grep for another name)
    is left out of that module's comparison instead of reading as 'not loaded'."""
    values = {n: _modules_value(snapshots[n]) for n in nodes}
    evidence: list[str] = []
    for module in CHECKED_MODULES:
        shown = {n: _module_shown(snapshots[n], module) for n in nodes}
        known = {n: v for n, v in shown.items() if v is not None}
        if len(set(known.values())) < 2:
            continue
        on = sorted(n for n, v in known.items() if v)
        off = sorted(n for n, v in known.items() if not v)
        line = f"{module}: loaded on {', '.join(on)}; not loaded on {', '.join(off)}"
        grepped = [n for n in off if "lsmod" in snapshots[n].partial]
        if grepped:
            line += (
                " ("
                + "; ".join(f"{n}'s `{_grep_command(snapshots[n])}` would have listed it" for n in grepped)
                + ")"
            )
        unknown = [n for n in nodes if n not in known]
        if unknown:
            line += f"; not shown on {', '.join(unknown)}"
        evidence.append(line)
    report.rows.append({"fact": MODULES_FACT, "id": "CLU011", "values": values, "differs": bool(evidence)})
    if evidence:
        report.findings.append(
            Finding(
                id="CLU011",
                severity=Severity.FAIL,
                category=Category.NCCL_NETWORK,
                title=f"{MODULES_FACT} differ between nodes",
                evidence=evidence,
                fix=list(MODULES_FIX),
            )
        )


def _compare_env(snapshots: Mapping[str, Snapshot], nodes: list[str], report: ConsistencyReport) -> None:
    envs = {n: _relevant_env(snapshots[n]) for n in nodes}
    names = sorted(set().union(*envs.values()))
    differing: list[str] = []
    for name in names:
        values = {n: envs[n].get(name, "(unset)") for n in nodes}
        differs = len(set(values.values())) > 1
        report.rows.append({"fact": f"env {name}", "id": "CLU012", "values": values, "differs": differs})
        if differs:
            differing.append(f"{name} = " + "; ".join(_describe(values)))
    if differing:
        report.findings.append(
            Finding(
                id="CLU012",
                severity=Severity.WARN,
                category=Category.NCCL_NETWORK,
                title="communication environment differs between nodes",
                evidence=differing,
                fix=[
                    "Set NCCL_*, UCX_*, GLOO_SOCKET_IFNAME and VLLM_* identically on every node (one env file / manifest)",
                    "Where interface names legitimately differ per node, confirm each names that node's RDMA/OOB interface",
                ],
            )
        )
