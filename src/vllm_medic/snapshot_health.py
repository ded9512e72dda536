"""The health facts on the snapshot (``Snapshot.health``): kernel-log Xids, NVLink fabric, container
limits and what the image shows inside; the probes under ``collect/health`` build them, the judges in
``checks/health_judges.py`` read them.

``to_dict()`` writes the shape the probes always wrote (the ``health`` object of ``snapshot.json``,
``health.json`` and ``vllm-medic health --json``): a section that was not measured is an absent key,
not a null. Old snapshots kept the same object under ``extra["health"]``; ``Snapshot.from_dict``
reads it from there too.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from vllm_medic.records import OMIT, build, build_fields, fields_to_dict, key

# ---------------------------------------------------------------- kernel log (Xid)


@dataclass
class XidEvent:
    xid: int
    pci: str
    line_no: int  # 1-based line in the text it came from
    line: str
    when: str = ""
    pid: str | None = None
    process: str | None = None
    message: str = ""
    inferred: bool = False  # True for "fallen off the bus" printed without an Xid line

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class LogAttempt:
    """One kernel-log source that gave nothing: ``kind`` is permission | missing | timeout | no_journal
    | nonzero | empty."""

    source: str = ""
    kind: str = ""
    message: str = ""


@dataclass
class XidFacts:
    source: str | None = None  # the command or file the kernel log came from; None when none was readable
    readable: bool = False
    lines: int | None = field(default=None, metadata=OMIT)  # lines scanned (readable logs only)
    events: list[XidEvent] = field(default_factory=list)  # at most kernel_log.MAX_EVENTS
    attempts: list[LogAttempt] = field(default_factory=list)
    events_total: int | None = field(default=None, metadata=OMIT)  # set when events were cut at the cap
    how_to_check: str | None = field(default=None, metadata=OMIT)  # unreadable logs: how to look by hand


# ---------------------------------------------------------------- GPUs as nvidia-smi shows them


@dataclass
class SmiSummary:
    """Plain `nvidia-smi` (or `-L`): driver, the CUDA it supports at most, and how many GPUs."""

    driver_version: str | None = None
    cuda_version: str | None = None
    gpu_count: int | None = None


# ---------------------------------------------------------------- NVLink fabric


@dataclass
class FabricGpu:
    """One GPU's Fabric section of `nvidia-smi -q` (text or XML)."""

    bus_id: str | None = None
    product: str | None = None
    fabric_state: str | None = None  # Completed | In Progress | N/A | Not Supported
    fabric_status: str | None = None  # Success | ...
    clique_id: str | None = None
    cluster_uuid: str | None = None


@dataclass
class SmiQuery:
    driver_version: str | None = None
    gpus: list[FabricGpu] = field(default_factory=list)


@dataclass
class FmMismatch:
    """Fabric Manager's log line saying its driver interface version is not the driver's."""

    fabric_manager: str = ""
    driver: str = ""
    line: str = ""


@dataclass
class ServiceState:
    """A systemd unit from `systemctl status` / `is-active`."""

    state: str = "unknown"  # active | inactive | failed | activating | not_found | no_systemd | unknown
    detail: str = ""
    fm_version_mismatch: FmMismatch | None = None
    nothing_to_do: bool = False  # NV_WARN_NOTHING_TO_DO in the unit's log


@dataclass
class FabricFacts:
    nvidia_smi_q: SmiQuery | None = field(default=None, metadata=OMIT)
    nvidia_smi_q_error: str | None = field(default=None, metadata=OMIT)  # first line when no GPU was read
    fabric_manager: ServiceState | None = field(default=None, metadata=OMIT)
    imex: ServiceState | None = field(default=None, metadata=OMIT)
    imex_channels: list[str] | None = field(default=None, metadata=OMIT)  # [] = the directory is empty
    imex_nodes_config: str | None = field(default=None, metadata=OMIT)  # present | empty


# ---------------------------------------------------------------- container limits


@dataclass
class ShmFacts:
    size_bytes: int | None = None  # None: could not be read (see unparsed / error)
    filesystem: str | None = field(default=None, metadata=OMIT)
    mount: str | None = field(default=None, metadata=OMIT)
    unparsed: str | None = field(default=None, metadata=OMIT)
    error: str | None = field(default=None, metadata=OMIT)


@dataclass
class Rlimit:
    """One resource limit that was read; ``value`` None means unlimited."""

    value: int | None = None


#: UlimitFacts field -> JSON key (each is present only when the source showed that limit)
_ULIMIT_KEYS = ("memlock_bytes", "memlock_hard_bytes", "nofile", "nofile_hard")


@dataclass
class UlimitFacts:
    """Locked memory (bytes) and open files; a limit the source did not show is None, an unlimited one
    ``Rlimit(None)``. In JSON each is a number or null (unlimited), and absent when not shown."""

    memlock_bytes: Rlimit | None = None
    memlock_hard_bytes: Rlimit | None = None
    nofile: Rlimit | None = None
    nofile_hard: Rlimit | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: r.value for k in _ULIMIT_KEYS if (r := getattr(self, k)) is not None}

    @classmethod
    def build_from(cls, data: dict[str, Any]) -> UlimitFacts:
        return cls(**{k: Rlimit(build(int, data[k])) for k in _ULIMIT_KEYS if k in data})


@dataclass
class CgroupMemory:
    limit_bytes: int | None = None  # None with known=True: no limit ("max")
    known: bool = False
    file: str | None = field(default=None, metadata=OMIT)
    unparsed: str | None = field(default=None, metadata=OMIT)
    error: str | None = field(default=None, metadata=OMIT)


@dataclass
class LimitsFacts:
    source: str = "captured"  # captured (files) | live (this process)
    shm: ShmFacts | None = field(default=None, metadata=OMIT)
    ulimit: UlimitFacts | None = field(default=None, metadata=OMIT)
    cgroup_memory: CgroupMemory | None = field(default=None, metadata=OMIT)

    def measured(self) -> bool:
        return any(x is not None for x in (self.shm, self.ulimit, self.cgroup_memory))


# ---------------------------------------------------------------- inside the image


@dataclass
class ProbeRun:
    """How one `docker run` probe went (live runs only)."""

    argv: list[str] = field(default_factory=list)
    exit_code: int | None = None
    timed_out: bool = False
    missing: bool = False
    duration_s: float = 0.0
    status: str = ""


@dataclass
class DockerError:
    """What a failed `docker run` said: ``kind`` is one of in_image._DOCKER_ERRORS, unknown or no_output."""

    kind: str = "unknown"
    line: str = ""
    required_cuda: str | None = field(default=None, metadata=OMIT)  # cuda_requirement only


@dataclass
class InImageSmi(SmiSummary):
    ok: bool = False
    error: DockerError | None = None


@dataclass
class InImageVersions:
    """The version probe's JSON line (in_image.VERSION_PROBE); a package not installed is absent."""

    vllm: str | None = field(default=None, metadata=OMIT)
    torch: str | None = field(default=None, metadata=OMIT)
    flashinfer_python: str | None = field(default=None, metadata=key("flashinfer-python", omit=True))
    flashinfer: str | None = field(default=None, metadata=OMIT)
    triton: str | None = field(default=None, metadata=OMIT)
    nccl_cu12: str | None = field(default=None, metadata=key("nvidia-nccl-cu12", omit=True))
    nccl_cu13: str | None = field(default=None, metadata=key("nvidia-nccl-cu13", omit=True))
    dists: dict[str, str] | None = field(default=None, metadata=OMIT)  # torch/vllm/nvidia-* distributions
    #: ``import torch`` worked in the image: then torch_cuda was reported, None for a CPU build
    torch_imported: bool = False
    torch_cuda: str | None = field(default=None, metadata=OMIT)
    nccl: str | None = field(default=None, metadata=OMIT)
    nccl_error: str | None = field(default=None, metadata=OMIT)
    cuda_available: bool | None = field(default=None, metadata=OMIT)
    device_count: int | None = field(default=None, metadata=OMIT)
    torch_error: str | None = field(default=None, metadata=OMIT)

    def to_dict(self) -> dict[str, Any]:
        out = fields_to_dict(self)
        del out["torch_imported"]
        if self.torch_imported:
            out["torch_cuda"] = self.torch_cuda
        return out

    @classmethod
    def build_from(cls, data: dict[str, Any]) -> InImageVersions:
        kwargs = build_fields(cls, {k: v for k, v in data.items() if k != "torch_imported"})
        return cls(**kwargs, torch_imported="torch_cuda" in data)

    def reported(self) -> bool:
        """The probe printed anything at all."""
        return bool(self.to_dict())

    def torch_cuda_shown(self) -> str:
        """torch.version.cuda as the evidence has always printed it: '?' when not reported."""
        return str(self.torch_cuda) if self.torch_imported else "?"


@dataclass
class InImageFacts:
    image: str | None = None
    probes: dict[str, ProbeRun] | None = field(
        default=None, metadata=OMIT
    )  # nvidia-smi | versions | pip-list
    nvidia_smi: InImageSmi | None = field(default=None, metadata=OMIT)
    #: None with versions_error set: the probe ran and printed no JSON line
    versions: InImageVersions | None = field(default=None, metadata=OMIT)
    versions_error: DockerError | None = field(default=None, metadata=OMIT)
    pip_error: str | None = field(default=None, metadata=OMIT)
    packages_count: int | None = field(default=None, metadata=OMIT)
    cuda_userspace: dict[str, list[str]] | None = field(default=None, metadata=OMIT)  # "12" -> ["name==v"]
    packages: dict[str, str] | None = field(default=None, metadata=OMIT)

    def to_dict(self) -> dict[str, Any]:
        out = fields_to_dict(self)
        if self.versions is None and self.versions_error is not None:
            out["versions"] = None
        return out


# ---------------------------------------------------------------- all of them


@dataclass
class HealthFacts:
    """What the health probes measured; a section is None when its sources were not captured."""

    xid: XidFacts | None = field(default=None, metadata=OMIT)
    host_gpu: SmiSummary | None = field(default=None, metadata=OMIT)  # the host's plain nvidia-smi
    fabric: FabricFacts | None = field(default=None, metadata=OMIT)
    limits: LimitsFacts | None = field(default=None, metadata=OMIT)
    in_image: InImageFacts | None = field(default=None, metadata=OMIT)
    env: dict[str, str] | None = field(default=None, metadata=OMIT)  # live runs: the probe's environment

    def to_dict(self) -> dict[str, Any]:
        return fields_to_dict(self)

    @classmethod
    def from_dict(cls, data: Any) -> HealthFacts:
        built = build(cls, data)
        return built if isinstance(built, cls) else cls()

    def empty(self) -> bool:
        return not self.to_dict()
