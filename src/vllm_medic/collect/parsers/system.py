"""Host facts: `lsmod`, `/proc/driver/nvidia/version`, container detection, environment, `uname`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from vllm_medic.collect.env_vocabulary import COLLECTED
from vllm_medic.collect.parsers import is_prompt_line
from vllm_medic.redact import redact_env
from vllm_medic.snapshot import Container, Host

_LSMOD_ROW = re.compile(
    r"^(?P<name>[A-Za-z0-9_\-]+)\s+(?P<size>\d+)\s+(?P<used>-?\d+|-)(?:\s+(?P<by>\S+))?\s*$"
)
_NVRM = re.compile(r"NVRM version:.*?Kernel Module(?:\s+for\s+\S+)?\s+(?P<v>\d+(?:\.\d+)+)")
_ENV_LINE = re.compile(r"^\s*(?:export\s+|declare\s+-x\s+)?(?P<k>[A-Za-z_][A-Za-z0-9_]*)=(?P<v>.*)$")


@dataclass
class ModulesResult:
    modules: list[str] = field(default_factory=list)
    header: bool = False  # the `Module  Size  Used by` line: the listing starts at the top
    problems: list[str] = field(default_factory=list)


@dataclass
class ProcVersionResult:
    kernel_module_version: str | None = None
    open_kernel_module: bool | None = None
    problems: list[str] = field(default_factory=list)


def parse_lsmod(text: str) -> ModulesResult:
    """`lsmod` (or `lsmod | grep ...`): module names only; prompts and the header are skipped.

    Empty output is a valid answer (a grep that matched nothing): no modules, no problem.
    """
    result = ModulesResult()
    unread = 0
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("Module "):
            result.header = True
            continue
        if not line or is_prompt_line(line):
            continue
        m = _LSMOD_ROW.match(line)
        if m:
            if m.group("name") not in result.modules:
                result.modules.append(m.group("name"))
        else:
            unread += 1
    if unread and not result.modules:
        result.problems.append("no 'Module Size Used-by' rows found")
    return result


def parse_proc_driver_version(text: str) -> ProcVersionResult:
    result = ProcVersionResult()
    m = _NVRM.search(text)
    if m:
        result.kernel_module_version = m.group("v")
        result.open_kernel_module = "Open Kernel Module" in text
    elif text.strip():
        result.problems.append("no 'NVRM version: ... Kernel Module X.Y.Z' line found")
    return result


def is_relevant_env(name: str) -> bool:
    """Kept in snapshot.env: the ``collected`` section of data/env_vocabulary.yaml."""
    return COLLECTED.matches(name)


def select_env(env: Mapping[str, str]) -> dict[str, str]:
    """The variables that matter for a vLLM deployment, secrets masked, sorted by name."""
    chosen = {k: v for k, v in env.items() if is_relevant_env(k)}
    return dict(sorted(redact_env(chosen).items()))


def parse_env(text: str) -> dict[str, str]:
    """`env` / `printenv` / `export -p` text (user-pasted or ours) -> relevant variables, redacted."""
    env: dict[str, str] = {}
    for raw in text.splitlines():
        m = _ENV_LINE.match(raw)
        if m:
            value = m.group("v").strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            env[m.group("k")] = value
    return select_env(env)


def parse_container(text: str) -> Container:
    """Our `container.txt` (one `key: value` per probe) or any pasted evidence (cgroup lines...)."""
    container = Container()
    evidence: list[str] = []
    runtime: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        low = line.lower()
        if low.startswith("/.dockerenv") and "present" in low:
            runtime = runtime or "docker"
            evidence.append(line)
        elif low.startswith("/run/.containerenv") and "present" in low:
            runtime = runtime or "podman"
            evidence.append(line)
        elif low.startswith("kubernetes_service_host") and not low.endswith(": absent"):
            runtime = "kubernetes"
            evidence.append(line)
        elif re.search(r"\b(kubepods|docker|containerd|cri-containerd|libpod|lxc)\b", low) and (
            "cgroup" in low or low[:1].isdecimal()
        ):
            found = re.search(r"\b(kubepods|docker|containerd|cri-containerd|libpod|lxc)\b", low)
            name = found.group(1) if found else "container"
            name = {"kubepods": "kubernetes", "libpod": "podman", "cri-containerd": "containerd"}.get(
                name, name
            )
            runtime = runtime if runtime == "kubernetes" else (runtime or name)
            evidence.append(line)
        elif low.startswith("container=") or low.startswith("container:"):
            value = line.split("=", 1)[-1].split(":", 1)[-1].strip()
            if value and value.lower() not in ("absent", "none", ""):
                runtime = runtime or value
                evidence.append(line)
    container.in_container = runtime is not None
    container.runtime = runtime or "none"
    container.evidence = evidence
    return container


def parse_uname(text: str) -> Host:
    """`uname -a`: `Linux HOST 5.15.0-160-generic #170-Ubuntu SMP ... x86_64 x86_64 x86_64 GNU/Linux`."""
    host = Host()
    parts = text.strip().split()
    if len(parts) >= 3 and parts[0] in ("Linux", "Darwin"):
        host.os = parts[0]
        host.hostname = parts[1]
        host.kernel = parts[2]
        arch = [p for p in parts if p in ("x86_64", "aarch64", "arm64", "ppc64le", "s390x")]
        host.arch = arch[0] if arch else None
    return host


def parse_os_release(text: str) -> str | None:
    m = re.search(r'^PRETTY_NAME="?([^"\n]+)"?', text, re.MULTILINE)
    return m.group(1) if m else None
