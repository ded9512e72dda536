"""The collection API other stages call: collect here, re-read captured outputs, write a bundle."""

from __future__ import annotations

import io
import json
import os
import platform
import shutil
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from vllm_medic import __version__
from vllm_medic.collect.build import CANONICAL_FILES, CORE_SOURCES, build_snapshot, source_for_file
from vllm_medic.collect.parsers.system import select_env
from vllm_medic.collect.redaction import redact_output
from vllm_medic.collect.runner import ProbeOutcome, ProbesInterrupted, run_all
from vllm_medic.collect.source_entry import SourceEntry, entries_by_name
from vllm_medic.errors import ToolError, UsageError
from vllm_medic.redact import redact_text
from vllm_medic.snapshot import SCHEMA_VERSION, Snapshot

MAX_CAPTURED_FILE_BYTES = 64 * 1024 * 1024
MAX_BUNDLE_BYTES = 512 * 1024 * 1024
# Members read from one tarball: a bundle holds ~40 files per node (a 64-node bundle ~2,600); 100,000
# empty members took 37 s before this cap.
MAX_TAR_MEMBERS = 10_000
BUNDLE_META_FILES = ("snapshot.json", "manifest.json")


@dataclass
class CollectOptions:
    image: str | None = None  # docker image to inspect (docker image inspect IMAGE, docker images --digests)
    launch: str | None = None  # "vllm serve ..." text, a file path (script / manifest), or "docker:CONTAINER"
    timeout_s: float = 10.0  # per-command timeout
    env: Mapping[str, str] | None = None  # default os.environ
    model_path: str | None = None  # local model dir (config.json) if given


@dataclass
class FanoutOptions:
    """`collect --ray/--hosts/--k8s`: which nodes to reach and how; the cluster package collects them."""

    ray: str | None = None
    hosts: Path | None = None
    k8s: str | None = None
    namespace: str | None = None
    container: str | None = None
    ssh_key: str | None = None
    ssh_user: str | None = None
    ssh_accept_new: bool = False
    remote_python: str = "python3"

    @property
    def requested(self) -> bool:
        return any((self.ray, self.hosts, self.k8s))


@dataclass
class CollectResult:
    snapshot: Snapshot
    manifest: dict[str, Any]
    raw: dict[str, bytes] = field(default_factory=dict)

    @property
    def interrupted(self) -> bool:
        return bool(self.manifest.get("interrupted"))

    @property
    def sources(self) -> dict[str, SourceEntry]:
        """The manifest's source entries by name, typed (the manifest itself stays JSON)."""
        return entries_by_name(self.manifest.get("sources"))


@cache
def source_table() -> dict[str, Any]:
    """The probe table (data/sources.yaml): what runs, under which canonical name. Remote collection
    (cluster/fanout.py) ships the same table to every node."""
    import yaml

    text = resources.files("vllm_medic.collect").joinpath("data/sources.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _vllm_python(env: Mapping[str, str]) -> tuple[str, str]:
    """The interpreter of the environment vLLM is installed in (the `vllm` script's shebang), and how
    it was chosen: without a usable `vllm` script it is vllm-medic's own interpreter."""
    found = shutil.which("vllm", path=env.get("PATH"))
    if found:
        try:
            with open(found, "rb") as fh:
                first = fh.readline(512).decode("utf-8", "replace").strip()
            if first.startswith("#!"):
                interp = first[2:].strip().split()[0]
                if os.path.basename(interp) == "sh":
                    # pip's form for long paths: `#!/bin/sh` then `'''exec' /path/to/python "$0" "$@"`
                    with open(found, "rb") as fh:
                        fh.readline(512)
                        second = fh.readline(1024).decode("utf-8", "replace")
                    if "exec'" in second:
                        interp = second.split("exec'", 1)[1].strip().split()[0].strip("'\"")
                if os.path.basename(interp) not in ("env", "sh") and os.access(interp, os.X_OK):
                    return interp, f"the interpreter of the vllm script {found}"
        except OSError:
            pass
        return sys.executable, f"vllm-medic's own interpreter (no usable interpreter in {found}'s first line)"
    return sys.executable, "vllm-medic's own interpreter (no `vllm` on PATH)"


def _nvcc(env: Mapping[str, str]) -> str:
    """`nvcc` on PATH, else the usual toolkit locations (the toolkit's bin is often not on PATH)."""
    found = shutil.which("nvcc", path=env.get("PATH"))
    if found:
        return found
    for home in (env.get("CUDA_HOME"), env.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", "nvcc"), os.X_OK):
            return os.path.join(home, "bin", "nvcc")
    return "nvcc"  # not installed: the probe records `missing`


def _redacted_bytes(data: bytes) -> bytes:
    return redact_output(data.decode("utf-8", "replace")).encode("utf-8")


def _container_evidence(env: Mapping[str, str]) -> str:
    lines = []
    for marker in ("/.dockerenv", "/run/.containerenv"):
        lines.append(f"{marker}: {'present' if os.path.exists(marker) else 'absent'}")
    k8s = env.get("KUBERNETES_SERVICE_HOST")
    lines.append(f"KUBERNETES_SERVICE_HOST: {k8s if k8s else 'absent'}")
    # systemd-nspawn and podman set a lowercase `container` variable
    runtime_var = env.get("container")
    lines.append(f"container: {runtime_var or 'absent'}")
    try:
        cgroup = Path("/proc/1/cgroup").read_text(encoding="utf-8", errors="replace")
        lines.extend(f"cgroup: {c}" for c in cgroup.splitlines()[:20] if c.strip())
    except OSError as exc:
        lines.append(f"cgroup: unreadable ({exc.strerror})")
    return "\n".join(lines) + "\n"


def collect_here(opts: CollectOptions) -> CollectResult:
    """Gather every source on this machine, concurrently, each command with its own timeout."""
    if opts.timeout_s <= 0:
        raise UsageError(f"--timeout must be positive, got {opts.timeout_s:g}")
    env = dict(opts.env if opts.env is not None else os.environ)
    run_env = dict(env)
    run_env.setdefault("LC_ALL", "C")
    table = source_table()
    started = _now()
    t0 = time.monotonic()
    raw: dict[str, bytes] = {}
    sources: dict[str, SourceEntry] = {}
    options: dict[str, Any] = {
        "image": opts.image,
        "model_path": opts.model_path,
        "timeout_s": opts.timeout_s,
    }

    container_target: str | None = None
    launch_origin: str | None = None
    if opts.launch:
        if opts.launch.startswith("docker:"):
            container_target = opts.launch.removeprefix("docker:").strip() or None
            launch_origin = f"docker-inspect:{container_target}"
        else:
            launch_origin = _store_launch(opts.launch, raw, sources)
    options["launch_origin"] = launch_origin
    python, python_origin = _vllm_python(env)
    options["python"], options["python_origin"] = python, python_origin
    placeholders = {"image": opts.image, "container": container_target, "python": python}

    jobs: list[tuple[str, list[str]]] = []
    probe_meta: dict[str, dict[str, Any]] = {}
    for probe in table["probes"]:
        need = probe.get("needs")
        if need and not placeholders.get(need):
            if probe["name"] not in sources:
                sources[probe["name"]] = SourceEntry.of(
                    probe["name"],
                    None,
                    status="not_applicable",
                    message=f"needs --{need}" if need != "container" else "no --launch given",
                )
            continue
        argv = [_fill(str(a), placeholders) for a in probe["argv"]]
        if argv[0] == "nvcc":  # the toolkit's bin is often not on PATH
            argv[0] = _nvcc(env)
        jobs.append((probe["name"], argv))
        probe_meta[probe["name"]] = probe

    nvml_probe = None
    from vllm_medic.collect.nvml import NvmlProbe, nvml_available

    if nvml_available():
        nvml_probe = NvmlProbe()
    else:
        sources["nvml"] = SourceEntry.of(
            "nvml", None, status="not_applicable", message="nvidia-ml-py is not installed"
        )

    # in-process sources: cheap reads done while nothing else waits on them
    _read_files(table.get("files") or [], raw, sources)
    raw["env.txt"] = "".join(f"{k}={v}\n" for k, v in select_env(env).items()).encode()
    sources["env"] = SourceEntry.of("env", "env.txt", command="(process environment, filtered and redacted)")
    raw["container.txt"] = _container_evidence(env).encode()
    sources["container"] = SourceEntry.of(
        "container", "container.txt", command="(/.dockerenv, /run/.containerenv, /proc/1/cgroup)"
    )
    if opts.model_path:
        _read_model_config(opts.model_path, raw, sources)

    interrupted = False
    try:
        outcomes = run_all(jobs, opts.timeout_s, env=run_env)
    except ProbesInterrupted as exc:
        outcomes = exc.partial
        interrupted = True
    for name, outcome in outcomes.items():
        _record_outcome(name, outcome, probe_meta.get(name, {}), raw, sources, opts.timeout_s)
    if container_target and "launch" in sources:
        sources["launch"].origin = launch_origin
    if nvml_probe is not None:
        status, data, message, duration = nvml_probe.result(0.0 if interrupted else opts.timeout_s)
        sources["nvml"] = SourceEntry.of(
            "nvml",
            "nvml.json" if data else None,
            command="(NVML via nvidia-ml-py)",
            status=status,
            message=message,
            duration_s=duration,
        )
        if data:
            raw["nvml.json"] = data

    manifest: dict[str, Any] = {
        "tool": "vllm-medic",
        "tool_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "mode": "live",
        "collected_at": started,
        "finished_at": _now(),
        "wall_s": round(time.monotonic() - t0, 3),
        "host": platform.node(),
        "options": options,
        "interrupted": interrupted,
        "sources": [],
    }
    snapshot, notes = build_snapshot(
        raw, sources, options, {"tool_version": __version__, "collected_at": started}
    )
    for name, problems in notes.items():
        sources.setdefault(name, SourceEntry.of(name, None)).notes = problems
    manifest["sources"] = _manifest_sources(sources)
    return CollectResult(snapshot=snapshot, manifest=manifest, raw=raw)


def _manifest_sources(sources: dict[str, SourceEntry]) -> list[dict[str, Any]]:
    return [e.to_json() for e in sorted(sources.values(), key=lambda e: e.name)]


def _fill(arg: str, placeholders: dict[str, str | None]) -> str:
    """Replace a whole-argument placeholder like "{image}"; other braces (Python code) stay as they are."""
    if arg.startswith("{") and arg.endswith("}") and arg[1:-1] in placeholders:
        return placeholders[arg[1:-1]] or ""
    return arg


def _store_launch(launch: str, raw: dict[str, bytes], sources: dict[str, SourceEntry]) -> str:
    candidate = (
        Path(os.path.expanduser(launch.strip())) if "\n" not in launch and len(launch) < 4096 else None
    )
    if candidate is not None and candidate.is_file():
        from vllm_medic.safeio import read_bytes

        try:
            data, _cut = read_bytes(
                candidate.resolve(), MAX_CAPTURED_FILE_BYTES, "launch file", shown=candidate
            )
            raw["launch.txt"] = _redacted_bytes(data)
        except UsageError as exc:
            sources["launch"] = SourceEntry.of(
                "launch",
                None,
                status="permission" if "ermission" in str(exc) else "error",
                message=str(exc),
                origin=f"file:{candidate}",
            )
            return f"file:{candidate}"
        sources["launch"] = SourceEntry.of(
            "launch", "launch.txt", command=f"(file {candidate})", origin=f"file:{candidate}"
        )
        _store_launch_config(raw["launch.txt"], candidate.parent, raw, sources)
        return f"file:{candidate}"
    raw["launch.txt"] = _redacted_bytes(
        launch.encode("utf-8", "replace") + (b"" if launch.endswith("\n") else b"\n")
    )
    sources["launch"] = SourceEntry.of("launch", "launch.txt", command="(--launch text)", origin="argv")
    _store_launch_config(raw["launch.txt"], Path.cwd(), raw, sources)
    return "argv"


def _store_launch_config(
    launch_raw: bytes, base: Path, raw: dict[str, bytes], sources: dict[str, SourceEntry]
) -> None:
    """`vllm serve --config FILE`: keep the file in the bundle so `--from` reads the same arguments."""
    from vllm_medic.collect.launch import config_file_path, parse_launch_text

    path = config_file_path(parse_launch_text(launch_raw.decode("utf-8", "replace")), base)
    if path is None:
        return
    from vllm_medic.safeio import read_bytes

    try:
        data, _cut = read_bytes(path.resolve(), MAX_CAPTURED_FILE_BYTES, "--config file", shown=path)
        raw["launch-config.yaml"] = _redacted_bytes(data)
        sources["launch-config"] = SourceEntry.of(
            "launch-config", "launch-config.yaml", command=f"(file {path})"
        )
    except UsageError as exc:  # missing, a FIFO or a device: named in the manifest, never blocked on
        sources["launch-config"] = SourceEntry.of(
            "launch-config",
            None,
            command=f"(file {path})",
            status="missing",
            message=str(exc),
        )


def _read_files(specs: list[dict[str, Any]], raw: dict[str, bytes], sources: dict[str, SourceEntry]) -> None:
    for spec in specs:
        name, file, path = spec["name"], spec["file"], spec["path"]
        t0 = time.monotonic()
        try:
            data = Path(path).read_bytes()[:MAX_CAPTURED_FILE_BYTES]
        except FileNotFoundError:
            sources[name] = SourceEntry.of(
                name, None, command=f"(read {path})", status="missing", message=f"{path} does not exist"
            )
            continue
        except PermissionError:
            sources[name] = SourceEntry.of(
                name,
                None,
                command=f"(read {path})",
                status="permission",
                message=f"{path}: permission denied",
            )
            continue
        except OSError as exc:
            sources[name] = SourceEntry.of(
                name, None, command=f"(read {path})", status="error", message=f"{path}: {exc.strerror or exc}"
            )
            continue
        raw[file] = _redacted_bytes(data)
        sources[name] = SourceEntry.of(
            name, file, command=f"(read {path})", duration_s=round(time.monotonic() - t0, 3)
        )


def _read_model_config(model_path: str, raw: dict[str, bytes], sources: dict[str, SourceEntry]) -> None:
    path = Path(os.path.expanduser(model_path))
    config = path / "config.json" if path.is_dir() else path
    from vllm_medic.safeio import read_bytes

    try:
        data, _cut = read_bytes(config.resolve(), MAX_CAPTURED_FILE_BYTES, "--model config", shown=config)
        raw["model-config.json"] = _redacted_bytes(data)
        sources["model-config"] = SourceEntry.of(
            "model-config", "model-config.json", command=f"(read {config})"
        )
    except UsageError as exc:
        sources["model-config"] = SourceEntry.of(
            "model-config",
            None,
            command=f"(read {config})",
            status="missing" if "no such file" in str(exc) else "error",
            message=str(exc),
        )


def _record_outcome(
    name: str,
    outcome: ProbeOutcome,
    probe: dict[str, Any],
    raw: dict[str, bytes],
    sources: dict[str, SourceEntry],
    timeout_s: float,
) -> None:
    file = probe.get("file") or CANONICAL_FILES.get(name, (f"{name}.txt",))[0]
    data = outcome.stdout
    if not data.strip() and outcome.status != "ok":
        data = outcome.stderr
    stored: str | None = None
    if data.strip() or outcome.status == "ok":
        raw[file] = _redacted_bytes(data)
        stored = file
    message = outcome.message
    if outcome.status == "timeout":
        hint = probe.get("hang_hint")
        message = f"{outcome.argv[0]}: no answer within {timeout_s:g} s; killed." + (
            f" {hint}" if hint else ""
        )
    sources[name] = SourceEntry.of(
        name,
        stored,
        command=" ".join(
            outcome.argv if name != "pip-freeze" else outcome.argv[:2] + ["<list distributions>"]
        ),
        started=outcome.started,
        duration_s=outcome.duration_s,
        exit_code=outcome.exit_code,
        status=outcome.status,
        message=redact_text(message),
        stderr=redact_text(outcome.stderr.decode("utf-8", "replace")[-2000:])
        if outcome.stderr.strip()
        else "",
    )


# ---------------------------------------------------------------- captured outputs


def load_captured(path: Path) -> CollectResult:
    """Build the snapshot from captured outputs alone: a directory of canonical files, a bundle
    directory, or a `.tar.gz` bundle."""
    path = Path(path)
    if not path.exists():
        raise UsageError(
            f"{path} does not exist (expected a directory of captured outputs or a .tar.gz bundle)"
        )
    files: dict[str, bytes]
    if not path.is_dir():
        from vllm_medic.safeio import kind_of

        kind = kind_of(path.resolve())
        if kind is not None:  # a FIFO would block tarfile.is_tarfile forever; a device reads forever
            raise UsageError(
                f"{path} is {kind}: expected a directory of captured outputs or a .tar.gz bundle"
            )
    cut: list[str] = []  # what the caps left out, recorded in the manifest (never silent)
    try:
        if path.is_dir():
            _refuse_multinode(path, (path / "cluster.json").is_file())
            files = _read_dir(path, cut)
        elif tarfile.is_tarfile(path):
            files = _read_tar(path, cut)
        else:
            files = _read_transcript(path)
    except PermissionError as exc:
        raise UsageError(f"cannot read {path}: permission denied ({exc.filename or path})") from None
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise UsageError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    manifest_in = _manifest_or_none(path, files.pop("manifest.json", None))
    files.pop("snapshot.json", None)
    # every file is kept (other stages read their own files from the bundle); only canonical ones are parsed here
    raw = dict(files)
    ignored = sorted(name for name in files if not source_for_file(name))
    if not any(source_for_file(name) for name in raw):
        expected = ", ".join(names[0] for names in CANONICAL_FILES.values())
        raise UsageError(
            f"no captured outputs with canonical names in {path}; expected files like: {expected}"
        )
    raw = {name: _redacted_bytes(data) for name, data in raw.items()}
    options: dict[str, Any] = {}
    meta: dict[str, Any] = {"tool_version": None, "collected_at": None}
    sources: dict[str, SourceEntry] = {}
    if isinstance(manifest_in, dict):
        options = dict(manifest_in.get("options") or {})
        meta = {
            "tool_version": manifest_in.get(
                "original_tool_version" if manifest_in.get("mode") == "from" else "tool_version"
            ),
            "collected_at": manifest_in.get("collected_at"),
        }
        for entry in manifest_in.get("sources") or []:
            if isinstance(entry, dict) and entry.get("name"):
                e = SourceEntry.from_json(entry)
                e.forget("notes")
                e.forget("partial")  # re-derived from the raw file by this version's readers
                if e.status == "unparsable":
                    e.status = "ok"
                sources[e.name] = e
    for name in raw:
        source = source_for_file(name)
        if source and source not in sources:
            sources[source] = SourceEntry.of(source, name, command="(captured file)")
    if not isinstance(manifest_in, dict):
        present = {source_for_file(n) for n in raw}
        for source in CORE_SOURCES:
            if source not in present and source not in sources:
                sources[source] = SourceEntry.of(
                    source,
                    None,
                    status="not_captured",
                    message=f"no {CANONICAL_FILES[source][0]} in the captured outputs",
                )
    snapshot, notes = build_snapshot(raw, sources, options, meta)
    for name, problems in notes.items():
        sources.setdefault(name, SourceEntry.of(name, None)).notes = problems
    manifest = {
        "tool": "vllm-medic",
        "tool_version": __version__,
        "schema_version": SCHEMA_VERSION,
        "mode": "from",
        "from": str(path),
        "collected_at": meta.get("collected_at"),
        "original_tool_version": meta.get("tool_version"),
        "options": options,
        "interrupted": bool(isinstance(manifest_in, dict) and manifest_in.get("interrupted")),
        "ignored_files": ignored,
        "sources": _manifest_sources(sources),
    }
    if cut:
        manifest["cut"] = cut
    return CollectResult(snapshot=snapshot, manifest=manifest, raw=raw)


def _refuse_multinode(path: Path, multinode: bool) -> None:
    """One node's reader must not flatten a multi-node bundle (every node's nvidia-smi.txt into one)."""
    if multinode:
        raise UsageError(
            f"{path} is a multi-node bundle (it has cluster.json): this reads one node's outputs; "
            "run `vllm-medic check --from` on the whole bundle, or give one node's directory (nodes/NODE)"
        )


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB"


def tar_members(tar: tarfile.TarFile, path: Path, cut: list[str]) -> Iterator[tarfile.TarInfo]:
    """The members of ``tar``, at most :data:`MAX_TAR_MEMBERS`; past it a note goes into ``cut`` and
    the rest is never read (each header costs a read: 100,000 empty members took 37 s)."""
    for count, member in enumerate(tar, 1):
        if count > MAX_TAR_MEMBERS:
            cut.append(f"{path}: more than {MAX_TAR_MEMBERS:,} members: the rest were not read")
            return
        yield member


def _manifest_or_none(path: Path, data: bytes | None) -> Any:
    """The bundle's manifest.json, or None where it is missing or not JSON (the raw files still count);
    nested past the cap is a usage error naming it (a crafted manifest, not a damaged one)."""
    from vllm_medic.safeio import MAX_JSON_DEPTH, JsonTooDeep, loads_json

    if data is None:
        return None
    try:
        return loads_json(data.decode("utf-8", "replace"))
    except JsonTooDeep:
        raise UsageError(
            f"{path}: manifest.json is nested more than {MAX_JSON_DEPTH} levels deep: refused"
        ) from None
    except json.JSONDecodeError:
        return None


def _read_dir(path: Path, cut: list[str]) -> dict[str, bytes]:
    """Regular files only: a symlink (to a key file, /proc/self/environ), FIFO, device or socket inside
    the directory is never followed nor opened."""
    from vllm_medic.safeio import is_regular, kind_of, read_bytes

    files: dict[str, bytes] = {}
    entries = sorted(p for p in path.iterdir() if is_regular(p))
    if not any(source_for_file(p.name) for p in entries):
        # a directory holding one bundle directory (an extracted tarball): look one level down
        subdirs = [p for p in path.iterdir() if kind_of(p) == "a directory"]
        if len(subdirs) == 1:
            entries = sorted(p for p in subdirs[0].iterdir() if is_regular(p))
    for p in entries:
        if p.name.startswith("."):
            continue
        files[p.name], was_cut = read_bytes(p, MAX_CAPTURED_FILE_BYTES, "captured file")
        if was_cut:
            cut.append(
                f"{p.name}: larger than {_mib(MAX_CAPTURED_FILE_BYTES)}: only its first {_mib(MAX_CAPTURED_FILE_BYTES)} read"
            )
    return files


def _read_transcript(path: Path) -> dict[str, bytes]:
    """A single pasted terminal transcript (`$ nvidia-smi` + output, `$ lsmod | grep nvidia` + ...)."""
    from vllm_medic.collect.transcript import split_transcript
    from vllm_medic.safeio import read_bytes

    data, _cut = read_bytes(path, MAX_CAPTURED_FILE_BYTES, "transcript")
    files, _unknown = split_transcript(data.decode("utf-8", "replace"))
    if not files:
        raise UsageError(
            f"{path} is neither a directory, a .tar.gz bundle, nor a terminal transcript with known commands "
            "(lines like `$ nvidia-smi` followed by their output)"
        )
    files[f"transcript-{path.name}"] = data  # the original paste travels with the bundle
    return files


def _read_tar(path: Path, cut: list[str]) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    with tarfile.open(path, "r:*") as tar:
        for member in tar_members(tar, path, cut):
            name = os.path.basename(member.name)
            _refuse_multinode(path, name == "cluster.json")
            if not member.isfile() or name.startswith("."):
                continue
            if member.size > MAX_CAPTURED_FILE_BYTES:
                cut.append(
                    f"{member.name}: {_mib(member.size)}, over the {_mib(MAX_CAPTURED_FILE_BYTES)} cap per file: not read"
                )
                continue
            total += member.size
            if total > MAX_BUNDLE_BYTES:
                raise UsageError(
                    f"{path}: more than {MAX_BUNDLE_BYTES // 2**20} MiB of files; not a vllm-medic bundle?"
                )
            fh = tar.extractfile(member)
            if fh is not None:
                files[name] = fh.read()
    return files


# ---------------------------------------------------------------- bundle


def check_launch_argument(launch: str) -> None:
    """`--launch serve.sh` with a typo must not be read as a command line that runs nothing."""
    text = launch.strip()
    if text.startswith("docker:") or any(ch.isspace() for ch in text):
        return
    looks_like_file = os.sep in text or text.endswith(
        (".sh", ".bash", ".yaml", ".yml", ".json", ".txt", ".env")
    )
    path = Path(os.path.expanduser(text))
    if looks_like_file and not path.exists():
        raise UsageError(
            f"--launch {text}: no such file (give the file of the launch, its text, or docker:CONTAINER)"
        )
    if path.is_dir():
        raise UsageError(f"--launch {text} is a directory; give the launch script or manifest file")
    from vllm_medic.safeio import kind_of

    kind = kind_of(path.resolve()) if path.exists() else None
    if kind is not None:  # a FIFO would block the read forever
        raise UsageError(f"--launch {text} is {kind}; give the launch script or manifest file")


def check_bundle_destination(dest: Path) -> None:
    """A bundle directory must be new or empty: files of an older bundle would be mixed into this one."""
    dest = Path(dest)
    if dest.name.endswith((".tar.gz", ".tgz")):
        if dest.exists() and not dest.is_file():
            raise UsageError(f"{dest} exists and is not a file; choose another bundle path")
        return
    if dest.exists() and not dest.is_dir():
        raise UsageError(
            f"{dest} exists and is not a directory; choose another bundle path (nothing was written)"
        )
    if dest.is_dir() and any(dest.iterdir()):
        raise UsageError(
            f"{dest} already exists and is not empty; choose a new path or a FILE.tar.gz (nothing was overwritten)"
        )


def write_bundle(result: CollectResult, dest: Path) -> Path:
    """Write raw outputs + snapshot.json + manifest.json to a directory, or a .tar.gz when dest
    ends with .tar.gz / .tgz. Raises ToolError when it cannot be written."""
    from vllm_medic.report.jsonout import dumps

    dest = Path(dest)
    payload: dict[str, bytes] = dict(result.raw)
    payload["snapshot.json"] = (dumps(result.snapshot.to_dict()) + "\n").encode()
    manifest = dict(result.manifest)
    manifest["files"] = sorted(payload) + ["manifest.json"]
    payload["manifest.json"] = (dumps(manifest) + "\n").encode()
    try:
        if dest.name.endswith((".tar.gz", ".tgz")):
            dest.parent.mkdir(parents=True, exist_ok=True)
            top = dest.name.removesuffix(".tar.gz").removesuffix(".tgz")
            fd, tmp = tempfile.mkstemp(prefix=".vllm-medic-", suffix=".tar.gz", dir=dest.parent)
            os.close(fd)
            try:
                with tarfile.open(tmp, "w:gz") as tar:
                    for name, data in sorted(payload.items()):
                        info = tarfile.TarInfo(f"{top}/{name}")
                        info.size = len(data)
                        info.mtime = int(time.time())
                        info.mode = 0o644
                        tar.addfile(info, io.BytesIO(data))
                os.replace(tmp, dest)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        else:
            check_bundle_destination(dest)
            dest.mkdir(parents=True, exist_ok=True)
            for name, data in payload.items():
                (dest / name).write_bytes(data)
    except ToolError:
        raise
    except OSError as exc:
        raise ToolError(f"cannot write the bundle to {dest}: {exc.strerror or exc}") from None
    return dest
