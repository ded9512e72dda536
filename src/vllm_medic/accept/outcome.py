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


#: The run verdicts, as stored and printed in JSON/JUnit (stable spellings) and as the sheet says them.
VERDICT_LABELS = {
    "pass": "pass",
    "pass_unverified": "pass (environment not verified)",
    "fail": "fail",
    "incomplete": "incomplete",
}


def verdict_label(verdict: str) -> str:
    return VERDICT_LABELS.get(verdict, verdict)


def environment_status(steps: list[StepOutcome]) -> str:
    """What the archive step proved about the environment: pass / warn / fail when a snapshot was captured
    and checked (preflight rules plus the live cross-checks), ``not_verified`` otherwise."""
    archive = next((s for s in steps if s.name == "archive"), None)
    env = (archive.data.get("environment") or {}) if archive is not None else {}
    status = env.get("status") if isinstance(env, dict) else None
    return status if status in ("pass", "warn", "fail") else "not_verified"


def run_verdict(steps: list[StepOutcome], interrupted: bool, strict: bool = False) -> str:
    """incomplete: interrupted before the end (even after a failure: the store marks it so too), or no
    step ran at all; fail: a step failed (with strict, or warned), or the environment check failed;
    pass: every step that ran passed and the environment was captured and checked without a fail;
    pass_unverified: the loop passed but no environment was captured and checked (nothing is proven about
    the driver, image or launch the numbers were measured on)."""
    statuses = [s.status for s in steps]
    if interrupted or any(s == "running" for s in statuses):
        return "incomplete"
    if any(s == "fail" for s in statuses) or (strict and any(s == "warn" for s in statuses)):
        return "fail"
    env = environment_status(steps)
    if env == "fail" or (strict and env == "warn"):
        return "fail"
    if not any(s in ("pass", "warn") for s in statuses):
        return "incomplete"
    return "pass" if env in ("pass", "warn") else "pass_unverified"
