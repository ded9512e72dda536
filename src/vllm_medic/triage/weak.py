"""The weak layer: the last look before `root_cause: null`.

When the first pass found no root at all (no signature, family, novelty or generic line, no promoted
weak signal, no unexplained restart), the files are read a second time for the earliest line that
carries a weak failure cue (`data/weak_cues.yaml`: weak failure words, statistics that show no cache
reuse, HTTP error statuses, non-zero exit codes and kill signals) and that the healthy model
(`data/healthy_templates.json`) does not know. That line is the root with layer `weak`, the lowest
confidence and a `why` that names the cue.

It costs nothing on a log that has a root: it runs only after `judge()` returned none. The second
pass screens whole blocks with the same engines as the scanner (prefilter.Screen) and stops at the
first qualifying line of each file. Files and text are read again; stdin from a pipe, `docker logs`
and `kubectl logs` are read from the copy the first pass kept of them (spool.py).
"""

from __future__ import annotations

import functools
import io
import os
import re
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from typing import IO, Any

from vllm_medic.errors import UsageError
from vllm_medic.model import Category
from vllm_medic.triage import lines as newlines
from vllm_medic.triage.catalogue import Catalogue, safe_yaml
from vllm_medic.triage.dedent import maybe_dedent
from vllm_medic.triage.normalize import Event, normalize_line
from vllm_medic.triage.novelty import load_healthy_model
from vllm_medic.triage.parallel import jobs_for, scan_in_workers
from vllm_medic.triage.prefilter import Screen
from vllm_medic.triage.scanner import Accumulator, Hit
from vllm_medic.triage.sources import LogSource

LAYER_WEAK = "weak"
CONF_WEAK = 0.2
BLOCK_BYTES = 4 * 1024 * 1024
CONTEXT_LINES = 3
_MAX_LINE = 64 * 1024
_WARNING_LEVELS = {"WARNING", "WARN"}
_PY_WARNING = re.compile(r"\b[A-Z]\w*Warning:")
_STARTED = re.compile(r"Application startup complete|Uvicorn running on")
_UNLESS = {None, "started", "answered_2xx"}
_MEMO_MAX = 4096


@dataclass(frozen=True)
class Cue:
    id: str
    why: str
    patterns: tuple[re.Pattern[str], ...]
    healthy_check: bool = True
    unless: str | None = None
    category: str | None = None
    examples: tuple[tuple[str, str], ...] = ()
    skip_levels: frozenset[str] = frozenset()


@dataclass(frozen=True)
class WeakFind:
    """The weak root: the line (as a Hit), the cue it carries and the words that matched."""

    hit: Hit
    cue: Cue
    matched: str
    warning: bool


@dataclass(frozen=True)
class Context:
    """What the first pass knows that guards a cue: a healthy start-up anywhere, files that answered 2xx."""

    started: bool
    answered: frozenset[int]


def _fail(origin: str, where: str, why: str) -> UsageError:
    return UsageError(f"{origin}: {where}: {why}")


def parse_cues(doc: Any, origin: str) -> tuple[Cue, ...]:
    if not isinstance(doc, dict) or not isinstance(doc.get("cues"), list):
        raise _fail(origin, "cues", "must be a list")
    out: list[Cue] = []
    for i, raw in enumerate(doc["cues"]):
        where = f"cue #{i + 1}"
        if not isinstance(raw, dict) or not raw.get("id") or not raw.get("patterns"):
            raise _fail(origin, where, "needs an id and patterns")
        if raw.get("unless") not in _UNLESS:
            raise _fail(origin, where, f"unless must be one of {sorted(u for u in _UNLESS if u)}")
        try:
            pats = tuple(re.compile(p) for p in raw["patterns"])
        except re.error as exc:
            raise _fail(origin, where, f"bad regular expression: {exc}") from None
        out.append(
            Cue(
                id=str(raw["id"]),
                why=str(raw.get("why") or raw["id"]),
                patterns=pats,
                healthy_check=bool(raw.get("healthy_check", True)),
                unless=raw.get("unless"),
                category=raw.get("category"),
                examples=tuple((str(e["line"]), str(e.get("source", ""))) for e in raw.get("examples") or []),
                skip_levels=frozenset(str(x).upper() for x in raw.get("skip_levels") or []),
            )
        )
    return tuple(out)


@functools.cache
def load_cues() -> tuple[Cue, ...]:
    origin = "data/weak_cues.yaml"
    text = (resources.files("vllm_medic.triage") / "data" / "weak_cues.yaml").read_text(encoding="utf-8")
    return parse_cues(safe_yaml(text), origin)


def screen_patterns() -> list[str]:
    """Every cue's patterns: what the first pass also screens for (scanner.build_screens `flagged`)."""
    return [p.pattern for c in load_cues() for p in c.patterns]


@functools.cache
def _screen() -> Screen:
    return Screen(screen_patterns(), use_hyperscan=True)


def cue_of(
    ev: Event, cues: Iterable[Cue], ctx: Context, index: int, catalogue: Catalogue | None = None
) -> tuple[Cue, str] | None:
    """The first cue this line carries, with the words that matched, or None: no cue, a healthy
    template, a guard that holds (a healthy start-up, a file that answered 2xx) or a noise line."""
    message = ev.message
    if not message.strip():
        return None
    healthy: bool | None = None
    for cue in cues:
        if ev.level is not None and ev.level.upper() in cue.skip_levels:
            continue
        m = next((m for p in cue.patterns if (m := p.search(message))), None)
        if m is None:
            continue
        if (cue.unless == "started" and ctx.started) or (
            cue.unless == "answered_2xx" and index in ctx.answered
        ):
            return None  # the guard decides the line: no later cue may claim it
        if cue.healthy_check:
            if healthy is None:
                healthy = load_healthy_model().is_healthy(message)
            if healthy:
                continue
        if (
            catalogue is not None
            and (sig := catalogue.classify(message, [])) is not None
            and sig.role == "noise"
        ):
            return None  # a line the catalogue knows to be harmless
        return cue, m.group(0)
    return None


def _decode(raw: bytes | bytearray) -> str:
    return bytes(raw[:4096]).decode("utf-8", "replace").rstrip("\r")


def _context(data: bytes | bytearray, start: int, stop: int, end: int) -> tuple[list[str], list[str]]:
    before: list[str] = []
    pos = start
    while pos > 0 and len(before) < CONTEXT_LINES:
        prev = data.rfind(b"\n", 0, pos - 1) + 1
        before.insert(0, _decode(data[prev : pos - 1]))
        pos = prev
    after: list[str] = []
    pos = stop + 1
    while pos < end and len(after) < CONTEXT_LINES:
        nxt = data.find(b"\n", pos, end)
        nxt = end if nxt < 0 else nxt
        after.append(_decode(data[pos:nxt]))
        pos = nxt + 1
    return before, after


def scan_stream(
    stream: IO[bytes],
    name: str,
    index: int,
    judge_line: Callable[[Event], tuple[Cue, str] | None],
    screen: Screen | None = None,
    begin: tuple[int, int] = (0, 0),
) -> WeakFind | None:
    """The first line of one stream that `judge_line` accepts. Blocks are screened in bulk; only the
    lines the screen lets through are parsed. `begin`: (byte offset of a line start, lines before it)
    where the first pass saw the first block holding a cue; nothing before it can qualify."""
    screen = screen or _screen()
    base = begin[1]  # lines before `data`
    if begin[0]:
        _seek(stream, begin[0])
    leftover = b""
    while True:
        chunk = stream.read(BLOCK_BYTES)
        final = not chunk
        data = leftover + chunk if leftover else chunk
        if final and not data:
            return None
        end = len(data) if final else data.rfind(b"\n") + 1
        if end == 0 and len(data) < 4 * BLOCK_BYTES:
            leftover = data  # one line longer than a block: read on
            continue
        end = end or len(data)
        counted, counted_at, last_start = 0, 0, -1
        for pos in screen.positions(data, end):
            start = data.rfind(b"\n", 0, pos) + 1
            if start == last_start:
                continue
            last_start = start
            stop = data.find(b"\n", pos, end)
            stop = end if stop < 0 else stop
            counted += newlines.count(data, counted_at, start)
            counted_at = start
            raw = data[start : min(stop, start + _MAX_LINE)]
            ev = normalize_line(bytes(raw), name, base + counted + 1)
            found = judge_line(ev)
            if found is not None:
                before, after = _context(data, start, stop, end)
                hit = Hit(ev, None, index, before=before, after=after, kind=LAYER_WEAK)
                level = ev.level in _WARNING_LEVELS or bool(_PY_WARNING.search(ev.message))
                return WeakFind(hit, found[0], found[1], level)
        base += counted + newlines.count(data, counted_at, end)
        leftover = data[end:]
        if final:
            return None


def _second_look(
    stream: IO[bytes],
    name: str,
    index: int,
    judge_line: Callable[[Event], tuple[Cue, str] | None],
    screen: Screen,
    acc: Accumulator,
) -> WeakFind | None:
    """The first qualifying line of a source the first pass screened for cues: its recorded cue lines
    in order (read where they are, when the stream can be read at an offset), then, where recording
    stopped (`acc.weak_from`), the rest of the stream screened as usual."""
    recorded = acc.weak_lines.get(index)
    if recorded:
        read_at = _positional_reader(stream)
        if read_at is None:  # a compressed stream: read it from the first cue line on
            return scan_stream(stream, name, index, judge_line, screen, (recorded[0], recorded[1]))
        for k in range(0, len(recorded), 2):
            got = _judge_at(read_at, recorded[k], recorded[k + 1], name, index, judge_line)
            if got is not None:
                return got
    if index in acc.weak_from:
        return scan_stream(stream, name, index, judge_line, screen, acc.weak_from[index])
    return None


def _positional_reader(stream: IO[bytes]) -> Callable[[int, int], bytes] | None:
    """`read_at(offset, size)` relative to where the stream starts now, or None (not a plain file)."""
    if isinstance(stream, io.BytesIO):
        view = stream.getbuffer()
        base = stream.tell()
        return lambda off, n: bytes(view[base + off : base + off + n])
    if isinstance(stream, io.FileIO):
        fd, base = stream.fileno(), stream.tell()
        return lambda off, n: os.pread(fd, n, base + off)
    return None


_PARALLEL_LINES = 4000
_BEFORE_BYTES = 2048
_AFTER_BYTES = 6144


def _judge_at(
    read_at: Callable[[int, int], bytes],
    offset: int,
    lines_before: int,
    name: str,
    index: int,
    judge_line: Callable[[Event], tuple[Cue, str] | None],
) -> WeakFind | None:
    """Judge the line starting at `offset` (read with a little around it, for its context)."""
    lead = min(offset, _BEFORE_BYTES)
    after = _AFTER_BYTES
    while True:
        window = read_at(offset - lead, lead + after)
        stop = window.find(b"\n", lead)
        if stop >= 0 or len(window) < lead + after or after > _MAX_LINE:
            break
        after *= 4  # a long line: read more of it
    end = len(window)
    stop = end if stop < 0 else stop
    ev = normalize_line(window[lead : min(stop, lead + _MAX_LINE)], name, lines_before + 1)
    found = judge_line(ev)
    if found is None:
        return None
    if end == lead + after:  # the stream goes on: a cut last line is no context
        cut = window.rfind(b"\n", stop + 1)
        end = cut if cut > stop else stop
    before, after_lines = _context(window, lead, stop, end)
    whole = window.count(b"\n", 0, lead) - (1 if offset > lead else 0)  # the first line may be cut
    before = before[-whole:] if whole > 0 else []
    hit = Hit(ev, None, index, before=before, after=after_lines, kind=LAYER_WEAK)
    level = ev.level in _WARNING_LEVELS or bool(_PY_WARNING.search(ev.message))
    return WeakFind(hit, found[0], found[1], level)


def _seek(stream: IO[bytes], offset: int) -> None:
    try:
        stream.seek(offset)
    except (OSError, ValueError, AttributeError):  # not seekable: read up to it
        left = offset
        while left > 0 and (chunk := stream.read(min(left, BLOCK_BYTES))):
            left -= len(chunk)


def context_of(acc: Accumulator) -> Context:
    started = any(_STARTED.search(ev.message) for ev in acc.served.values())
    return Context(started=started, answered=frozenset(acc.ok_access))


def find_weak(
    streams: Iterable[tuple[int, LogSource]],
    acc: Accumulator,
    catalogue: Catalogue,
    earliest: Callable[[list[Hit]], list[Hit]],
) -> WeakFind | None:
    """`streams`: (source index, source) of the sources that can be read again. The earliest
    qualifying line over all of them (`earliest` orders hits in time: verdict._sorted). Several large
    files are read side by side in forked workers, as the first pass reads them (parallel.py)."""
    cues = load_cues()
    ctx = context_of(acc)
    # A source the first pass screened for cues and found none in needs no second read.
    pairs = [
        (index, src)
        for index, src in streams
        if src.opener is not None
        and (index not in acc.weak_screened or index in acc.weak_lines or index in acc.weak_from)
    ]
    screen = _screen()  # built before any fork, so workers share it
    memo: dict[tuple[str, bool], tuple[Cue, str] | None] = {}

    def one(k: int) -> WeakFind | None:
        index, src = pairs[k]

        def judge_line(ev: Event) -> tuple[Cue, str] | None:
            # Recurring lines (a warning every few hundred lines) are judged once per message.
            key = (ev.message, index in ctx.answered)
            if key not in memo:
                if len(memo) >= _MEMO_MAX:
                    memo.clear()
                memo[key] = cue_of(ev, cues, ctx, index, catalogue)
            return memo[key]

        assert src.opener is not None  # kept above
        try:
            with src.opener() as opened:
                # as the first pass read it: a spooled copy raw, a file dedented where it is indented
                stream: IO[bytes] = opened if src.spooled else maybe_dedent(opened)
                if index not in acc.weak_screened:
                    got = scan_stream(stream, src.name, index, judge_line, screen)
                else:
                    got = _second_look(stream, src.name, index, judge_line, screen, acc)
        except (OSError, EOFError, zlib.error):
            # A truncated or corrupt archive: the first pass already said how far it could read it.
            return None
        if got is not None:
            ev = got.hit.event
            ev.rank = src.rank if ev.rank is None else ev.rank
            ev.node = src.node if ev.node is None else ev.node
        return got

    if not pairs:
        return None
    # Workers pay off for sources read whole, or many recorded cue lines (each is parsed); a few are quick.
    recorded = sum(len(acc.weak_lines.get(index, ())) // 2 for index, _ in pairs)
    jobs = jobs_for(
        [
            src
            for index, src in pairs
            if index not in acc.weak_screened or index in acc.weak_from or recorded >= _PARALLEL_LINES
        ]
    )
    if jobs > 1:
        results: list[WeakFind | None] = list(scan_in_workers(len(pairs), jobs, catalogue, one))
    else:
        results = [one(k) for k in range(len(pairs))]
    found = [f for f in results if f is not None]
    if not found:
        return None
    first = earliest([f.hit for f in found])[0]
    return next(f for f in found if f.hit is first)


def describe(find: WeakFind) -> str:
    level = " on a WARNING line" if find.warning else ""
    n = len(load_healthy_model().templates)
    return (
        "no signature, family, novelty or generic line found a root; earliest line that is not one of "
        f"the {n} healthy templates and carries {find.cue.why} (`{find.matched[:60]}`, cue "
        f"`{find.cue.id}` in data/weak_cues.yaml){level}"
    )


def title_of(find: WeakFind) -> str:
    return f"Weak signal: {find.cue.why} (no failure line found)"


def default_category(find: WeakFind) -> str:
    return find.cue.category or Category.OTHER.value


__all__ = [
    "CONF_WEAK",
    "LAYER_WEAK",
    "Context",
    "Cue",
    "WeakFind",
    "context_of",
    "cue_of",
    "describe",
    "find_weak",
    "load_cues",
    "parse_cues",
    "scan_stream",
]
