"""Computed checks: a line whose anomaly is a comparison of the numbers it prints.

The checks are data (`data/computed_checks.yaml`): a regular expression with a named group per value
and a comparison `LEFT OP RIGHT` over those values. A line no signature claims that one of them
matches and whose comparison holds is a root of its own layer, `computed`; `why` quotes the values.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from vllm_medic.errors import UsageError
from vllm_medic.model import CATEGORY_VALUES
from vllm_medic.triage.catalogue import safe_yaml

LAYER_COMPUTED = "computed"
_ID = re.compile(r"[a-z0-9][a-z0-9_.-]*")
_OPS: dict[str, Callable[[int, int], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    "!=": operator.ne,
    ">": operator.gt,
    "<": operator.lt,
}
_COMPARE = re.compile(r"^(?P<left>[^<>=!]+?)\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<right>[^<>=!]+)$")
_TERM = re.compile(
    r"\s*(?P<sign>[+-])?\s*(?:count\((?P<count>\w+)\)|distinct\((?P<distinct>\w+)\)"
    r"|mod\(\s*(?P<mod_a>\w+)\s*,\s*(?P<mod_b>\w+)\s*\)|(?P<int>\d+)|(?P<name>[A-Za-z_]\w*))\s*"
)


@dataclass(frozen=True)
class Term:
    sign: int
    name: str | None = None  # a group's integer value
    count: str | None = None  # the number of comma-separated items in a group
    mod: tuple[str, str] | None = None  # round 18: the remainder of one group's value divided by another's
    distinct: str | None = None  # the number of different comma-separated items in a group
    literal: int = 0


@dataclass(frozen=True)
class Check:
    id: str
    category: str
    title: str
    pattern: re.Pattern[str]
    screen: tuple[str, ...]
    left: tuple[Term, ...]
    op: str
    right: tuple[Term, ...]
    compare: str
    fix: tuple[str, ...] = ()
    examples: tuple[tuple[str, str, bool], ...] = ()
    # A line the program prints just below (within `stated_within` lines) that states the consequence in
    # its own words: reported instead, the check quoted in `why`.
    stated_by: re.Pattern[str] | None = None
    stated_within: int = 1


@dataclass(frozen=True)
class ComputedFind:
    """A check that held on a line: the check, the values it read and the sides it compared."""

    check: Check
    values: tuple[tuple[str, str], ...]
    left: int
    right: int

    @property
    def why(self) -> str:
        terms = (*self.check.left, *self.check.right)
        counted = {t.count for t in terms if t.count}
        distinct = {t.distinct for t in terms if t.distinct}

        def show(k: str, v: str) -> str:
            if k in distinct:
                return f"{k} = '{v}' ({_items(v)} items, {_distinct(v)} different)"
            return f"{k} = '{v}' ({_items(v)} items)" if k in counted else f"{k} = {v}"

        shown = ", ".join(show(k, v) for k, v in self.values)
        return (
            f"computed check `{self.check.id}` (data/computed_checks.yaml): {self.check.compare} holds "
            f"({shown}: {self.left} {self.check.op} {self.right})"
        )


def _fail(origin: str, where: str, why: str) -> UsageError:
    return UsageError(f"{origin}: {where}: {why}")


def parse_side(text: str) -> tuple[Term, ...]:
    """`a - b + count(c) - distinct(c) + 2` as terms; raises ValueError on anything else."""
    terms: list[Term] = []
    pos = 0
    while pos < len(text):
        m = _TERM.match(text, pos)
        if m is None or m.end() == pos or (terms and not m.group("sign")):
            raise ValueError(f"cannot read `{text}` at `{text[pos:]}`")
        sign = -1 if m.group("sign") == "-" else 1
        if m.group("int") is not None:
            terms.append(Term(sign, literal=int(m.group("int"))))
        elif m.group("mod_a") is not None:
            terms.append(Term(sign, mod=(m.group("mod_a"), m.group("mod_b"))))
        else:
            terms.append(
                Term(sign, name=m.group("name"), count=m.group("count"), distinct=m.group("distinct"))
            )
        pos = m.end()
    if not terms:
        raise ValueError("empty side")
    return tuple(terms)


def _groups(terms: tuple[Term, ...]) -> set[str]:
    return {g for t in terms for g in (t.name, t.count, t.distinct, *(t.mod or ())) if g}


def _check(raw: Any, origin: str, where: str) -> Check:
    if not isinstance(raw, dict) or not all(raw.get(k) for k in ("id", "category", "pattern", "compare")):
        raise _fail(origin, where, "needs an id, category, pattern and compare")
    if not _ID.fullmatch(str(raw["id"])):
        raise _fail(origin, where, "id must match [a-z0-9][a-z0-9_.-]*")
    if raw["category"] not in CATEGORY_VALUES:
        raise _fail(origin, where, f"category must be one of {sorted(CATEGORY_VALUES)}")
    try:
        pattern = re.compile(raw["pattern"])
    except re.error as exc:
        raise _fail(origin, where, f"bad regular expression: {exc}") from None
    m = _COMPARE.match(str(raw["compare"]).strip())
    if m is None or m.group("op") not in _OPS:
        raise _fail(origin, where, "compare must read `LEFT OP RIGHT` with OP one of > >= < <= == !=")
    try:
        left, right = parse_side(m.group("left")), parse_side(m.group("right"))
    except ValueError as exc:
        raise _fail(origin, where, f"compare: {exc}") from None
    missing = (_groups(left) | _groups(right)) - set(pattern.groupindex)
    if missing:
        raise _fail(origin, where, f"compare names groups the pattern lacks: {sorted(missing)}")
    screen = raw.get("screen") or [raw["pattern"]]
    try:
        stated_by = re.compile(raw["stated_by"]) if raw.get("stated_by") else None
    except re.error as exc:
        raise _fail(origin, where, f"bad stated_by: {exc}") from None
    within = raw.get("stated_within", 1)
    if not isinstance(within, int) or within < 1:
        raise _fail(origin, where, "stated_within must be an integer >= 1")
    return Check(
        id=str(raw["id"]),
        category=str(raw["category"]),
        title=str(raw.get("title") or raw["id"]),
        pattern=pattern,
        screen=tuple(str(s) for s in screen),
        left=left,
        op=m.group("op"),
        right=right,
        compare=str(raw["compare"]).strip(),
        fix=tuple(str(s) for s in raw.get("fix") or []),
        examples=tuple(
            (str(e["line"]), str(e.get("source", "")), bool(e.get("fires", True)))
            for e in raw.get("examples") or []
        ),
        stated_by=stated_by,
        stated_within=within,
    )


def parse_checks(doc: Any, origin: str) -> tuple[Check, ...]:
    if not isinstance(doc, dict) or not isinstance(doc.get("checks"), list):
        raise _fail(origin, "checks", "must be a list")
    out = tuple(_check(raw, origin, f"check #{i + 1}") for i, raw in enumerate(doc["checks"]))
    ids = [c.id for c in out]
    if len(set(ids)) != len(ids):
        raise _fail(origin, "checks", "ids must be unique")
    return out


@functools.cache
def load_checks() -> tuple[Check, ...]:
    text = (resources.files("vllm_medic.triage") / "data" / "computed_checks.yaml").read_text(
        encoding="utf-8"
    )
    return parse_checks(safe_yaml(text), "data/computed_checks.yaml")


def _parts(value: str) -> list[str]:
    return [x.strip() for x in value.split(",") if x.strip()]


def _items(value: str) -> int:
    return len(_parts(value))


def _distinct(value: str) -> int:
    return len(set(_parts(value)))


def _value(term: Term, groups: dict[str, str]) -> int:
    if term.count is not None:
        return term.sign * _items(groups[term.count])
    if term.distinct is not None:
        return term.sign * _distinct(groups[term.distinct])
    if term.name is not None:
        return term.sign * int(groups[term.name])
    if term.mod is not None:
        divisor = int(groups[term.mod[1]])
        if divisor == 0:
            raise ValueError("mod by zero")
        return term.sign * (int(groups[term.mod[0]]) % divisor)
    return term.sign * term.literal


def evaluate(check: Check, message: str) -> ComputedFind | None:
    """The check on one line: None when its pattern does not match or its comparison fails."""
    m = check.pattern.search(message)
    if m is None:
        return None
    groups = {k: v for k, v in m.groupdict().items() if v is not None}
    try:
        left = sum(_value(t, groups) for t in check.left)
        right = sum(_value(t, groups) for t in check.right)
    except (KeyError, ValueError):
        return None
    if not _OPS[check.op](left, right):
        return None
    return ComputedFind(check, tuple(groups.items()), left, right)


def first_computed(message: str, checks: tuple[Check, ...] | None = None) -> ComputedFind | None:
    """The first check (in file order) that holds on this line."""
    for check in load_checks() if checks is None else checks:
        if (found := evaluate(check, message)) is not None:
            return found
    return None


def screen_patterns() -> list[str]:
    return [p for c in load_checks() for p in c.screen]


__all__ = [
    "LAYER_COMPUTED",
    "Check",
    "ComputedFind",
    "evaluate",
    "first_computed",
    "load_checks",
    "parse_checks",
    "parse_side",
    "screen_patterns",
]
