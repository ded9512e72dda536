"""The one currency every command produces: findings, with a shared category vocabulary.

Preflight (`check`), triage, cache verification and acceptance all emit `Finding`s, so one
report format and one exit-code policy serve every command.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from enum import IntEnum, StrEnum
from typing import Any


class Severity(StrEnum):
    """``pass`` only with evidence quoted; ``not_checked`` when the evidence was missing, unparsable or
    only partial (the finding says what was missing and the command that captures it)."""

    PASS = "pass"
    NOT_CHECKED = "not_checked"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


# A group holding anything not checked is not "all good": not_checked ranks above pass and info.
_SEVERITY_RANK = {
    Severity.PASS: 0,
    Severity.INFO: 1,
    Severity.NOT_CHECKED: 2,
    Severity.WARN: 3,
    Severity.FAIL: 4,
}


class Category(StrEnum):
    """Fixed vocabulary shared by preflight rules and the triage catalogue, in the method's order."""

    DRIVER_CUDA = "driver_cuda"
    IMAGE_DEPENDENCY = "image_dependency"
    OOM_STARTUP = "oom_startup"
    OOM_RUNTIME = "oom_runtime"
    PARALLEL_LAYOUT = "parallel_layout"
    NCCL_NETWORK = "nccl_network"
    PREFIX_CACHE = "prefix_cache"
    OTHER = "other"

    @property
    def order(self) -> int:
        """Position in the troubleshooting method: environment, then memory/layout, then network, then cache."""
        return list(Category).index(self)


CATEGORY_VALUES: tuple[str, ...] = tuple(c.value for c in Category)


class ExitCode(IntEnum):
    OK = 0
    FINDINGS = 1
    USAGE = 2
    TOOL_ERROR = 3
    INTERRUPTED = 130


@dataclass
class Finding:
    id: str
    severity: Severity
    category: Category
    title: str
    evidence: list[str] = field(default_factory=list)
    fix: list[str] = field(default_factory=list)
    docs: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.severity = Severity(self.severity)
        self.category = Category(self.category)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["severity"] = self.severity.value
        d["category"] = self.category.value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        return cls(
            id=str(d["id"]),
            severity=Severity(d["severity"]),
            category=Category(d.get("category", "other")),
            title=str(d.get("title", "")),
            evidence=[str(e) for e in d.get("evidence") or []],
            fix=[str(f) for f in d.get("fix") or []],
            docs=[str(u) for u in d.get("docs") or []],
        )


def worst_severity(findings: Iterable[Finding]) -> Severity:
    worst = Severity.PASS
    for f in findings:
        if f.severity.rank > worst.rank:
            worst = f.severity
    return worst


def exit_code_for(findings: Iterable[Finding], strict: bool = False) -> ExitCode:
    """0 nothing failed; 1 at least one `fail` (with strict, also `warn`)."""
    worst = worst_severity(findings)
    if worst is Severity.FAIL or (strict and worst is Severity.WARN):
        return ExitCode.FINDINGS
    return ExitCode.OK


def sort_by_method(findings: Iterable[Finding]) -> list[Finding]:
    """Order findings as the method reads them: category order first, then severity (worst first)."""
    return sorted(findings, key=lambda f: (f.category.order, -f.severity.rank, f.id))
