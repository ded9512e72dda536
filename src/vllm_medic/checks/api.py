"""`run_checks`: every registered rule over one snapshot and recipe, in the method's order.

A rule that raises becomes a `warn` finding naming the rule (one broken check never hides the rest).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vllm_medic.checks.facts import Facts
from vllm_medic.checks.registry import RULES, Rule, load_rules, register_rule_module, rule
from vllm_medic.collect.source_entry import SourceEntry
from vllm_medic.errors import UsageError
from vllm_medic.model import Category, Finding, Severity
from vllm_medic.recipes.model import Recipe
from vllm_medic.snapshot import Snapshot

__all__ = [
    "RULES",
    "Rule",
    "load_rules",
    "read_model_config",
    "register_rule_module",
    "rule",
    "run_checks",
    "severity_counts",
]

load_rules()  # populate RULES on import


def run_checks(
    snapshot: Snapshot,
    recipe: Recipe,
    *,
    model_config: dict[str, Any] | None = None,
    strategy: str | None = None,
    hardware: str | None = None,
    raw: dict[str, bytes] | None = None,
    sources: dict[str, SourceEntry] | None = None,
) -> list[Finding]:
    facts = Facts(
        snapshot=snapshot,
        model_config=model_config,
        strategy=strategy,
        hardware_override=hardware,
        raw=dict(raw or {}),
        sources=dict(sources or {}),
    )
    findings: list[Finding] = []
    for r in load_rules():
        try:
            findings.extend(r.func(facts, recipe))
        except Exception as exc:  # noqa: BLE001 - crash isolation: one broken rule never hides the rest
            findings.append(
                Finding(
                    id=r.id,
                    severity=Severity.WARN,
                    category=r.category,
                    title=f"Rule {r.id} could not run ({type(exc).__name__})",
                    evidence=[f"{type(exc).__name__}: {exc}"],
                    fix=["Check this by hand (see `vllm-medic rules`) and report the bug with the bundle."],
                )
            )
    return findings


def severity_counts(findings: list[Finding]) -> dict[str, int]:
    """How many findings of each verdict, every severity listed (not_checked counted apart from pass)."""
    counts = {sev.value: 0 for sev in Severity}
    for f in findings:
        counts[f.severity.value] += 1
    return counts


def read_model_config(path: str | Path) -> dict[str, Any]:
    """config.json from a model directory (or the file itself); bad input is a UsageError."""
    p = Path(path).expanduser()
    cfg = p / "config.json" if p.is_dir() else p
    from vllm_medic.safeio import kind_of

    kind = kind_of(cfg.resolve())
    if kind not in (None, "missing"):  # a FIFO would block the read; named, at once
        raise UsageError(f"--model {cfg} is {kind}, not a regular file: refused")
    if not cfg.is_file():
        raise UsageError(f"--model {path}: no config.json there (give a model directory or its config.json)")
    from vllm_medic.safeio import loads_json, read_arg_text

    try:
        data = loads_json(read_arg_text(cfg, "--model"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--model {cfg}: not readable JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"--model {cfg}: top level is not a JSON object")
    return data


CATEGORY_ORDER = [c.value for c in Category]
