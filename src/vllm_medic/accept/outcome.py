"""One step's result, the step status rule and the run verdict rule (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vllm_medic.model import Finding, Severity, worst_severity

DOCS_METRICS = "https://docs.vllm.ai/en/latest/usage/metrics.html"
DOCS_TOOL_CALLING = "https://docs.vllm.ai/en/latest/features/tool_calling.html"
DOCS_PREFIX_CACHING = "https://docs.vllm.ai/en/latest/features/automatic_prefix_caching.html"
DOCS_SERVE_ARGS = "https://docs.vllm.ai/en/latest/configuration/serve_args.html"


@dataclass
class StepOutcome:
    name: str
    status: str = "running"
    findings: list[Finding] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def add(self, finding: Finding) -> None:
        self.findings.append(finding)

    def settle(self) -> StepOutcome:
        """Status from the findings: fail beats warn beats pass."""
        self.status = status_from_findings(self.findings)
        return self

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "findings": [f.to_dict() for f in self.findings],
            "data": self.data,
        }


def skipped(name: str, reason: str) -> StepOutcome:
    return StepOutcome(name=name, status="skipped", data={"skipped_reason": reason})


def status_from_findings(findings: list[Finding]) -> str:
    worst = worst_severity(findings)
    if worst is Severity.FAIL:
        return "fail"
    if worst is Severity.WARN:
        return "warn"
    return "pass"


def run_verdict(steps: list[StepOutcome], interrupted: bool, strict: bool = False) -> str:
    """incomplete: interrupted before the end (even after a failure: the store marks it so too), or no
    step ran at all; fail: a step failed (with strict, or warned); pass: every step that ran passed."""
    statuses = [s.status for s in steps]
    if interrupted or any(s == "running" for s in statuses):
        return "incomplete"
    if any(s == "fail" for s in statuses) or (strict and any(s == "warn" for s in statuses)):
        return "fail"
    if not any(s in ("pass", "warn") for s in statuses):
        return "incomplete"
    return "pass"
