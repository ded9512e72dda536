"""The Python side: `vllm --version`, `pip freeze`, and `vllm collect-env` (sectioned and flat)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vllm_medic.collect.parsers import is_prompt_line
from vllm_medic.collect.parsers.system import parse_env
from vllm_medic.collect.parsers.topology import TopologyResult, parse_topology
from vllm_medic.snapshot import PythonEnv, Torch, Vllm

_VERSION_LINE = re.compile(
    r"^\s*v?(?P<public>\d+\.\d+(?:\.\d+)?(?:(?:a|b|rc|\.post|\.dev)\d+)*)(?:\+(?P<local>[\w.]+))?"
    r"(?:\s+\(git sha:\s*(?P<sha>[0-9a-f]+)[^)]*\))?\s*$"
)
_FREEZE = re.compile(
    r"^(?:\[(?:pip3?|conda)\]\s+)?(?P<name>[A-Za-z0-9][A-Za-z0-9._\-]*)\s*(?:==|===)\s*(?P<ver>\S+)"
)
_FREEZE_AT = re.compile(r"^(?:\[pip3?\]\s+)?(?P<name>[A-Za-z0-9][A-Za-z0-9._\-]*)\s+@\s+\S+")
_CONDA = re.compile(r"^\[conda\]\s+(?P<name>[A-Za-z0-9][A-Za-z0-9._\-]*)\s+(?P<ver>\d\S*)\s")
_CUDA_PKG = re.compile(r"^nvidia-[a-z0-9\-]+?-cu(?P<major>\d+)$")
# CUDA 13 wheels dropped the -cuNN suffix (nvidia-cuda-runtime, nvidia-cublas, ...): version tells.
_CUDA_PKG_UNSUFFIXED = re.compile(
    r"^nvidia-(cuda-runtime|cuda-nvrtc|cuda-cupti|cublas|cufft|curand|cusolver|cusparse|nvjitlink|cudnn-cu|cuda-nvcc)"
)
_COLLECT_ENV_KV = re.compile(
    r"^(?P<k>[A-Za-z][A-Za-z0-9 ./_()\-]*?)\s*:\s(?P<v>.*)$|^(?P<k2>[A-Za-z][A-Za-z0-9 ./_()\-]*?)\s*:$"
)

# collect_env's "no value" spellings (`PyTorch version: N/A` when torch is not installed)
_NO_VALUE = frozenset({"Could not collect", "N/A", "None", ""})
# one line per GPU under "GPU models and configuration" ("GPU 0: NVIDIA H20"); "GPU topology: ..." is not one
_GPU_MODEL = re.compile(r"^GPU \d+:\s*\S")
_TOPOLOGY_LABEL = re.compile(r"^GPU Topology:\s*(?P<rest>.*)$", re.IGNORECASE)
_MATRIX_ROW = re.compile(r"^(GPU\d+|NIC\d+|mlx5_\w+)\b")


def _ends_topology(line: str) -> bool:
    """A flush-left `Key: value` line after the matrix (e.g. "Nvidia driver version: 550.90.07").

    Legend entries are indented ("  NIC0: mlx5_0") and "Legend:" / "NIC Legend:" have no value.
    """
    if line[:1].isspace() or _MATRIX_ROW.match(line):
        return False
    m = _COLLECT_ENV_KV.match(line.strip())
    return bool(m and m.group("k") and m.group("v").strip())


@dataclass
class VllmVersionResult:
    vllm: Vllm = field(default_factory=Vllm)
    problems: list[str] = field(default_factory=list)


@dataclass
class FreezeResult:
    python: PythonEnv = field(default_factory=PythonEnv)
    problems: list[str] = field(default_factory=list)


@dataclass
class CollectEnvResult:
    fields: dict[str, str] = field(default_factory=dict)
    gpu_models: list[str] = field(default_factory=list)
    vllm: Vllm = field(default_factory=Vllm)
    python: PythonEnv = field(default_factory=PythonEnv)
    driver_version: str | None = None
    topology: TopologyResult | None = None
    env: dict[str, str] = field(default_factory=dict)
    sectioned: bool = False
    rocm: bool = False  # a ROCm host: the GPU line names an AMD model (gfx target), no NVIDIA driver
    amd_link_types: dict[str, dict[str, str]] = field(default_factory=dict)  # rocm-smi "Link Type" matrix
    partial: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def normalise_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def vllm_from_string(raw: str) -> Vllm | None:
    m = _VERSION_LINE.match(raw.strip())
    if not m:
        return None
    local = m.group("local")
    vllm = Vllm(version=m.group("public"), raw=raw.strip())
    if local:
        parts = local.split(".")
        for part in parts:
            if re.fullmatch(r"g[0-9a-f]{7,40}", part):
                vllm.git_sha = part[1:]
            elif re.fullmatch(r"(cu|rocm|cpu|xpu|tpu)\d*", part):
                vllm.variant = part
        if vllm.variant is None and not vllm.git_sha:
            vllm.variant = local
    if m.group("sha"):
        vllm.git_sha = m.group("sha")
    return vllm


def parse_vllm_version(text: str) -> VllmVersionResult:
    """`vllm --version` / `python -m vllm --version`: the last line that is only a version."""
    result = VllmVersionResult()
    for line in reversed(text.splitlines()):
        v = vllm_from_string(line)
        if v is not None:
            result.vllm = v
            return result
    if text.strip():
        result.problems.append("no line holding only a version (like 0.27.1 or 0.23.0+cu129)")
    return result


def _cuda_from_local(version: str) -> str | None:
    m = re.search(r"\+cu(\d{2,3})\b", version)
    if not m:
        return None
    digits = m.group(1)
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) == 3 else f"{digits[0]}.{digits[1]}"


def parse_pip_freeze(text: str) -> FreezeResult:
    result = FreezeResult()
    packages: dict[str, str] = {}
    unread = 0
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or is_prompt_line(line):
            continue
        m = _FREEZE.match(line) or _CONDA.match(line)
        if m:
            packages[normalise_name(m.group("name"))] = m.group("ver")
            continue
        at = _FREEZE_AT.match(line)
        if at:
            packages[normalise_name(at.group("name"))] = "@" + line.split("@", 1)[1].strip()
            continue
        if not line.startswith(("-e ", "[conda] Could not", "[pip3] Could not")):
            unread += 1
    fill_python_env(result.python, packages)
    if not packages and unread:
        result.problems.append("no 'name==version' lines found")
    return result


def fill_python_env(py: PythonEnv, packages: dict[str, str]) -> None:
    py.packages.update(dict(sorted(packages.items())))
    torch_version = packages.get("torch")
    if torch_version:
        py.torch = Torch(version=torch_version, cuda=_cuda_from_local(torch_version) or py.torch.cuda)
        if py.torch.cuda is None:
            # PyPI's default torch wheels carry no +cuXYZ tag; the CUDA runtime wheel they pull in tells
            runtime = next(
                (
                    packages[n]
                    for n in ("nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime")
                    if n in packages
                ),
                None,
            )
            m = re.match(r"^(\d+)\.(\d+)", runtime or "")
            if m:
                py.torch.cuda = f"{m.group(1)}.{m.group(2)}"
    cuda: dict[str, list[str]] = {}
    for name, version in sorted(packages.items()):
        m = _CUDA_PKG.match(name)
        if m:
            cuda.setdefault(m.group("major"), []).append(f"{name}=={version}")
        elif _CUDA_PKG_UNSUFFIXED.match(name) and re.match(r"^(1[0-9])\.", version):
            cuda.setdefault(version.split(".")[0], []).append(f"{name}=={version}")
    py.cuda_userspace = cuda
    for name in ("nvidia-nccl-cu13", "nvidia-nccl-cu12", "nvidia-nccl-cu11", "nvidia-nccl"):
        if name in packages:
            py.nccl_version = packages[name]
            break


_GFX = re.compile(r"\((?P<gfx>gfx[0-9a-f]+)[^)]*\)")


def _detect_rocm(result: CollectEnvResult) -> None:
    """ROCm's collect-env: `GPU models and configuration: AMD Instinct MI300X (gfx942:sramecc+:xnack-)`
    names the model of device 0 only, and `ROCM Version` / `ROCM used to build PyTorch` are set."""
    rocm_fields = [
        result.fields.get(k, "")
        for k in ("ROCM Version", "ROCM used to build PyTorch", "HIP runtime version")
    ]
    amd_line = any(_GFX.search(m) or re.search(r"\b(AMD|Radeon|Instinct)\b", m) for m in result.gpu_models)
    nvidia_line = any(re.search(r"\bNVIDIA|Tesla|GeForce|Quadro\b", m) for m in result.gpu_models)
    rocm_runtime = any(v and v not in _NO_VALUE for v in rocm_fields[1:])
    rocm_installed = bool(rocm_fields[0]) and rocm_fields[0] not in _NO_VALUE
    if amd_line or rocm_runtime or (rocm_installed and not nvidia_line):
        result.rocm = True
    if result.rocm and result.gpu_models:
        result.partial.append(
            "on ROCm, collect-env names the model of one GPU (torch's device 0), not how many GPUs there are"
        )


def amd_model(line: str) -> tuple[str, str | None]:
    """`AMD Instinct MI210 (gfx90a:sramecc+:xnack-)` -> ("AMD Instinct MI210", "gfx90a")."""
    m = _GFX.search(line)
    name = _GFX.sub("", line).strip()
    name = re.sub(r"^GPU \d+:\s*", "", name)
    return name, (m.group("gfx") if m else None)


def _rocm_link_types(lines: list[str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    in_links = False
    header: list[str] = []
    for line in lines:
        s = line.strip()
        if s.startswith("="):
            in_links = "Link Type between two GPUs" in s
            header = []
            continue
        if not in_links or not s:
            continue
        toks = s.split()
        if all(re.fullmatch(r"GPU\d+", t) for t in toks):
            header = toks
        elif header and re.fullmatch(r"GPU\d+", toks[0]) and len(toks) == len(header) + 1:
            out[toks[0]] = {h: v for h, v in zip(header, toks[1:], strict=True) if v != "0"}
    return out


def parse_collect_env(text: str) -> CollectEnvResult:
    """`vllm collect-env` / `python collect_env.py`, both the sectioned (2025+) and the flat layout."""
    result = CollectEnvResult()
    lines = text.splitlines()
    result.sectioned = any(line.strip() == "==============================" for line in lines)
    section = ""
    pip_lines: list[str] = []
    env_lines: list[str] = []
    topo_lines: list[str] = []
    in_gpu_models = False
    in_topology = False
    in_libs = False
    for i, raw in enumerate(lines):
        line = raw.rstrip()
        stripped = line.strip()
        if stripped == "==============================":
            continue
        if (
            result.sectioned
            and 0 < i < len(lines) - 1
            and lines[i - 1].strip() == "=============================="
            and lines[i + 1].strip() == "=============================="
        ):
            section = stripped
            in_gpu_models = in_topology = in_libs = False
            continue
        if section == "Environment Variables":
            env_lines.append(line)
            continue
        if in_topology:
            if not re.match(r"^[A-Z][A-Z0-9_]+=\S", stripped) and not _ends_topology(line):
                topo_lines.append(line)
                continue
            in_topology = False
        if in_gpu_models:
            if _GPU_MODEL.match(stripped):
                result.gpu_models.append(stripped)
                continue
            in_gpu_models = False
        if stripped.startswith("[pip3]") or stripped.startswith("[conda]"):
            pip_lines.append(stripped)
            continue
        label = _TOPOLOGY_LABEL.match(stripped)
        if label:
            in_topology = True
            if label.group("rest"):
                # older collect_env prints the matrix header on the label line: "GPU topology: GPU0  CPU ..."
                topo_lines.append(label.group("rest"))
            continue
        if stripped.startswith("Versions of relevant libraries"):
            in_libs = True
            continue
        m = _COLLECT_ENV_KV.match(stripped)
        if m and in_libs:
            in_libs = False  # "ROCM Version: ..." after the [pip3]/[conda] lines ends the list
        if m and section not in ("CPU Info",):
            key = (m.group("k") or m.group("k2") or "").strip()
            value = (m.group("v") or "").strip()
            if key == "GPU models and configuration":
                in_gpu_models = True
                if value not in _NO_VALUE:
                    result.gpu_models.extend(v.strip() for v in value.split(";") if v.strip())
            result.fields.setdefault(key, value)
            continue
        if not result.sectioned and re.match(r"^[A-Z][A-Z0-9_]*=", stripped) and not in_libs:
            env_lines.append(stripped)
    freeze = parse_pip_freeze("\n".join(pip_lines))
    result.python = freeze.python
    tv = result.fields.get("PyTorch version")
    if tv and tv not in _NO_VALUE and not result.python.torch.version:
        result.python.torch = Torch(version=tv, cuda=_cuda_from_local(tv))
    built = result.fields.get("CUDA used to build PyTorch")
    if built and built not in _NO_VALUE:
        result.python.torch.cuda = built
    drv = result.fields.get("Nvidia driver version")
    if drv and drv not in _NO_VALUE:
        result.driver_version = drv
    vv = result.fields.get("vLLM Version")
    if vv:
        parsed = vllm_from_string(vv)
        if parsed:
            result.vllm = parsed
    _detect_rocm(result)
    if topo_lines:
        if any("ROCm System Management Interface" in ln or "between two GPUs" in ln for ln in topo_lines):
            # `rocm-smi --showtopo`: weights, hops and link types between GPUs, not nvidia-smi links
            result.rocm = True
            result.amd_link_types = _rocm_link_types(topo_lines)
        else:
            result.topology = parse_topology("\n".join(topo_lines))
            if result.topology.not_nvidia:
                result.topology = None
    result.env = parse_env("\n".join(env_lines))
    if not result.fields and not pip_lines:
        result.problems.append(
            "no 'Key : value' lines (neither the sectioned nor the flat collect-env format)"
        )
    return result
