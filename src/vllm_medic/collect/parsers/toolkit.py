"""`nvcc --version`: the CUDA toolkit installed on disk (which is not what the driver can run)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# "Cuda compilation tools, release 13.0, V13.0.88" (the V part is missing in some old builds)
_RELEASE = re.compile(
    r"Cuda compilation tools,\s*release\s+(?P<release>\d+\.\d+)(?:,\s*V(?P<full>\d+(?:\.\d+)+))?"
)
# "Build cuda_13.0.r13.0/compiler.36424714_0", "Build cuda_11.0_bu.TC445_37.28540450_0"
_BUILD = re.compile(r"^\s*Build\s+(?P<build>cuda_(?P<release>\d+\.\d+)\S*)", re.MULTILINE)


@dataclass
class NvccResult:
    release: str | None = None  # "13.0"
    version: str | None = None  # "13.0.88"
    build: str | None = None  # "cuda_13.0.r13.0/compiler.36424714_0"
    problems: list[str] = field(default_factory=list)


def parse_nvcc_version(text: str) -> NvccResult:
    """Toolkit release from `nvcc --version` (`-V`); tolerant of prompts, banners and a missing V line."""
    result = NvccResult()
    try:
        m = _RELEASE.search(text)
        b = _BUILD.search(text)
        if m:
            result.release = m.group("release")
            result.version = m.group("full") or m.group("release")
        if b:
            result.build = b.group("build")
            if result.release is None:
                result.release = result.version = b.group("release")
        if result.release is None:
            if "not found" in text.lower() or "no such file" in text.lower():
                result.problems.append("nvcc is not installed here: " + text.strip().splitlines()[-1][:200])
            else:
                result.problems.append("no 'Cuda compilation tools, release X.Y' line")
    except Exception as exc:  # noqa: BLE001 - a parser never raises
        result.problems.append(f"parser error: {type(exc).__name__}: {exc}")
    return result
