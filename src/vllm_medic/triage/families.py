"""Category families: weighted vocabularies that classify a line no exact signature knows.

Data: `data/families.yaml` (validated on load like the catalogue; a bad entry names the file and the
entry). Judgement: `FamilyBook.score()` is a pure function of the line, its traceback frames and its
neighbouring lines; it returns the winning family only when the score reaches the threshold AND beats
the runner-up by the margin, and says which words decided it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from vllm_medic.errors import UsageError
from vllm_medic.model import CATEGORY_VALUES
from vllm_medic.triage.lazy_regex import LazyRegex, Regex

_FAMILY_KEYS = {
    "id",
    "category",
    "runtime_category",
    "title",
    "words",
    "examples",
    "outranks",
    "outrank_min",
    "computed",
}
_TOP_KEYS = {
    "version",
    "threshold",
    "margin",
    "frame_weight",
    "neighbour_weight",
    "origin_weight",
    "lean_threshold",
    "lean_margin",
    "failure_words",
    "families",
}
_QUIET_LEVELS = {"INFO", "DEBUG"}


@dataclass(frozen=True)
class Example:
    line: str
    source: str


@dataclass(frozen=True)
class Family:
    id: str
    category: str
    title: str
    words: tuple[tuple[Regex, float], ...]
    runtime_category: str | None = None
    examples: tuple[Example, ...] = ()
    # A more specific family beats the listed broader ones whenever its own words, found in the line,
    # its emitter or its frames (not in neighbours), reach `outrank_min`: a cache pool or KV connector
    # that "failed to allocate" is cache machinery first, memory second.
    outranks: tuple[str, ...] = ()
    outrank_min: float = 0.0
    # Evidence a word list cannot express (a comparison of numbers the line and its neighbours print):
    # name of a check in COMPUTED_EVIDENCE -> weight, counted like a word found on the line.
    computed: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class FamilyVerdict:
    """The winning family, its score, the runner-up's, and the words that decided it."""

    family: Family
    score: float
    runner_up: str | None
    runner_up_score: float
    words: tuple[str, ...] = ()
    note: str = ""  # how the verdict was reached when it was not the plain top score

    @property
    def why(self) -> str:
        decided = ", ".join(self.words[:6])
        against = (
            f" vs {self.runner_up} {self.runner_up_score:.1f}"
            if self.runner_up
            else " (no other family scored)"
        )
        note = f" ({self.note})" if self.note else ""
        return f"family `{self.family.id}` scored {self.score:.1f}{against}{note}; decided by {decided}"


@dataclass
class FamilyBook:
    families: list[Family] = field(default_factory=list)
    failure_words: tuple[Regex, ...] = ()
    threshold: float = 4.0
    margin: float = 2.0
    frame_weight: float = 0.6
    neighbour_weight: float = 0.5
    origin_weight: float = 1.0
    # A root that only the novelty or generic layer found still leans to the family its own words
    # favour: `score()` at these lower bars (the category and its fix; the layer stays what found it;
    # verdict._lean).
    lean_threshold: float = 1.0
    lean_margin: float = 0.5
    origin: str = ""

    def carries_failure_word(self, message: str) -> bool:
        return any(p.search(message) for p in self.failure_words)

    def screen_patterns(self) -> list[str]:
        """What the bulk screen must let through so that unmarked failure lines are reached."""
        return [p.pattern for p in self.failure_words]

    def by_id(self, family_id: str) -> Family | None:
        return next((f for f in self.families if f.id == family_id), None)

    def score(
        self,
        message: str,
        frames: list[str] | None = None,
        neighbours: list[str] | None = None,
        origin: str | None = None,
        *,
        cut: bool = False,
        threshold: float | None = None,
        margin: float | None = None,
    ) -> FamilyVerdict | None:
        """Score every family over the line (full weight), its emitter (`origin`), its frames and its
        non-INFO neighbours. Where the line says little, the frames are the evidence and count in
        full: a bare `assert` statement (the line a message-less AssertionError points at) or a bare
        exception name (callers pass `frames_above()` when the scan did not fold them), what is left
        of a traceback cut before its exception line (`cut`), and a line no family's words reach 1 on
        (`CUDA error: invalid argument` raised inside a cache library is that library's failure)."""
        frames_text = "\n".join(frames or [])
        near = "\n".join(n for n in (neighbours or []) if _counts_as_neighbour(n))
        bare = bool(cut or _BARE_ASSERT.match(message) or _BARE_EXCEPTION.fullmatch(message))
        if not bare and frames_text:
            bare = all(sum(w for p, w in fam.words if p.search(message)) < 1.0 for fam in self.families)
        frame_weight = 1.0 if bare else self.frame_weight
        scored: list[tuple[float, float, Family, list[str]]] = []
        computed_top: set[str] = set()
        for fam in self.families:
            total = own = 0.0
            words: list[str] = []
            for pat, weight in fam.words:
                if m := pat.search(message):
                    total += weight
                    own += weight
                    words.append(f"'{m.group(0)[:40]}' (line, {weight:g})")
                elif origin and (m := pat.search(origin)):
                    w = weight * self.origin_weight
                    total += w
                    own += w
                    words.append(f"'{m.group(0)[:40]}' (emitter, {w:g})")
                elif frames_text and (m := pat.search(frames_text)):
                    w = weight * frame_weight
                    total += w
                    own += w
                    words.append(f"'{m.group(0)[:40]}' (frames, {w:g})")
                elif near and (m := pat.search(near)):
                    total += weight * self.neighbour_weight
                    words.append(f"'{m.group(0)[:40]}' (nearby line, {weight * self.neighbour_weight:g})")
            for check, weight in fam.computed:
                if found := COMPUTED_EVIDENCE[check](message, neighbours or []):
                    total += weight
                    own += weight
                    words.append(f"{found} ({weight:g})")
                    computed_top.add(fam.id)
            if total > 0:
                scored.append((total, own, fam, words))
        if not scored:
            return None
        scored.sort(key=lambda t: -t[0])
        best, _, fam, words = scored[0]
        second = scored[1] if len(scored) > 1 else None
        second_score = second[0] if second else 0.0
        if best < (self.threshold if threshold is None else threshold):
            return None
        for total, own, challenger, cwords in scored[1:]:
            if fam.id in computed_top:
                break  # numbers the line prints (a pool at 0) are not outranked by another family's words
            if fam.id in challenger.outranks and challenger.outrank_min and own >= challenger.outrank_min:
                return FamilyVerdict(
                    challenger,
                    total,
                    fam.id,
                    best,
                    tuple(cwords),
                    note=f"outranks `{fam.id}`: its own evidence on the line, emitter or frames reaches {challenger.outrank_min:g}",
                )
        margin_needed = self.margin if margin is None else margin
        if best - second_score < margin_needed:
            # On top but within the margin of families it outranks: its own evidence decides, as it does
            # from below (blind round 9: a mamba cache that "can not alloc"; round 10: a torch build
            # without libuv, raised inside c10d's frames). The margin is then held against the best
            # family it does not outrank, or whose computed evidence (numbers on the line) scored.
            own_best = scored[0][1]
            if not (fam.outrank_min and own_best >= fam.outrank_min):
                return None
            rivals = [s for s in scored[1:] if s[2].id not in fam.outranks or s[2].id in computed_top]
            rival_score = rivals[0][0] if rivals else 0.0
            if best - rival_score < margin_needed:
                return None
            runner_up = second[2].id if second else None
            return FamilyVerdict(
                fam,
                best,
                runner_up,
                second_score,
                tuple(words),
                note=f"outranks `{runner_up}`: its own evidence on the line, emitter or frames reaches "
                f"{fam.outrank_min:g}",
            )
        return FamilyVerdict(fam, best, second[2].id if second else None, second_score, tuple(words))


_BARE_ASSERT = re.compile(r"\s*assert\b")
_FRAME_LINE = re.compile(r'\bFile "(?P<file>[^"]*)", line \d+(?:, in (?P<func>[\w<>.]+))?')
_BARE_EXCEPTION = re.compile(r"\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception):?\s*")
_EXCEPTION_HEAD = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): \S")


def frames_above(message: str, before: list[str]) -> list[str]:
    """For a message-less exception (`AssertionError` alone) whose traceback the scan did not fold:
    the frames (`file:function`) and `assert`/code lines printed just above it are its only evidence.
    An exception line with a message gets the frame lines only, and only when they run unbroken up
    to it (a paste that starts inside the traceback, its header cut off: blind round 8's LMCache
    allocator frames above `CUDA error: invalid argument`)."""
    if _BARE_EXCEPTION.fullmatch(message):
        out: list[str] = []
        for raw in before:
            if m := _FRAME_LINE.search(raw):
                out.append(f"{m.group('file')}:{m.group('func') or ''}")
            elif raw.strip() and raw[:1] in (" ", "\t") and not raw.strip().startswith(("^", "~")):
                out.append(raw.strip())
        return out
    if not _EXCEPTION_HEAD.match(message):
        return []
    frames: list[str] = []
    for raw in reversed(before):
        if m := _FRAME_LINE.search(raw):
            frames.append(f"{m.group('file')}:{m.group('func') or ''}")
        elif not raw.strip() or raw[:1] not in (" ", "\t"):
            break
    return frames[::-1]


_ASKED_TOKENS = re.compile(r"(?i)\b(?:try|tried|trying) to allocate (\d+) tokens")
_EVICTABLE = re.compile(r"(?i)evictable(?:_size)?_?(?:\(\))?\s*[=:]\s*(\d+)")


def evictable_covers_request(message: str, neighbours: list[str]) -> str | None:
    """A token-pool allocation failed although the pool's own report says more tokens were evictable
    than were asked for: the cache did not evict, memory was not exhausted (SGLang prints the
    `Try to allocate N tokens` request and its pools' `evictable_size` next to every such error)."""
    asked = _ASKED_TOKENS.search(message) or next(
        (m for n in neighbours[-3:] if (m := _ASKED_TOKENS.search(n))), None
    )
    if asked is None:
        return None
    evictable = [int(m.group(1)) for t in (message, *neighbours) for m in _EVICTABLE.finditer(t)]
    want = int(asked.group(1))
    if evictable and max(evictable) >= want:
        return f"{max(evictable)} tokens evictable >= {want} requested"
    return None


_POOL_AT_ZERO = re.compile(r"(?i)\b(?:available|free)_size(?:\(\))?\s*[=:]\s*0\b")
_POOL_FREE = re.compile(r"(?i)\b(?:available|free)_size(?:\(\))?\s*[=:]\s*(\d+)")
_POOL_ASKED = re.compile(r"(?i)\b(?:num_reqs|num_tokens|need(?:ed)?|requested|required)\s*[=:]\s*(\d+)")


def pool_empty(message: str, neighbours: list[str]) -> str | None:
    """The line prints its pool's free/available counter at 0 (SGLang's allocators print
    `available_size()=0` when a request could not get a single token), or below what the same line
    says was asked for (`available_size()=1, num_reqs=2`): the pool is exhausted."""
    if m := _POOL_AT_ZERO.search(message):
        return f"`{m.group(0)}` (the pool is empty)"
    free, asked = _POOL_FREE.search(message), _POOL_ASKED.search(message)
    if free and asked and int(free.group(1)) < int(asked.group(1)):
        return f"`{free.group(0)}` < `{asked.group(0)}` (the pool holds less than asked)"
    return None


COMPUTED_EVIDENCE = {"evictable-covers-request": evictable_covers_request, "pool-empty": pool_empty}


def _counts_as_neighbour(raw: str) -> bool:
    """INFO/DEBUG neighbours are routine (an NCCL INFO banner next to an unrelated error): skip them."""
    from vllm_medic.triage.normalize import normalize_line

    ev = normalize_line(raw[:2048])
    return ev.level not in _QUIET_LEVELS and bool(ev.message.strip())


def _fail(origin: str, where: str, why: str) -> UsageError:
    return UsageError(f"families {origin}: {where}: {why}")


def _number(origin: str, where: str, value: Any, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise _fail(origin, where, "must be a non-negative number")
    return float(value)


def _regex(pattern: str, lazy: bool) -> Regex:
    return LazyRegex(pattern) if lazy else re.compile(pattern)


def _words(origin: str, where: str, value: Any, lazy: bool) -> tuple[tuple[Regex, float], ...]:
    if not isinstance(value, dict) or not value:
        raise _fail(origin, where, "`words` must be a non-empty mapping of regular expression -> weight")
    out = []
    for pattern, weight in value.items():
        if not isinstance(pattern, str) or not pattern:
            raise _fail(origin, where, "every word must be a non-empty regular expression")
        w = _number(origin, f"{where} {pattern!r}", weight, 0.0)
        try:
            out.append((_regex(pattern, lazy), w))
        except re.error as exc:
            raise _fail(origin, where, f"bad regular expression {pattern!r}: {exc}") from None
    return tuple(out)


def _examples(origin: str, where: str, value: Any) -> tuple[Example, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _fail(origin, where, "`examples` must be a list of {line, source}")
    out = []
    for i, ex in enumerate(value, 1):
        if (
            not isinstance(ex, dict)
            or set(ex) - {"line", "source"}
            or not isinstance(ex.get("line"), str)
            or not isinstance(ex.get("source"), str)
            or not ex["source"].startswith(("https://", "http://", "tests/"))
        ):
            raise _fail(origin, f"{where} example {i}", "needs `line` and a `source` URL")
        out.append(Example(ex["line"], ex["source"]))
    return tuple(out)


def parse_families(doc: Any, origin: str, *, lazy: bool = False) -> FamilyBook:
    """The families document, validated; `lazy` (the shipped file, compiled by the tests): its regular
    expressions are compiled on first use."""
    if not isinstance(doc, dict):
        raise _fail(origin, "top level", "must be a mapping with `families:`")
    unknown = set(doc) - _TOP_KEYS
    if unknown:
        raise _fail(origin, "top level", f"unknown key(s) {sorted(unknown)}")
    book = FamilyBook(origin=origin)
    book.threshold = _number(origin, "threshold", doc.get("threshold"), book.threshold)
    book.margin = _number(origin, "margin", doc.get("margin"), book.margin)
    book.frame_weight = _number(origin, "frame_weight", doc.get("frame_weight"), book.frame_weight)
    book.neighbour_weight = _number(
        origin, "neighbour_weight", doc.get("neighbour_weight"), book.neighbour_weight
    )
    book.origin_weight = _number(origin, "origin_weight", doc.get("origin_weight"), book.origin_weight)
    book.lean_threshold = _number(origin, "lean_threshold", doc.get("lean_threshold"), book.lean_threshold)
    book.lean_margin = _number(origin, "lean_margin", doc.get("lean_margin"), book.lean_margin)
    fw = doc.get("failure_words") or []
    if not isinstance(fw, list) or not all(isinstance(p, str) and p for p in fw):
        raise _fail(origin, "failure_words", "must be a list of regular expressions")
    try:
        book.failure_words = tuple(_regex(p, lazy) for p in fw)
    except re.error as exc:
        raise _fail(origin, "failure_words", f"bad regular expression: {exc}") from None
    entries = doc.get("families")
    if not isinstance(entries, list) or not entries:
        raise _fail(origin, "families", "must be a non-empty list")
    seen: set[str] = set()
    for i, entry in enumerate(entries):
        where = f"family {i + 1}"
        if not isinstance(entry, dict):
            raise _fail(origin, where, "each family must be a mapping")
        fid = entry.get("id")
        if not isinstance(fid, str) or not re.fullmatch(r"[a-z0-9][a-z0-9_.\-]*", fid) or fid in seen:
            raise _fail(origin, where, "needs a unique `id` of lowercase letters, digits, '-', '_' or '.'")
        where = f"family {i + 1} ({fid})"
        unknown = set(entry) - _FAMILY_KEYS
        if unknown:
            raise _fail(origin, where, f"unknown field(s) {sorted(unknown)}; allowed: {sorted(_FAMILY_KEYS)}")
        for key in ("category", "runtime_category"):
            value = entry.get(key)
            if (key == "category" or value is not None) and value not in CATEGORY_VALUES:
                raise _fail(origin, where, f"{key} {value!r} is not one of {list(CATEGORY_VALUES)}")
        title = entry.get("title")
        if not isinstance(title, str) or not title.strip():
            raise _fail(origin, where, "needs a `title`")
        computed = entry.get("computed") or {}
        if not isinstance(computed, dict) or set(computed) - set(COMPUTED_EVIDENCE):
            raise _fail(
                origin, where, f"`computed` must map check names {sorted(COMPUTED_EVIDENCE)} to weights"
            )
        outranks = entry.get("outranks") or []
        if not isinstance(outranks, list) or not all(isinstance(o, str) for o in outranks):
            raise _fail(origin, where, "`outranks` must be a list of family ids")
        seen.add(fid)
        book.families.append(
            Family(
                id=fid,
                category=entry["category"],
                title=title.strip(),
                words=_words(origin, where, entry.get("words"), lazy),
                runtime_category=entry.get("runtime_category"),
                examples=_examples(origin, where, entry.get("examples")),
                outranks=tuple(outranks),
                outrank_min=_number(origin, f"{where} outrank_min", entry.get("outrank_min"), 0.0),
                computed=tuple(
                    (name, _number(origin, f"{where} computed {name}", w, 0.0))
                    for name, w in computed.items()
                ),
            )
        )
    ids = {f.id for f in book.families}
    for fam in book.families:
        if unknown := set(fam.outranks) - ids:
            raise _fail(origin, f"family {fam.id}", f"outranks unknown family id(s) {sorted(unknown)}")
    return book


@functools.cache
def load_families() -> FamilyBook:
    """The shipped `data/families.yaml` (parsed once per process)."""
    from vllm_medic.triage.catalogue import is_yaml_error, safe_yaml

    origin = "data/families.yaml"
    text = (resources.files("vllm_medic.triage") / "data" / "families.yaml").read_text(encoding="utf-8")
    try:
        doc = safe_yaml(text)
    except Exception as exc:
        if not is_yaml_error(exc):
            raise
        raise _fail(origin, "YAML", str(exc).splitlines()[0] if str(exc) else "cannot parse") from None
    return parse_families(doc, origin, lazy=True)
