"""The rule catalogue: every rule has a stable id, a category, a title, why it matters and the fix.

A rule is a small pure function ``(facts, recipe) -> list[Finding]`` registered with the `rule`
decorator. Rules live in modules listed in `RULE_MODULES`; another package adds its own module with
`register_rule_module("pkg.module")` (or by appending to the list) and its rules run in the same
method order as ours: driver_cuda, image_dependency, oom_startup/parallel_layout, nccl_network,
prefix_cache.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vllm_medic.model import Category, Finding, Severity

if TYPE_CHECKING:
    from vllm_medic.checks.facts import Facts
    from vllm_medic.recipes.model import Recipe

RuleFunc = Callable[["Facts", "Recipe"], list[Finding]]

RULE_MODULES: list[str] = [
    "vllm_medic.checks.rules_driver",
    "vllm_medic.checks.rules_gpu_health",
    "vllm_medic.checks.rules_image",
    "vllm_medic.checks.rules_layout",
    "vllm_medic.checks.rules_network",
    "vllm_medic.checks.rules_topology",
    "vllm_medic.checks.rules_cache",
    "vllm_medic.checks.rules_recipe",
    "vllm_medic.checks.rules_health",  # Xid, fabric, container limits, in-image (HLT-*)
]


@dataclass(frozen=True)
class Rule:
    id: str
    category: Category
    title: str
    why: str
    fix: tuple[str, ...]
    docs: tuple[str, ...]
    func: RuleFunc = field(compare=False, repr=False)
    order: int = 0
    by_hand: str = ""  # the command that captures the evidence: every not_checked finding ends with it

    def finding(
        self,
        severity: Severity | str,
        title: str,
        evidence: list[str],
        fix: list[str] | None = None,
        category: Category | str | None = None,
        docs: list[str] | None = None,
    ) -> Finding:
        """A finding of this rule. Default fix: warn/fail the catalogue's steps, info the by-hand check."""
        return Finding(
            id=self.id,
            severity=Severity(severity),
            category=Category(category or self.category),
            title=title,
            evidence=[str(e) for e in evidence],
            fix=self._fix_for(Severity(severity), fix),
            docs=list(self.docs) if docs is None else list(docs),
        )

    def _fix_for(self, severity: Severity, fix: list[str] | None) -> list[str]:
        if fix is None:
            return self._default_fix(severity)
        steps = list(fix)
        if severity is Severity.NOT_CHECKED and self.by_hand and self.capture_step() not in steps:
            steps.append(self.capture_step())  # a not-checked verdict always says how to capture the evidence
        return steps

    def not_checked(
        self, title: str, missing: list[str], fix: list[str] | None = None, docs: list[str] | None = None
    ) -> Finding:
        """What could not be checked: ``missing`` says which evidence was absent, unreadable or partial;
        the fix always ends with the command that captures it (``by_hand``)."""
        return self.finding(Severity.NOT_CHECKED, title, missing, fix, docs=docs)

    def not_applicable(self, title: str, evidence: list[str]) -> Finding:
        """The rule does not apply here (the recipe sets no such requirement, another platform): `info`,
        never a pass - nothing was checked."""
        return self.finding(Severity.INFO, title, evidence, [])

    def capture_step(self) -> str:
        return (
            f"Capture it: {self.by_hand} (saved under its canonical name in a directory, "
            "`vllm-medic check --from DIR` reads it)."
        )

    def _default_fix(self, severity: Severity) -> list[str]:
        if severity in (Severity.WARN, Severity.FAIL):
            return list(self.fix)
        if severity is Severity.NOT_CHECKED and self.by_hand:
            return [self.capture_step()]
        if severity is Severity.INFO and self.by_hand:
            return [f"Check by hand: {self.by_hand}"]
        return []

    def catalogue_entry(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "category": self.category.value,
            "title": self.title,
            "why": self.why,
            "fix": list(self.fix),
            "docs": list(self.docs),
            "by_hand": self.by_hand,
        }


RULES: list[Rule] = []


def rule(
    id: str,
    category: Category | str,
    title: str,
    why: str,
    fix: list[str] | tuple[str, ...],
    docs: list[str] | tuple[str, ...] = (),
    by_hand: str = "",
) -> Callable[[Callable[..., list[Finding]]], Callable[..., list[Finding]]]:
    """Register ``func(facts, recipe, rule)``; the catalogue stores it as a ``(facts, recipe)`` rule.

    The third argument hands the function its own `Rule`, so findings carry the catalogue's id, fix
    and docs without repeating them. The id must be unique across the catalogue.
    """

    def wrap(func: Callable[..., list[Finding]]) -> Callable[..., list[Finding]]:
        if any(r.id == id for r in RULES):
            raise ValueError(f"duplicate rule id {id}")
        holder: list[Rule] = []

        def bound(facts: Facts, recipe: Recipe) -> list[Finding]:
            return func(facts, recipe, holder[0])

        r = Rule(id, Category(category), title, why, tuple(fix), tuple(docs), bound, len(RULES), by_hand)
        holder.append(r)
        RULES.append(r)
        return func

    return wrap


def register_rule_module(module: str) -> None:
    """Add a module of rules (imported on first use); idempotent."""
    if module not in RULE_MODULES:
        RULE_MODULES.append(module)


def load_rules() -> list[Rule]:
    """Import every rule module and return the catalogue in the method's order."""
    for name in list(RULE_MODULES):
        importlib.import_module(name)
    return sorted(RULES, key=lambda r: (r.category.order, r.order))


def get_rule(rule_id: str) -> Rule:
    for r in load_rules():
        if r.id == rule_id:
            return r
    raise KeyError(rule_id)
