"""What the rules read: the snapshot plus the user's overrides, with small derived facts.

Everything here is pure: derived facts (hardware class, interconnect, node count, effective env)
come from the snapshot and launch alone, so a rule is a function of this object and a recipe.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from vllm_medic.checks.hardware import Board, board_for
from vllm_medic.collect.files import CANONICAL_FILES
from vllm_medic.collect.source_entry import SourceEntry
from vllm_medic.snapshot import Snapshot, Vllm
from vllm_medic.snapshot_health import HealthFacts

# Substrings of nvidia-smi / amd-smi GPU names -> recipe hardware keys (longest names first).
_HW_PATTERNS: list[tuple[str, str]] = [
    ("GB300", "gb300"),
    ("GB200", "gb200"),
    ("B300", "b300"),
    ("B200", "b200"),
    ("H200", "h200"),
    ("H100", "h100"),
    ("H800", "h100"),
    ("H20", "h20"),
    ("A100", "a100"),
    ("MI355X", "mi355x"),
    ("MI350X", "mi350x"),
    ("MI325X", "mi325x"),
    ("MI300X", "mi300x"),
]
FAMILY = {
    "h100": "hopper", "h200": "hopper", "h20": "hopper",
    "b200": "blackwell", "b300": "blackwell", "gb200": "blackwell", "gb300": "blackwell",
    "mi300x": "amd", "mi325x": "amd", "mi350x": "amd", "mi355x": "amd",
    "a100": "ampere",
}  # fmt: skip
# Multi-node NVLink (NVL72/NVL4 trays): cross-node traffic rides NVLink, not RDMA.
MNNVL_HARDWARE = {"gb200", "gb300"}


def hardware_from_name(name: str) -> str | None:
    upper = name.upper().replace(" ", "")
    for pat, key in _HW_PATTERNS:
        if pat in upper:
            return key
    return None


@dataclass
class Facts:
    snapshot: Snapshot
    model_config: dict[str, Any] | None = None
    strategy: str | None = None
    hardware_override: str | None = None
    raw: dict[str, bytes] = field(default_factory=dict)  # canonical file name -> bytes
    sources: dict[str, SourceEntry] = field(default_factory=dict)  # manifest["sources"], when collected

    @cached_property
    def health(self) -> HealthFacts:
        """The health facts (kernel log, fabric, limits, in-image): the snapshot's, else read from the
        raw files (a bundle written before collect stored them); worked out once per check."""
        from vllm_medic.collect.health.integrate import health_from_raw

        found = self.snapshot.health
        if found.empty() and self.raw:
            found = health_from_raw(self.raw, self.snapshot.image.tag)
        return found

    # --- where a value came from -------------------------------------------------------------
    def where(self, source: str, needle: str | None = None) -> str:
        """``file:line`` of the first line containing ``needle`` in the captured source, else the file."""
        hit = self.find(source, needle) if needle else None
        if hit is not None:
            return hit[0]
        return self._file_of(source)

    def find(self, source: str, needle: str, ignore_case: bool = False) -> tuple[str, str] | None:
        """(``file:line``, the line stripped) of the first line containing ``needle``, or None."""
        want = needle.lower() if ignore_case else needle
        for fname in self._files_of(source):
            data = self.raw.get(fname)
            if data is None:
                continue
            for i, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if want in (line.lower() if ignore_case else line):
                    return f"{fname}:{i}", line.strip()
        return None

    def find_all(self, source: str, pattern: str) -> list[tuple[str, str]]:
        """(``file:line``, the line stripped) of every line of the captured source matching ``pattern``."""
        rx = re.compile(pattern)
        out: list[tuple[str, str]] = []
        for fname in self._files_of(source):
            data = self.raw.get(fname)
            if data is None:
                continue
            for i, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                if rx.search(line):
                    out.append((f"{fname}:{i}", line.strip()))
        return out

    def _files_of(self, source: str) -> tuple[str, ...]:
        """The file names the source may be captured under (collect/files.py); an unknown source is its own."""
        return CANONICAL_FILES.get(source, (source,))

    def _file_of(self, source: str) -> str:
        """The captured file of the source (an accepted alternative name if that is what is there)."""
        files = self._files_of(source)
        return next((f for f in files if f in self.raw), files[0])

    def launch_where(self, token: str) -> str:
        """``launch.txt:N`` where the captured launch mentions ``token``, else ``launch`` (argv / --launch)."""
        loc = self.where("launch", token)
        return loc if ":" in loc else "launch"

    def missing(self, source: str) -> str | None:
        """Why a source gave nothing ("nvidia-smi: missing: ..."), or None if it was read."""
        err = self.snapshot.error_for(source)
        if err is None:
            return None
        detail = f": {err.message}" if err.message else ""
        return f"{source}: {err.kind}{detail}"

    def incomplete(self, source: str) -> str | None:
        """Why a source cannot prove an absence (missing, unparsable, or only partly captured), or None."""
        why = self.missing(source)
        if why is not None:
            return why
        part = self.snapshot.partial.get(source)
        return f"{source}: partial: {part}" if part is not None else None

    def captured(self, source: str) -> bool:
        """The source's output is among the evidence: a captured file, or a probe that answered."""
        entry = self.sources.get(source)
        if entry is not None and entry.status == "ok":
            return True
        return any(f in self.raw for f in self._files_of(source))

    def unread(self, source: str, holds_data: bool = False) -> str | None:
        """Why ``source`` cannot show that something is absent - missing, unparsable, partial, or never
        captured - or None when it was read whole (then "not listed there" means "not there").

        ``holds_data``: the snapshot holds values parsed from this source (a snapshot.json has no files
        to look at; a source that filled its field was read unless it is marked partial)."""
        why = self.incomplete(source)
        if why is not None:
            return why
        if self.captured(source) or holds_data:
            return None
        entry = self.sources.get(source)
        if entry is not None and entry.message:
            return f"{source}: {entry.status or 'not captured'}: {entry.message}"
        return f"{source}: not captured ({self._files_of(source)[0]} not among the evidence)"

    GPU_SOURCES = ("nvidia-smi", "nvidia-smi-q", "nvidia-smi-query-gpu", "nvml", "vllm-collect-env")

    def gpus_where(self, needle: str | None = None) -> str:
        """Where the GPU list was read: ``file:line`` of ``needle`` in whichever GPU source was captured
        (the nvidia-smi table, -q, --query-gpu, NVML, collect-env), else that file, else "GPU list"."""
        for source in self.GPU_SOURCES:
            hit = self.find(source, needle) if needle else None
            if hit is not None:
                return hit[0]
        for source in self.GPU_SOURCES:
            if self.captured(source):
                return self._file_of(source)
        return "GPU list"

    def gpu_list_partial(self) -> str | None:
        """Why the GPU list may be short (a table cut off, an excerpt), or None when a GPU source was read
        whole: then "N GPUs" is the node's count, not a lower bound."""
        sources = self.GPU_SOURCES
        whole = [s for s in sources if self.captured(s) and self.incomplete(s) is None]
        if whole:
            return None
        partial = [f"{s}: partial: {self.snapshot.partial[s]}" for s in sources if s in self.snapshot.partial]
        return partial[0] if partial else None

    def board(self) -> Board | None:
        """The board kind (GPU count, NVLink wiring) of the node's most common GPU, from hardware.yaml."""
        names = self.gpu_names
        if not names:
            return None
        return board_for(max(set(names), key=names.count))

    # --- which Python environment / vLLM the evidence describes ----------------------------------
    def python_env(self) -> tuple[bool | None, str]:
        """(is it the server's environment?, where the package list came from).

        True: vLLM is installed there; False: it is not (then it is not the server's environment);
        None: unknown (no package list, or an old bundle without the interpreter recorded).
        """
        pe = self.snapshot.python.origin
        if pe is not None:
            interp = pe.interpreter
            where = f"pip-freeze.txt: packages of {interp}" if interp else "pip-freeze.txt"
            where += f" ({pe.origin})" if pe.origin else ""
            if pe.vllm_installed:
                hit = self.find("pip-freeze", str(pe.vllm_distribution or "vllm=="), ignore_case=True)
                return (
                    True,
                    where + f"; vLLM installed: {hit[0] + ' ' + hit[1] if hit else pe.vllm_distribution}",
                )
            return False, where + "; vLLM is not installed in it"
        if "vllm-collect-env.txt" in self.raw or "collect-env.txt" in self.raw:
            return True, "vllm-collect-env.txt (`vllm collect-env` reports the server's own environment)"
        if self.snapshot.python.packages:
            return None, "pip-freeze.txt (which interpreter was not recorded)"
        return None, self.missing("pip-freeze") or "no pip freeze / collect-env package list"

    def server_vllm(self) -> tuple[Vllm, list[str]]:
        """The vLLM the server runs, and where that came from (file:line, and a caveat when the evidence
        may describe another installation than the launch uses)."""
        launch_image = self.snapshot.launch.image or self.snapshot.image.tag
        in_image = self.snapshot.health.in_image
        if in_image is not None and in_image.versions is not None and in_image.versions.vllm:
            from vllm_medic.collect.parsers.python_env import vllm_from_string

            found = vllm_from_string(in_image.versions.vllm)
            if found is not None:
                img = in_image.image or launch_image
                return found, [f"in-image-versions.txt: vLLM {found.raw} inside image {img or '?'}"]
        v = self.snapshot.vllm
        ev: list[str] = []
        if not (v.version or v.raw):
            return v, ev
        shown = v.raw or v.version or ""
        source = self.snapshot.vllm.source or ""
        if source.startswith("pip-freeze"):
            hit = self.find("pip-freeze", "vllm", ignore_case=True)
            ev.append(f"{hit[0]} {hit[1]}" if hit else f"pip-freeze.txt: vLLM {shown}")
            _, env_ev = self.python_env()
            ev.append(env_ev)
        elif self.find("vllm-version", shown) is not None:
            hit = self.find("vllm-version", shown)
            assert hit is not None
            ev.append(f"{hit[0]} vLLM {shown} (`vllm --version` where the outputs were collected)")
        else:
            hit = self.find("vllm-collect-env", shown)
            ev.append(f"{hit[0]} vLLM {shown} (vllm collect-env)" if hit else f"vLLM {shown}")
        if launch_image:
            ev.append(
                f"the server runs image {launch_image}: unless this was read inside it, the image's vLLM may "
                f"differ (`docker run --rm --entrypoint vllm {launch_image} --version`, or collect --image)"
            )
        return v, ev

    # --- launch ------------------------------------------------------------------------------
    @property
    def launch_known(self) -> bool:
        return bool(self.snapshot.launch.argv or self.snapshot.launch.args)

    def arg(self, dest: str, default: Any = None) -> Any:
        return self.snapshot.launch.args.get(dest, default)

    def int_arg(self, dest: str, default: int | None = None) -> int | None:
        v = self.arg(dest)
        if v is None or isinstance(v, bool):
            return default
        try:
            return int(v)
        except (TypeError, ValueError):
            return default

    def env(self, name: str) -> tuple[str | None, str]:
        """The variable as the server would see it: launch env first, then the collecting shell's env."""
        if name in self.snapshot.launch.env:
            val = self.snapshot.launch.env[name]
            return val, f"{self.launch_where(name + '=')} launch env {name}={val}"
        if name in self.snapshot.env:
            return self.snapshot.env[
                name
            ], f"{self.where('env', name + '=')} {name}={self.snapshot.env[name]}"
        return None, f"{name} not set (launch env and collected env)"

    # --- hardware ------------------------------------------------------------------------------
    @property
    def gpu_names(self) -> list[str]:
        return [g.name for g in self.snapshot.gpus if g.name]

    def hardware(self) -> str | None:
        """Recipe hardware key: the user's --hardware, else the (most common) GPU name."""
        if self.hardware_override:
            return self.hardware_override.lower()
        keys = [k for k in (hardware_from_name(n) for n in self.gpu_names) if k]
        if not keys:
            return None
        return max(set(keys), key=keys.count)

    def family(self) -> str | None:
        hw = self.hardware()
        if hw in ("hopper", "blackwell", "amd", "ampere"):
            return hw
        return FAMILY.get(hw or "")

    def gpus_per_node(self) -> int | None:
        return len(self.snapshot.gpus) or None

    def nnodes(self) -> tuple[int | None, str]:
        """Nodes the launch spans, from its arguments; None when the launch does not say."""
        n = self.int_arg("nnodes")
        if n:
            return n, f"--nnodes {n}"
        dp, dpl = self.int_arg("data_parallel_size"), self.int_arg("data_parallel_size_local")
        if dp and dpl and dp > dpl and dp % dpl == 0:
            return dp // dpl, f"--data-parallel-size {dp} / --data-parallel-size-local {dpl}"
        if self.arg("distributed_executor_backend") == "ray":
            return None, "--distributed-executor-backend ray: the Ray cluster decides the nodes"
        if self.launch_known and not any(
            self.arg(k) for k in ("headless", "node_rank", "data_parallel_address", "master_addr")
        ):
            return 1, "launch has no multi-node arguments (--nnodes, -dpl, --headless, --node-rank)"
        return None, "launch does not say how many nodes"

    # --- interconnect --------------------------------------------------------------------------
    def nvlink_intra(self) -> bool:
        topo = self.snapshot.topology.matrix
        return any(
            re.fullmatch(r"NV\d+", v or "")
            for row, cols in topo.items()
            if row.startswith("GPU")
            for col, v in cols.items()
            if col.startswith("GPU")
        )

    def rdma_devices(self) -> list[str]:
        devs = [p.ib_dev for p in self.snapshot.rdma if p.ib_dev]
        devs += [p.device for p in self.snapshot.ib_ports if p.device and p.device not in devs]
        devs += [v for v in self.snapshot.topology.nic_legend.values() if v not in devs]
        return devs

    def rdma_devices_where(self, devices: list[str]) -> str:
        """``file:line`` (or the source) that lists the first of ``devices``: ibdev2netdev, the port listing,
        or the topology's NIC legend - whichever actually showed it."""
        if not devices:
            return "no RDMA device listed"
        first = devices[0]
        shown = f"RDMA devices {', '.join(devices[:4])}{' ...' if len(devices) > 4 else ''}"
        if any(p.ib_dev == first for p in self.snapshot.rdma):
            return f"{self.where('ibdev2netdev', first)} {shown}"
        port = next((p for p in self.snapshot.ib_ports if p.device == first), None)
        if port is not None:
            return f"{port.source or 'port listing'}: {shown}"
        return f"{self.where('nvidia-smi-topo-m', first)} {shown} (topo -m NIC legend)"

    def rdma_absence_unproven(self) -> str | None:
        """Why "no RDMA device" cannot be concluded, or None when ibdev2netdev (or the port listing) and the
        topology were read whole and list none."""
        port_sources = {p.source for p in self.snapshot.ib_ports if p.source}
        why = [
            self.unread("ibdev2netdev", bool(self.snapshot.rdma)),
            self.unread("nvidia-smi-topo-m", bool(self.snapshot.topology.devices)),
        ]
        if self.snapshot.ib_ports and all(self.incomplete(s) is None for s in port_sources):
            why[0] = None
        reasons = [w for w in why if w]
        return "; ".join(reasons) if reasons else None

    def mnnvl(self) -> bool:
        if self.hardware() in MNNVL_HARDWARE:
            return True
        return any((g.fabric_state or "").lower() == "completed" for g in self.snapshot.gpus)

    def cross_node_interconnect(self) -> tuple[str | None, str]:
        """ "nvlink" (multi-node NVLink trays), "rdma" (RDMA NICs present) or None, with the evidence."""
        if self.mnnvl():
            hw = self.hardware()
            return "nvlink", f"multi-node NVLink hardware ({hw or 'GPU fabric state Completed'})"
        devs = self.rdma_devices()
        if devs:
            return "rdma", f"RDMA devices {', '.join(devs[:4])}{' ...' if len(devs) > 4 else ''}"
        return None, "no multi-node NVLink hardware and no RDMA device seen"

    def rdma_settings(self) -> list[str]:
        """Launch settings that only make sense over RDMA."""
        out = []
        if self.arg("all2all_backend") in ("deepep_v2", "deepep_high_throughput", "deepep_low_latency"):
            out.append(f"--all2all-backend {self.arg('all2all_backend')}")
        ucx, _ = self.env("UCX_TLS")
        if ucx and "rc" in [t.strip() for t in ucx.split(",")]:
            out.append(f"UCX_TLS={ucx}")
        return out

    def nvlink_settings(self) -> list[str]:
        """Launch settings that only make sense over multi-node NVLink."""
        out = []
        a2a = self.arg("all2all_backend")
        if isinstance(a2a, str) and a2a.startswith("flashinfer_nvlink"):
            out.append(f"--all2all-backend {a2a}")
        if self.arg("moe_backend") == "deep_gemm_mega_moe":
            out.append("--moe-backend deep_gemm_mega_moe")
        mn, _ = self.env("NCCL_MNNVL_ENABLE")
        if mn == "1":
            out.append("NCCL_MNNVL_ENABLE=1")
        return out
