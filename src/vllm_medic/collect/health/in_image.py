"""Inside the image, as the method asks: what the container sees (driver, GPUs) and what it ships
(vLLM, torch, CUDA, NCCL, FlashInfer, pip's CUDA wheels).

Every probe is an ordinary ``docker run`` with a timeout; a fake ``docker`` on PATH (tests) and a
real engine take exactly the same code path. The vLLM image's ENTRYPOINT is the API server, so each
probe sets ``--entrypoint``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from vllm_medic.collect.health.runner import CommandResult, Runner, run_command
from vllm_medic.records import build
from vllm_medic.snapshot_health import (
    DockerError,
    InImageFacts,
    InImageSmi,
    InImageVersions,
    ProbeRun,
    SmiSummary,
)

PROBE_MARK = "VLLM_MEDIC_PROBE "

#: Printed as one JSON line; runs with the image's python, imports nothing the image may lack.
VERSION_PROBE = (
    "import json, importlib.metadata as md\n"
    "r = {}\n"
    "for p in ('vllm', 'torch', 'flashinfer-python', 'flashinfer', 'triton', 'nvidia-nccl-cu12', 'nvidia-nccl-cu13'):\n"
    "    try:\n"
    "        r[p] = md.version(p)\n"
    "    except Exception:\n"
    "        pass\n"
    "r['dists'] = {}\n"
    "for d in md.distributions():\n"
    "    n = (d.metadata['Name'] or '').lower().replace('_', '-')\n"
    "    if n.startswith(('nvidia-', 'torch', 'vllm', 'flashinfer', 'triton', 'cupy', 'deep-gemm', 'deep-ep')):\n"
    "        r['dists'][n] = d.version\n"
    "try:\n"
    "    import torch\n"
    "    r['torch_cuda'] = torch.version.cuda\n"
    "    try:\n"
    "        r['nccl'] = '.'.join(str(x) for x in torch.cuda.nccl.version())\n"
    "    except Exception as e:\n"
    "        r['nccl_error'] = repr(e)[:200]\n"
    "    r['cuda_available'] = torch.cuda.is_available()\n"
    "    r['device_count'] = torch.cuda.device_count()\n"
    "except Exception as e:\n"
    "    r['torch_error'] = repr(e)[:300]\n"
    f"print({PROBE_MARK!r} + json.dumps(r))\n"
)

_SMI_DRIVER = re.compile(r"Driver Version:\s*([\d.]+)")
_SMI_CUDA = re.compile(r"CUDA Version:\s*([\d.]+)")
_SMI_GPU_ROW = re.compile(r"^\|\s+(\d+)\s+.*?\|\s+[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d", re.M)
_SMI_L = re.compile(r"^GPU (\d+): .*\(UUID: ", re.M)

_REQUIREMENT = re.compile(
    r"nvidia-container-cli: requirement error: unsatisfied condition: cuda\s*>=\s*([\d.]+)"
)
_DOCKER_ERRORS: list[tuple[str, re.Pattern[str]]] = [
    ("cuda_requirement", _REQUIREMENT),
    ("no_gpu_runtime", re.compile(r"could not select device driver .*capabilities: \[\[gpu\]\]", re.I)),
    (
        "no_nvidia_runtime",
        re.compile(r"unknown or invalid runtime name: nvidia|nvidia-container-runtime.*not found", re.I),
    ),
    (
        "driver_not_loaded",
        re.compile(r"nvidia-container-cli: initialization error: (?:nvml error: )?driver not loaded", re.I),
    ),
    (
        "image_missing",
        re.compile(
            r"manifest unknown|manifest for \S+ not found|pull access denied|Unable to find image", re.I
        ),
    ),
    ("daemon_unreachable", re.compile(r"Cannot connect to the Docker daemon|error during connect", re.I)),
    ("smi_failed", re.compile(r"NVIDIA-SMI has failed|Failed to initialize NVML", re.I)),
]

#: CUDA user-space wheels whose own version major equals the CUDA major (so 12.x/13.x tells the family).
_CUDA_VERSIONED = {
    "nvidia-cuda-runtime",
    "nvidia-cuda-nvrtc",
    "nvidia-cublas",
    "nvidia-cuda-cupti",
    "nvidia-nvjitlink",
    "nvidia-nvtx",
    "nvidia-cuda-nvcc",
}
_CU_SUFFIX = re.compile(r"^(?P<base>nvidia-[a-z0-9-]+?)-cu(?P<major>\d+)$")


def docker_argv(image: str, entrypoint: str, args: list[str], docker: str = "docker") -> list[str]:
    return [docker, "run", "--rm", "--gpus", "all", "--entrypoint", entrypoint, image, *args]


def parse_nvidia_smi(text: str) -> SmiSummary:
    """Driver, CUDA (max the driver supports) and GPU count from plain `nvidia-smi` or `nvidia-smi -L`."""
    d = _SMI_DRIVER.search(text or "")
    c = _SMI_CUDA.search(text or "")
    rows = {int(i) for i in _SMI_GPU_ROW.findall(text or "")} or {int(i) for i in _SMI_L.findall(text or "")}
    return SmiSummary(
        driver_version=d.group(1) if d else None,
        cuda_version=c.group(1) if c else None,
        gpu_count=len(rows) if (rows or d) else None,
    )


def classify_docker_error(text: str) -> DockerError | None:
    for kind, pat in _DOCKER_ERRORS:
        m = pat.search(text or "")
        if m:
            line = next((ln.strip() for ln in (text or "").splitlines() if m.group(0) in ln), m.group(0))
            return DockerError(kind, line[:500], m.group(1) if kind == "cuda_requirement" else None)
    return None


def parse_probe_output(text: str) -> dict[str, Any] | None:
    for line in (text or "").splitlines():
        if line.startswith(PROBE_MARK):
            try:
                data = json.loads(line[len(PROBE_MARK) :])
            except json.JSONDecodeError:
                return None
            return data if isinstance(data, dict) else None
    return None


def parse_pip_freeze(text: str) -> dict[str, str]:
    pkgs: dict[str, str] = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if "==" in line and not line.startswith("#"):
            name, _, ver = line.partition("==")
            pkgs[name.strip().lower().replace("_", "-")] = ver.strip()
        elif " @ " in line:
            pkgs[line.split(" @ ")[0].strip().lower().replace("_", "-")] = "(direct)"
    return pkgs


def cuda_userspace(packages: dict[str, str]) -> dict[str, list[str]]:
    """CUDA family -> the wheels that belong to it: '-cu12' suffix, or a CUDA-versioned wheel at 13.x."""
    fams: dict[str, list[str]] = {}
    for name, ver in sorted(packages.items()):
        m = _CU_SUFFIX.match(name)
        if m:
            fams.setdefault(m.group("major"), []).append(f"{name}=={ver}")
            continue
        if name in _CUDA_VERSIONED:
            major = ver.split(".")[0]
            if major.isdecimal() and int(major) >= 11:
                fams.setdefault(major, []).append(f"{name}=={ver}")
    return fams


def probe(
    image: str, run: Runner = run_command, timeout: float = 180.0
) -> tuple[InImageFacts, dict[str, str]]:
    """Run the in-image probes. Returns (``Snapshot.health.in_image``, raw outputs by file name)."""
    probes: dict[str, ProbeRun] = {}
    raw: dict[str, str] = {}
    plan = [
        ("nvidia-smi", docker_argv(image, "nvidia-smi", []), "in-image-nvidia-smi.txt"),
        ("versions", docker_argv(image, "python3", ["-c", VERSION_PROBE]), "in-image-versions.txt"),
        (
            "pip-list",
            docker_argv(image, "python3", ["-m", "pip", "list", "--format=freeze"]),
            "in-image-pip-list.txt",
        ),
    ]
    for name, argv, canonical in plan:
        res = run(argv, timeout)
        raw[canonical] = res.output
        probes[name] = _summary(res)
        if name == "nvidia-smi" and res.missing:
            break  # no docker client: the other probes would say the same thing
    facts = from_outputs(raw, probes)
    facts.image, facts.probes = image, probes
    return facts, raw


def _summary(res: CommandResult) -> ProbeRun:
    return ProbeRun(
        argv=res.argv[:8] + (["…"] if len(res.argv) > 8 else []),
        exit_code=res.exit_code,
        timed_out=res.timed_out,
        missing=res.missing,
        duration_s=round(res.duration_s, 2),
        status=res.describe(),
    )


def from_outputs(files: dict[str, str], probes: dict[str, ProbeRun] | None = None) -> InImageFacts:
    """Facts from the three outputs (live or captured as ``in-image-*.txt``); ``image`` is the caller's."""
    out = InImageFacts()
    smi_text = files.get("in-image-nvidia-smi.txt")
    if smi_text is not None:
        smi_run = (probes or {}).get("nvidia-smi")
        out.nvidia_smi = _in_image_smi(smi_text, smi_run.exit_code if smi_run else None)
    ver_text = files.get("in-image-versions.txt")
    if ver_text is not None:
        data = parse_probe_output(ver_text)
        out.versions = build(InImageVersions, data)
        if data is None:
            out.versions_error = classify_docker_error(ver_text) or DockerError(
                "no_output", ver_text.strip()[-300:]
            )
    pip_text = files.get("in-image-pip-list.txt")
    dists = out.versions.dists if out.versions else None
    if pip_text is not None or dists is not None:
        # pip may be missing from the image (uv-built envs): the probe's own distribution list counts too
        pkgs = parse_pip_freeze(pip_text or "")
        if dists is not None:
            pkgs = {**dists, **pkgs}
        if pip_text is not None and not parse_pip_freeze(pip_text):
            out.pip_error = (pip_text.strip().splitlines() or ["no output"])[-1][:300]
        out.packages_count = len(pkgs)
        out.cuda_userspace = cuda_userspace(pkgs)
        out.packages = {
            k: v
            for k, v in pkgs.items()
            if k.startswith(("nvidia-", "torch", "vllm", "flashinfer", "triton"))
        }
    return out


def _in_image_smi(text: str, exit_code: int | None) -> InImageSmi:
    """`nvidia-smi` run inside the image: what it showed, and how it failed when it did."""
    smi = parse_nvidia_smi(text)
    err = classify_docker_error(text)
    failed = exit_code not in (0, None) or smi.driver_version is None
    if failed and err is None:
        err = DockerError("unknown", (text.strip().splitlines() or [""])[-1][:500])
    return InImageSmi(
        driver_version=smi.driver_version,
        cuda_version=smi.cuda_version,
        gpu_count=smi.gpu_count,
        ok=not failed and smi.driver_version is not None,
        error=err,
    )
