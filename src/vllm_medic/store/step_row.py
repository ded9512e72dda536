"""One step of a recorded run as the history table holds it: the record writers hand the store and the
store reads back. A run read from the store is a JSON document (`report --json`); ``to_json`` is a step
of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from vllm_medic.model import Finding


@dataclass(frozen=True)
class StepRow:
    name: str
    status: str  # one of store.api.STEP_STATUSES, checked when it is written
    findings: list[dict[str, Any]] = field(default_factory=list)  # Finding.to_dict() each
    data: dict[str, Any] = field(default_factory=dict)  # what the step measured
    updated_at: str | None = None  # set by the store on each write

    @classmethod
    def of(
        cls, name: str, status: str, findings: Iterable[Finding | dict[str, Any]], data: dict[str, Any]
    ) -> StepRow:
        return cls(name, status, [_finding_dict(f) for f in findings], data)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "findings": self.findings,
            "data": self.data,
            "updated_at": self.updated_at,
        }


def _finding_dict(f: Any) -> dict[str, Any]:
    if isinstance(f, Finding):
        return f.to_dict()
    if isinstance(f, dict):
        return f
    raise ValueError(f"a finding must be a Finding or its dict, not {type(f).__name__}")
