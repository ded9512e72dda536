"""Repetition as the anomaly: a log that ends in the same wait/retry line printed over and over.

A healthy component prints such a line once or a few times; printed many times in a row with nothing
else happening, at the end of the log, it says that what it waits for never came. The rules are data
(`data/repetition.yaml`); `trailing_run` is the pure judgement over a file's last lines, which the
scanner keeps (`Accumulator.tails`). It is looked for only when no other layer found a root.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from vllm_medic.errors import UsageError
from vllm_medic.triage.catalogue import safe_yaml
from vllm_medic.triage.normalize import normalize_line
from vllm_medic.triage.scanner import Accumulator, Hit, Tail

LAYER_REPETITION = "repetition"
CONF_REPETITION = 0.2
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Rules:
    wait: tuple[re.Pattern[str], ...]
    elision: re.Pattern[str]
    min_repeats: int
    min_share: float


@dataclass(frozen=True)
class Run:
    """The trailing run of one file: where it starts and ends, how long it is, its share, the phrase."""

    first: int  # index into the tail's lines
    last: int
    count: int
    share: float
    phrase: str


@dataclass(frozen=True)
class RepetitionFind:
    hit: Hit
    run: Run
    last_line: int
    tail_only: bool

    @property
    def why(self) -> str:
        where = "of its last kept lines" if self.tail_only else "of the file's non-blank lines"
        return (
            f"no other layer found a root; the log ends in one wait/retry line (`{self.run.phrase}`) "
            f"printed {self.run.count} times in a row (lines {self.hit.event.line}-{self.last_line}, "
            f"{self.run.share:.0%} {where}; data/repetition.yaml asks >= {rules().min_repeats} and "
            f">= {rules().min_share:.0%}) with nothing else after it: what it waits for never happened"
        )


def parse_rules(doc: Any, origin: str) -> Rules:
    if not isinstance(doc, dict) or not isinstance(doc.get("wait"), list) or not doc["wait"]:
        raise UsageError(f"{origin}: wait: must be a non-empty list of regular expressions")
    try:
        wait = tuple(re.compile(p) for p in doc["wait"])
        elision = re.compile(str(doc.get("elision") or r"^\s*\.{2,}\s*$"))
    except re.error as exc:
        raise UsageError(f"{origin}: bad regular expression: {exc}") from None
    repeats, share = doc.get("min_repeats"), doc.get("min_share")
    if not isinstance(repeats, int) or repeats < 2:
        raise UsageError(f"{origin}: min_repeats must be an integer >= 2")
    if not isinstance(share, int | float) or not 0 < share <= 1:
        raise UsageError(f"{origin}: min_share must be a number in (0, 1]")
    return Rules(wait, elision, repeats, float(share))


@functools.cache
def rules() -> Rules:
    text = (resources.files("vllm_medic.triage") / "data" / "repetition.yaml").read_text(encoding="utf-8")
    return parse_rules(safe_yaml(text), "data/repetition.yaml")


def shape(message: str) -> str:
    """A line with its numbers masked and its spacing collapsed: a retry counter does not split a run."""
    return _SPACE.sub(" ", _NUMBER.sub("<n>", message)).strip()


def trailing_run(messages: list[str], r: Rules) -> Run | None:
    """The run of one wait/retry line that ends `messages` (a file's lines, prefixes peeled), or None.

    Blank lines and reporter elisions (`......`) are skipped, at the end and inside the run; any other
    line ends it. It counts when it is at least `min_repeats` long and `min_share` of the non-blank lines."""
    body = [i for i, m in enumerate(messages) if m.strip() and not r.elision.match(m)]
    if not body:
        return None
    last = body[-1]
    want = shape(messages[last])
    phrase = next((m.group(0) for p in r.wait if (m := p.search(messages[last]))), None)
    if phrase is None:
        return None
    count, first = 0, last
    for i in reversed(body):
        if shape(messages[i]) != want:
            break
        count, first = count + 1, i
    share = count / len(body)
    if count < r.min_repeats or share < r.min_share:
        return None
    return Run(first, last, count, share, phrase)


def find_repetition(
    acc: Accumulator, earliest: Callable[[list[Hit]], list[Hit]], r: Rules | None = None
) -> RepetitionFind | None:
    """The earliest file-ending run over all sources the scan kept a tail of."""
    r = r or rules()
    found: list[RepetitionFind] = []
    for index, tail in acc.tails.items():
        if (got := _of_tail(index, tail, acc, r)) is not None:
            found.append(got)
    if not found:
        return None
    first = earliest([f.hit for f in found])[0]
    return next(f for f in found if f.hit is first)


def _of_tail(index: int, tail: Tail, acc: Accumulator, r: Rules) -> RepetitionFind | None:
    events = [normalize_line(raw, tail.name, tail.first_line + i) for i, raw in enumerate(tail.lines)]
    run = trailing_run([ev.message for ev in events], r)
    if run is None:
        return None
    ev = events[run.first]
    ev.rank = tail.rank if ev.rank is None else ev.rank
    ev.node = tail.node if ev.node is None else ev.node
    hit = Hit(
        ev,
        None,
        index,
        before=list(tail.lines[max(0, run.first - 3) : run.first]),
        after=list(tail.lines[run.first + 1 : run.first + 4]),
        kind=LAYER_REPETITION,
    )
    hit.run = len(acc.banners.get(index, ()))
    tail_only = acc.lines.get(index, 0) > tail.first_line - 1 + len(tail.lines) or tail.first_line > 1
    return RepetitionFind(hit, run, events[run.last].line, tail_only)


__all__ = [
    "CONF_REPETITION",
    "LAYER_REPETITION",
    "RepetitionFind",
    "Rules",
    "Run",
    "find_repetition",
    "parse_rules",
    "rules",
    "shape",
    "trailing_run",
]
