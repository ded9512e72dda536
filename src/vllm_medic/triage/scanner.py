"""Stream a log in large binary blocks; only the lines the prefilter flags (and their context) are
ever cut out of a block.

Memory stays bounded whatever the input: one block (4 MiB) plus, per signature and source, the
first occurrence and a few counters. A line longer than `MAX_LINE_BYTES` is cut for matching and
the rest of it skipped without being held. A regular file is read with `pread` straight into the
block (the partial last line is read again with the next block instead of being copied onto it).
"""

from __future__ import annotations

import gzip
import io
import os
import re
import stat
import threading
import zlib
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, overload

from vllm_medic.triage import lines as newlines
from vllm_medic.triage import recurring
from vllm_medic.triage.catalogue import Catalogue, Signature
from vllm_medic.triage.computed import ComputedFind, first_computed
from vllm_medic.triage.computed import screen_patterns as computed_screen_patterns
from vllm_medic.triage.families import FamilyVerdict, frames_above, load_families
from vllm_medic.triage.fields import is_structured_field
from vllm_medic.triage.lines import Block
from vllm_medic.triage.normalize import Event, may_hold_time, normalize_line
from vllm_medic.triage.novelty import load_healthy_model
from vllm_medic.triage.phase import RUN_BANNER, RUN_BANNERS, SERVED_EXTRA
from vllm_medic.triage.prefilter import GENERIC_PATTERNS, SERVED_PATTERNS, Screen
from vllm_medic.triage.tracebacks import ANNOUNCE, EXCEPTION_LINE, TracebackFolder
from vllm_medic.triage.wrappers import wrapper_kind

BLOCK_BYTES = 4 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024
CONTEXT_LINES = 3
WEAK_LINES_MAX = 200_000  # cue-pattern lines kept per source for the weak layer (3.2 MB of offsets)
_WEAK_KEYS_MAX = 65_536  # distinct recurring-line keys remembered per source (recurring.py)
_INERT_MAX = 65_536
_MAX_RANKS = 4096
_MAX_NAMES = 64
_GENERIC_LEVELS = {"ERROR", "CRITICAL", "FATAL"}
_FATAL_WORD = re.compile(r"\bFATAL\b|\bFatal error\b|\bpanic:")
_RAISE_STATEMENT = re.compile(r"^\s*raise\s+[A-Za-z_][\w.]*\s*(?:\(|from\b|$)")
# The source line IPython/Jupyter marks as a frame's current line in its traceback (`---> 85 raise
# NotImplementedError(...)`, `----> 1 from unsloth import X`, `-> 1417     raise ValueError(`): quoted
# code, never a log line; the traceback's exception line follows (round 17's unsloth-3553).
_IPYTHON_CURRENT_LINE = re.compile(
    r"^\s*-+> ?\d+\s"
    # round 19: rich's traceback box lists each frame's source as numbered rows between its bars
    # (`│   21 │   │   CUDA Setup failed ... │`, `│ ❱ 20 │   │   raise RuntimeError(`): quoted code
    # too; the exception line follows the box (bitsandbytes-492).
    r"|^\s*│\s*(?:❱\s*)?\d+\s*│"
)
# IPython's traceback header names the exception before `Traceback (most recent call last)`: a header
# like Python's own (generic at most), the exception line that closes it is the anomaly.
_IPYTHON_HEADER = re.compile(r"^[A-Za-z_][\w.]*\s{2,}Traceback \(most recent call last\)")
_MAX_RUNS = 64
# A file's last lines, kept for the repetition layer (repetition.py), each cut to this many bytes.
TAIL_LINES = 256
_TAIL_LINE_BYTES = 1024
# Verdicts remembered per source for single lines (message, level): serving logs repeat a few warnings
# thousands of times, each a candidate of the screen.
_MAX_VERDICTS = 4096
# `"message": "RendezvousConnectionError: ..."`: an exception quoted inside an indented JSON dump.
_QUOTED_EXCEPTION = re.compile(
    r'^\s*"(?:message|error|msg|exception|detail)"\s*:\s*"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)\b'
)
# A 2xx answer in an access log: a file that has one did not refuse every request.
_OK_ACCESS = Screen([r'HTTP/[\d.]+" 2\d\d\b', r'"response_code"\s*:\s*"?2\d\d\b'])
# Cheap backward probes for the last 2xx in a block (checked with _OK_ACCESS on their line).
_OK_NEEDLES = (b'" 2', b'"response_code":"2', b'"response_code": "2', b'"response_code":2')
ACCESS_4XX = "access-4xx"
# A block as read: a buffer reused from block to block (files), or the bytes a stream returned.


@dataclass
class Hit:
    """One recorded event with its classification and the lines around it."""

    event: Event
    signature: Signature | None
    source_index: int
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    # For lines no signature claims: "generic" (ERROR/Traceback/FATAL), "novel" (not a healthy template
    # and carries a failure word), "raise" (a lone `raise` line of a cut traceback).
    kind: str = "signature"
    family: FamilyVerdict | None = None
    run: int = 0
    # "follows" / "quotes" when the line only announces a cause printed next to it (wrappers.py).
    wrapper: str | None = None
    # A computed check (computed.py) that held on a line no signature claims.
    computed: ComputedFind | None = None

    @property
    def sig_id(self) -> str:
        if self.signature:
            return self.signature.id
        if self.computed is not None:
            return f"computed-{self.computed.check.id}"
        if self.family is not None:
            return f"family-{self.family.family.id}"
        return {"novel": "novel-line", "raise": "raise-line", "repetition": "repeated-wait"}.get(
            self.kind, "generic-error"
        )


@dataclass(frozen=True)
class Tail:
    """The last lines of one source as read (up to TAIL_LINES), and the line number of the first."""

    name: str
    first_line: int
    lines: list[str]
    rank: int | None = None
    node: str | None = None


@dataclass
class SigStats:
    count: int = 0
    ranks: set[int] = field(default_factory=set)
    sources: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)

    def add(self, ev: Event) -> None:
        self.count += 1
        if ev.rank is not None and len(self.ranks) < _MAX_RANKS:
            self.ranks.add(ev.rank)
        if ev.source not in self.sources and len(self.sources) < _MAX_NAMES:
            self.sources.append(ev.source)
        if ev.node and ev.node not in self.nodes and len(self.nodes) < _MAX_NAMES:
            self.nodes.append(ev.node)


@dataclass
class Accumulator:
    """What a scan keeps: first hit per (signature, source), counts, and served-traffic evidence."""

    first: dict[tuple[str, int, int], Hit] = field(default_factory=dict)  # (sig, source, run)
    stats: dict[str, SigStats] = field(default_factory=dict)
    served: dict[int, Event] = field(default_factory=dict)
    # Restart banners per source (an appended log holds several runs) and sources with a 2xx answer.
    banners: dict[int, list[Event]] = field(default_factory=dict)
    ok_access: set[int] = field(default_factory=set)
    # Per source: the first request refused (4xx) after the last one answered 2xx, while no 2xx has
    # followed it: the file ends with its requests being refused.
    refusing: dict[int, Hit] = field(default_factory=dict)
    lines: dict[int, int] = field(default_factory=dict)
    bytes: dict[int, int] = field(default_factory=dict)
    # The weak layer's cues, screened in the first pass (prefilter.Screen `flagged`), per source: the
    # lines a cue pattern may match, as (byte offset in the stream, lines before it) pairs flattened in
    # `weak_lines`; past WEAK_LINES_MAX of them, or at a line too long to screen whole, recording stops
    # and `weak_from` says where the second look (weak.py) must read on by itself. A screened source with
    # neither holds no cue line and is not read again.
    weak_screened: set[int] = field(default_factory=set)
    weak_lines: dict[int, array[int]] = field(default_factory=dict)
    weak_from: dict[int, tuple[int, int]] = field(default_factory=dict)
    tails: dict[int, Tail] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def record(self, hit: Hit) -> bool:
        """Count the hit; keep it when it is the first of its kind in its source. True when kept."""
        self.stats.setdefault(hit.sig_id, SigStats()).add(hit.event)
        hit.run = len(self.banners.get(hit.source_index, ()))
        # A wrapper is kept apart so the cause printed next to it (often the same class) is kept too.
        key = (hit.sig_id + ("~wrapper" if hit.wrapper else ""), hit.source_index, hit.run)
        prev = self.first.get(key)
        # Hits arrive in line order, except a cut traceback's, known only once it has ended.
        if prev is not None and prev.event.line <= hit.event.line:
            return False
        self.first[key] = hit
        return True


def classify(catalogue: Catalogue, ev: Event) -> tuple[Signature | None, bool]:
    """(signature, is_generic_anomaly). Noise signatures return (sig, False) and are dropped later."""
    if _RAISE_STATEMENT.match(ev.message) or _IPYTHON_CURRENT_LINE.match(ev.message):
        return None, False  # quoted source (`raise X(...) from e`): the exception line follows
    sig = catalogue.classify(ev.message, ev.frames)
    if sig is not None:
        return sig, False
    msg = ev.message
    if _QUOTED_EXCEPTION.match(msg):
        return None, True  # an exception quoted in a structured dump (torchelastic's error file, JSON)
    if ev.traceback_start is not None and msg.strip():
        return None, True  # a folded traceback (its statement line when the exception is bare)
    if not msg.strip() or msg[:1] in (" ", "\t"):
        return None, False
    if ev.level in _GENERIC_LEVELS:
        return None, True
    stripped = msg.strip()
    return None, bool(EXCEPTION_LINE.match(stripped) or _FATAL_WORD.search(stripped))


class SourceScanner:
    """Scans one source; call `feed_stream`. Keeps per-source state (line numbers, timestamps)."""

    def __init__(
        self,
        catalogue: Catalogue,
        screen: Screen,
        served: Screen,
        acc: Accumulator,
        index: int,
        name: str,
        *,
        rank: int | None = None,
        node: str | None = None,
    ) -> None:
        self.cat = catalogue
        self.screen = screen
        self.served_screen = served
        self.acc = acc
        self.index = index
        self.name = name
        self.rank = rank
        self.node = node
        self.line_no = 0
        self.last_ts: datetime | None = None
        self.year: int | None = None
        self.tail: deque[str] = deque(maxlen=CONTEXT_LINES)
        self.long_tail: deque[bytes] = deque(maxlen=TAIL_LINES)
        self.folder = TracebackFolder()
        self._weak_keys: dict[bytes, bool] = {}
        # Keys (recurring.py) of candidate lines that were nothing: their repeats are not parsed again.
        self._inert: set[bytes] = set()
        self.pending_after: list[Hit] = []
        self._last_lines: Sequence[bytes] = []
        self._last_base = 0
        self._carry: list[bytes] = []  # the previous block's last lines (a traceback may start there)
        self.total_bytes = 0
        self._refused_in_block: list[tuple[int, Hit]] = []
        self._verdicts: dict[tuple[str, str | None], LineVerdict] = {}
        self._block_at = 0  # byte offset in the stream where the block being scanned starts
        if screen.has_flagged:
            acc.weak_screened.add(index)

    # -- block level -------------------------------------------------------------------------
    def feed_stream(self, stream: IO[bytes]) -> None:
        leftover = b""
        skipping_long = False
        read1 = getattr(stream, "read1", None)
        fd = _regular_file(stream)
        next_off = os.lseek(fd, 0, os.SEEK_CUR) if fd is not None else 0
        buffers = _read_buffers(BLOCK_BYTES + MAX_LINE_BYTES + 1) if fd is not None else []
        failed = False
        while not failed:
            if fd is not None:
                # `leftover` is the tail of the previous block: read it again with the new bytes, so the
                # block needs no 4 MiB copy to prepend it. Blocks alternate between two buffers: the last
                # block scanned is looked at again (its last lines) once the input has ended.
                last = self._last_lines.block if isinstance(self._last_lines, BlockLines) else None
                into = buffers[1] if last is buffers[0] else buffers[0]
                size, error = _pread_into(fd, into, next_off - len(leftover), len(leftover) + BLOCK_BYTES)
                data_len = max(0, size - len(leftover))
                buf = into if data_len else leftover
                if not data_len:
                    size = len(leftover)
            else:
                data, error = _read_block(stream, read1)
                data_len = len(data)
            if error is not None:
                failed = True
                read_lines = (
                    self.line_no + leftover.count(b"\n") + (0 if fd is not None else data.count(b"\n"))
                )
                self.acc.warnings.append(
                    f"{self.name}: read stopped after line {read_lines} "
                    f"({type(error).__name__}: {error}); the part before it was scanned"
                )
            if not data_len:
                break
            self.total_bytes += data_len
            next_off += data_len
            if fd is None:
                buf = leftover + data if leftover else data
                size = len(buf)
            if skipping_long:
                nl = buf.find(b"\n", 0, size)
                if nl < 0:
                    leftover = b""
                    continue
                buf = bytes(buf[nl + 1 : size])
                size = len(buf)
                skipping_long = False
            cut = buf.rfind(b"\n", 0, size)
            if cut < 0:
                if size > MAX_LINE_BYTES:
                    self._block_at = self.total_bytes - size
                    self._long_line(bytes(buf[:size]))
                    skipping_long = True
                    leftover = b""
                else:
                    leftover = bytes(buf[:size])
                continue
            self._block_at = self.total_bytes - size
            self._block(buf, cut + 1)
            leftover = bytes(buf[cut + 1 : size])
            if len(leftover) > MAX_LINE_BYTES:
                self._block_at = self.total_bytes - len(leftover)
                self._long_line(leftover)
                skipping_long = True
                leftover = b""
        if leftover:
            self._block_at = self.total_bytes - len(leftover)
            self._block(leftover + b"\n", len(leftover) + 1)
        for ended in self.folder.flush():
            self._consider_cut(ended, self._last_lines, ended.line - self._last_base - 1, self._last_base)
        self.acc.lines[self.index] = self.line_no
        self.acc.bytes[self.index] = self.total_bytes
        kept = [raw.decode("utf-8", "replace").rstrip("\r") for raw in self.long_tail]
        self.acc.tails[self.index] = Tail(self.name, self.line_no - len(kept) + 1, kept, self.rank, self.node)

    def _long_line(self, head: bytes) -> None:
        self.acc.warnings.append(
            f"{self.name}: line {self.line_no + 1} is longer than {MAX_LINE_BYTES // 1024} KiB; "
            "only its start was scanned"
        )
        line = head[:MAX_LINE_BYTES] + b"\n"
        at = (self._block_at, self.line_no)
        self._block(line, len(line))
        # Only the line's start was screened: the second look must read the rest itself.
        if self.index in self.acc.weak_screened and self.index not in self.acc.weak_from:
            self.acc.weak_from[self.index] = at

    def _block(self, block: Block, end: int) -> None:
        """Scan `block[:end]` (whole lines; what follows `end` belongs to the next block)."""
        if self.index not in self.acc.served and self.served_screen.search(block, 0, end) >= 0:
            self._note_served(block, end)
        if self.index not in self.acc.ok_access and _OK_ACCESS.search(block, 0, end) >= 0:
            self.acc.ok_access.add(self.index)
        want_weak = self.index in self.acc.weak_screened and self.index not in self.acc.weak_from
        positions, weak = self.screen.positions_flagged(block, end, want_flag=want_weak)
        if weak and want_weak:
            self._note_weak(block, end, weak)
        if not positions and not self.folder.inside:
            self._skip(block, end)
            return
        wanted, starts, n = newlines.candidates(block, end, positions)
        lines = BlockLines(block, end, n)
        self._fill_after(lines)
        base = self.line_no
        # Only candidate lines are looked at, plus every line while a traceback is open (its frames
        # are what the folder needs): jump from candidate to candidate instead of walking the block.
        w = 0
        i = -1
        while True:
            i += 1
            if not self.folder.inside:
                while w < len(wanted) and wanted[w] < i:
                    w += 1
                if w == len(wanted):
                    break
                lines.anchor(wanted[w], starts[w])
                i = _frames_above(lines, wanted[w], i)
                if i == 0 and self._carry and _tb_material(lines[0]):
                    self._fold_carry(base)
            if i >= n:
                break
            raw = lines[i]
            # Only a line read alone is keyed: an indented one is read with the lines above it.
            key = recurring.key_of(raw) if self.folder.idle and raw[:1] not in (b" ", b"\t") else None
            if key is not None and key in self._inert:
                continue
            ev = normalize_line(raw, self.name, base + i + 1, year=self.year)
            # An indented line under a `Caused by:` a few lines up (here or in the block before).
            if raw[:1] in (b" ", b"\t") and _under_cause_header(lines, i, self._last_lines):
                ev.message = ev.message.lstrip()
            dated = False
            stamp = ev.timestamp_text or ""
            if ev.timestamp is not None and stamp[:1].isdecimal() and len(stamp) > 14:
                self.year, dated = ev.timestamp.year, True
            kept = self.folder.feed(ev)
            if self.folder.cut:
                for cut in self.folder.take_cut():
                    self._consider_cut(cut, lines, i - (ev.line - cut.line), base)
            if kept is None:
                continue
            passed = self._consider(kept, lines, max(0, i - (ev.line - kept.line)), base)
            if (
                passed
                and key is not None
                and kept is ev
                and not dated
                and self.folder.idle
                and len(self._inert) < _INERT_MAX
                and recurring.message_within(raw, ev.message)
            ):
                self._inert.add(key)
        if self.index in self.acc.refusing or self._refused_in_block:
            self._settle_refusals(block, end)
        self._last_lines, self._last_base = lines, base
        self._carry = lines[-_CARRY_LINES:]
        self.line_no = base + n
        self._update_tail_and_time(lines)

    def _note_weak(self, block: Block, end: int, flagged: list[int]) -> None:
        """Record the cue lines of a block for the weak layer, a recurring line (same message, another
        timestamp or pid: recurring.py) only the first time: the weak layer judges one message once."""
        rows, starts, _ = newlines.candidates(block, end, flagged)
        kept = self.acc.weak_lines.setdefault(self.index, array("q"))
        keys = self._weak_keys
        for row, start in zip(rows, starts, strict=True):
            stop = block.find(b"\n", start, end)
            raw = bytes(block[start : stop if stop >= 0 else end])
            key = recurring.key_of(raw)
            if key is not None:
                shared = keys.get(key)
                if shared:
                    continue
                if shared is None and len(keys) < _WEAK_KEYS_MAX:
                    keys[key] = recurring.shares(raw)
            if len(kept) // 2 >= WEAK_LINES_MAX:
                self.acc.weak_from[self.index] = (self._block_at + start, self.line_no + row)
                return
            kept.append(self._block_at + start)
            kept.append(self.line_no + row)

    def _skip(self, block: Block, end: int) -> None:
        n = newlines.count(block, 0, end)
        if n >= CONTEXT_LINES + 1 or not self.tail:
            start = end
            for _ in range(min(n, TAIL_LINES) + 1):
                start = block.rfind(b"\n", 0, start - 1) if start > 1 else -1
                if start < 0:
                    break
            tail_lines = bytes(block[start + 1 : end]).split(b"\n")[:-1]
        else:
            tail_lines = bytes(block[:end]).split(b"\n")[:-1]
        if self.pending_after:
            self._fill_after(bytes(block[: min(end, 4096 * CONTEXT_LINES)]).split(b"\n")[:CONTEXT_LINES])
        if self.index in self.acc.refusing and _OK_ACCESS.search(block, 0, end) >= 0:
            del self.acc.refusing[self.index]  # a request was answered again after the refusal
        self.line_no += n
        self._carry = tail_lines[-_CARRY_LINES:]
        self._update_tail_and_time(tail_lines)

    def _update_tail_and_time(self, lines: Sequence[bytes]) -> None:
        last = lines[-TAIL_LINES:]  # one copy of the block's last lines serves all three
        for raw in last[-CONTEXT_LINES:]:
            self.tail.append(raw[:4096].decode("utf-8", "replace").rstrip("\r"))
        self.long_tail.extend(raw if len(raw) <= _TAIL_LINE_BYTES else raw[:_TAIL_LINE_BYTES] for raw in last)
        for raw in reversed(last[-64:]):
            if not may_hold_time(raw[:512]):
                continue
            ev = normalize_line(raw[:512], self.name, 0, year=self.year)
            if ev.timestamp is not None:
                self.last_ts = ev.timestamp
                break

    def _settle_refusals(self, block: Block, end: int) -> None:
        """After a block: the file is "refusing" when a 4xx came after its last 2xx. Only runs while a
        refusal is pending, and looks for the block's last 2xx from its end."""
        last_ok = _last_ok_line(block, end)
        if last_ok >= 0 and self.index in self.acc.refusing:
            del self.acc.refusing[self.index]
        for idx, hit in self._refused_in_block:
            if idx > last_ok:
                self.acc.refusing.setdefault(self.index, hit)
                break
        self._refused_in_block = []

    def _fill_after(self, lines: Sequence[bytes]) -> None:
        if not self.pending_after:
            return
        still = []
        for hit in self.pending_after:
            need = CONTEXT_LINES - len(hit.after)
            hit.after.extend(r[:4096].decode("utf-8", "replace").rstrip("\r") for r in lines[:need])
            if len(hit.after) < CONTEXT_LINES and len(lines) < need:
                still.append(hit)
        self.pending_after = still

    def _note_served(self, block: Block, end: int) -> None:
        pos = self.served_screen.search(block, 0, end)
        start = block.rfind(b"\n", 0, pos) + 1
        stop = block.find(b"\n", pos, end)
        raw = bytes(block[start : stop if stop >= 0 else end])
        ev = normalize_line(raw, self.name, self.line_no + block.count(b"\n", 0, start) + 1, year=self.year)
        if ev.timestamp is None:
            ev.timestamp = self.last_ts
        self.acc.served[self.index] = ev

    # -- line level --------------------------------------------------------------------------
    def _consider(self, ev: Event, lines: Sequence[bytes], idx: int, base: int) -> bool:
        """Keep what the line is (a hit, a restart banner); True when it is nothing and left no trace."""
        banner, sig, generic, computed = self._verdict(ev)
        if banner:
            self._new_run(ev, lines, idx, base)
            return False
        if sig is not None and sig.role == "noise":
            return True
        kind = "signature" if sig is not None else "computed" if computed else unclaimed_kind(ev, generic)
        if kind is None:
            return True
        if ev.rank is None:
            ev.rank = self.rank
        if ev.node is None:
            ev.node = self.node
        if ev.timestamp is None:
            ev.timestamp = self._inherit_time(lines, idx)
        lo = max(0, idx - CONTEXT_LINES)
        before = [r[:4096].decode("utf-8", "replace").rstrip("\r") for r in lines[lo:idx]]
        if len(before) < CONTEXT_LINES and idx - CONTEXT_LINES < 0:
            before = list(self.tail)[len(before) - CONTEXT_LINES :] + before if before else list(self.tail)
        hit = Hit(ev, sig, self.index, kind=kind, wrapper=wrapper_kind(ev.message), computed=computed)
        if sig is not None and sig.id == ACCESS_4XX:
            self._note_refusal(hit, lines, idx, before)
        if sig is None and computed is None:
            frames = ev.frames or frames_above(ev.message, before[-CONTEXT_LINES:])
            hit.family = load_families().score(
                ev.message, frames, before[-CONTEXT_LINES:], ev.origin, cut=ev.cut is not None
            )
        if not self.acc.record(hit):
            return False
        hit.before = before[-CONTEXT_LINES:]
        hit.after = [
            r[:4096].decode("utf-8", "replace").rstrip("\r") for r in lines[idx + 1 : idx + 1 + CONTEXT_LINES]
        ]
        if len(hit.after) < CONTEXT_LINES:
            self.pending_after.append(hit)
        return False

    def _verdict(self, ev: Event) -> LineVerdict:
        """(is a restart banner, `classify`, a computed check that held), remembered for a single
        line: without frames its message and level are all any of them reads."""
        if ev.frames or ev.traceback_start is not None:
            return _line_verdict(self.cat, ev)
        key = (ev.message, ev.level)
        verdict = self._verdicts.get(key)
        if verdict is None:
            if len(self._verdicts) >= _MAX_VERDICTS:
                self._verdicts.clear()
            verdict = self._verdicts[key] = _line_verdict(self.cat, ev)
        return verdict

    def _fold_carry(self, base: int) -> None:
        """A candidate at the top of a block whose frames started in the block before (or in the part
        of the input read before a final line without newline): feed those frames to the folder."""
        carry, self._carry = self._carry, []
        start = _frames_above(carry + [b""], len(carry), 0)
        if start == len(carry):
            return
        first = base - len(carry) + 1
        for k in range(start, len(carry)):
            ev = normalize_line(carry[k], self.name, first + k, year=self.year)
            kept = self.folder.feed(ev)
            if kept is not None and kept.cut is None:
                self._consider(kept, carry, k, base - len(carry))

    def _consider_cut(self, ev: Event, lines: Sequence[bytes], idx: int, base: int) -> None:
        """A traceback that ended without its exception line (tracebacks.py): its raise statement,
        announcing line or header is considered like any line, and stands in for any hit already
        kept on that line (the announcing line was seen before its frames were known)."""
        if not 0 <= idx < len(lines):
            lines, idx = [ev.text.encode("utf-8", "replace")], 0
        self._consider(ev, lines, idx, base)
        kept = [h for h in self.acc.first.values() if h.event is ev]
        if kept:
            for k, h in list(self.acc.first.items()):
                if h.source_index == self.index and h.event.line == ev.line and h not in kept:
                    del self.acc.first[k]

    def _note_refusal(self, hit: Hit, lines: Sequence[bytes], idx: int, before: list[str]) -> None:
        """Remember a refused request with its context, in case no 2xx follows it in this file."""
        hit.before = before[-CONTEXT_LINES:]
        hit.after = [
            r[:4096].decode("utf-8", "replace").rstrip("\r") for r in lines[idx + 1 : idx + 1 + CONTEXT_LINES]
        ]
        hit.run = len(self.acc.banners.get(self.index, ()))
        if len(self._refused_in_block) >= 64:  # bounded: keep the first ones and the latest
            self._refused_in_block[-1] = (idx, hit)
        else:
            self._refused_in_block.append((idx, hit))

    def _new_run(self, ev: Event, lines: Sequence[bytes], idx: int, base: int) -> None:
        """A restart banner: later hits belong to a new run; served evidence is looked for afresh
        in the rest of the block (later blocks look for it themselves; a banner met in the carried
        lines of the block before has no block to search)."""
        runs = self.acc.banners.setdefault(self.index, [])
        if len(runs) < _MAX_RUNS:
            if ev.timestamp is None:
                ev.timestamp = self._inherit_time(lines, idx)
            runs.append(ev)
        self.acc.served.pop(self.index, None)
        if idx + 1 >= len(lines) or not isinstance(lines, BlockLines):
            return
        block, rest, stop = lines.block, lines.start(idx + 1), lines.end - 1
        pos = self.served_screen.search(block, rest, stop)
        if pos >= 0:
            start = block.rfind(b"\n", rest, pos) + 1 or rest
            end = block.find(b"\n", pos, stop)
            line_no = base + idx + 2 + block.count(b"\n", rest, start)
            served = normalize_line(
                bytes(block[start : end if end >= 0 else stop]), self.name, line_no, year=self.year
            )
            if served.timestamp is None:
                served.timestamp = ev.timestamp
            self.acc.served[self.index] = served

    def _inherit_time(self, lines: Sequence[bytes], idx: int) -> datetime | None:
        for j in range(idx - 1, max(-1, idx - 200), -1):
            raw = lines[j][:512]
            if not may_hold_time(raw):
                continue
            ev = normalize_line(raw, self.name, 0, year=self.year)
            if ev.timestamp is not None:
                return ev.timestamp
        return self.last_ts


LineVerdict = tuple[bool, Signature | None, bool, ComputedFind | None]


def _line_verdict(catalogue: Catalogue, ev: Event) -> LineVerdict:
    if RUN_BANNER.search(ev.message):
        return True, None, False, None
    sig, generic = classify(catalogue, ev)
    computed = first_computed(ev.message) if sig is None and ev.message.strip() else None
    return False, sig, generic, computed


def unclaimed_kind(ev: Event, generic: bool) -> str | None:
    """What a line no signature claims is: "novel" (carries a failure word and is not a healthy
    template), "generic" (an ERROR/Traceback/FATAL line that is not novel), "raise" (a lone quoted
    `raise` line: the evidence of a cut traceback), or None (not an anomaly)."""
    msg = ev.message.strip()
    if not msg or _IPYTHON_CURRENT_LINE.match(ev.message):
        return None
    if ev.cut == "raise" or _RAISE_STATEMENT.match(ev.message):
        return "raise"
    if ev.cut == "announce-only" or _IPYTHON_HEADER.match(msg):
        return "generic"
    if ev.message[:1] in (" ", "\t") and not generic and not is_structured_field(ev.message):
        return None
    if load_families().carries_failure_word(msg) and not load_healthy_model().is_healthy(ev.message):
        return "novel"
    return "generic" if generic else None


def _last_ok_line(block: Block, end: int) -> int:
    """Block-local index of the last line answered 2xx, or -1: probes backwards from the end, so a
    serving log (2xx near the end) costs a few bytes, a block without one a reverse byte scan."""
    best = -1
    for needle in _OK_NEEDLES:
        probe = end
        while (pos := block.rfind(needle, 0, probe)) >= 0:
            start = block.rfind(b"\n", 0, pos) + 1
            stop = block.find(b"\n", pos, end)
            if _OK_ACCESS.search(block[start : stop if stop >= 0 else end]) >= 0:
                best = max(best, block.count(b"\n", 0, start))
                break
            probe = pos
    return best


def _regular_file(stream: IO[bytes]) -> int | None:
    """The descriptor of a stream that is a plain file read from its start (pread-able), else None."""
    if not isinstance(stream, io.FileIO):
        return None
    try:
        fd = stream.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (OSError, ValueError):
        return None


_BUFFERS = threading.local()


def _read_buffers(size: int) -> tuple[bytearray, bytearray]:
    """This thread's two read buffers of at least `size` bytes, kept between files. A buffer read into
    again has its pages mapped already; a fresh `bytes` of 4 MiB per `pread` cost a page fault every
    4 KiB (a third of the time spent reading)."""
    bufs: tuple[bytearray, bytearray] | None = getattr(_BUFFERS, "bufs", None)
    if bufs is None or len(bufs[0]) < size:
        bufs = _BUFFERS.bufs = (bytearray(size), bytearray(size))
    return bufs


def _pread_into(fd: int, buf: bytearray, offset: int, size: int) -> tuple[int, BaseException | None]:
    """(bytes read into `buf[:size]` from `offset`, the error that stopped the read or None)."""
    try:
        if not hasattr(os, "preadv"):  # a platform without it (older macOS): one copy more
            data = os.pread(fd, size, offset)
            buf[: len(data)] = data
            return len(data), None
        with memoryview(buf) as view:
            return os.preadv(fd, [view[:size]], offset), None
    except OSError as exc:
        return 0, exc


def _read_block(
    stream: IO[bytes], read1: Callable[[int], bytes] | None
) -> tuple[bytes, BaseException | None]:
    """Up to BLOCK_BYTES. Compressed streams are read in pieces so that a truncated .gz still yields
    everything before the cut instead of losing the whole last block; pipes (stdin, `docker logs`)
    return what is there, so lines are scanned as they arrive."""
    if read1 is not None and not isinstance(stream, gzip.GzipFile):
        try:
            return read1(BLOCK_BYTES), None
        except (EOFError, zlib.error, OSError) as exc:
            return b"", exc
    if read1 is None:
        try:
            return stream.read(BLOCK_BYTES), None
        except (EOFError, zlib.error, OSError) as exc:
            return b"", exc
    parts: list[bytes] = []
    size = 0
    while size < BLOCK_BYTES:
        try:
            piece = read1(BLOCK_BYTES - size)
        except (EOFError, zlib.error, OSError) as exc:
            return b"".join(parts), exc
        if not piece:
            break
        parts.append(piece)
        size += len(piece)
    return b"".join(parts), None


def _frames_above(lines: Sequence[bytes], target: int, floor: int) -> int:
    """Where to start for the candidate line `target` (the scan jumps from candidate to candidate):
    at the first frame of a traceback printed right above it without its header (an excerpt that
    starts mid-traceback), so its frames are folded onto it; else at `target`. Looks back at most
    64 lines and never before `floor`."""
    start = target
    j = target - 1
    while j >= floor and j >= target - 64:
        raw = lines[j]
        if _FRAME_BYTES in raw:
            start = j
        elif not (
            raw[:1] in (b" ", b"\t") or _PREFIXED_CODE.search(raw, 0, 200) or _FRAME_TAIL_BYTES.match(raw)
        ):
            break
        j -= 1
    return start


_FRAME_BYTES = b'", line '
_FRAME_TAIL_BYTES = re.compile(rb"\d*, in [\w<>.]+\s*$")  # a frame line's hard-wrapped rest
# An indented (code/caret) line behind a logger, torch-rank or compose prefix: `[core.py:708]     raise`,
# `[rank0]:     return f()`, `vllm-1  |     x = y`.
_PREFIXED_CODE = re.compile(rb"(?:\]|\]:|\|) {3,}\S")
_CARRY_LINES = 64


# round 18: a Rust error chain (anyhow / eyre: `Error: …`, a blank line, `Caused by:` alone, then each
# cause indented, numbered when there are several): the causes are messages, not code.
_CAUSE_HEADER = b"Caused by:"
_CAUSE_LOOKBACK = 8


def _under_cause_header(lines: Sequence[bytes], i: int, carry: Sequence[bytes] = ()) -> bool:
    """Whether indented line `i` is one of the causes listed under a `Caused by:` line above it (the
    lines above the block are the previous block's, `carry`)."""
    for j in range(i - 1, i - 1 - _CAUSE_LOOKBACK, -1):
        if j < -len(carry):
            return False
        above = lines[j] if j >= 0 else carry[j]
        if above.strip() == _CAUSE_HEADER:
            return True
        if above[:1] not in (b" ", b"\t"):
            return False
    return False


def _tb_material(raw: bytes) -> bool:
    """A frame or an indented (code) line: what a traceback is made of."""
    return _FRAME_BYTES in raw or raw[:1] in (b" ", b"\t")


class BlockLines(Sequence[bytes]):
    """The lines of `block[:end]` (without their newlines) as a read-only sequence, each cut out on
    demand by walking newline to newline from the nearest line whose start is known: the block's two
    ends, the current candidate (`anchor`) and the last line looked up. The scan looks at candidates
    and a few lines around them, so this costs a few `find` calls where `split` would copy every line
    of the 4 MiB block."""

    __slots__ = ("block", "end", "_n", "_anchor", "_last")

    def __init__(self, block: Block, end: int, n: int) -> None:
        self.block = block
        self.end = end
        self._n = n
        self._anchor = (0, 0)
        self._last = (0, 0)

    def anchor(self, index: int, start: int) -> None:
        self._anchor = (index, start)

    def __len__(self) -> int:
        return self._n

    def start(self, i: int) -> int:
        """Offset where line `i` starts (0 <= i <= len: line len "starts" at `end`)."""
        # The nearest known start, ties to the first (anchor, last lookup, block start, block end).
        j, off = self._anchor
        last = self._last
        if abs(last[0] - i) < abs(j - i):
            j, off = last
        if i < abs(j - i):
            j, off = 0, 0
        if self._n - i < abs(j - i):
            j, off = self._n, self.end
        block = self.block
        while j < i:
            off = block.find(b"\n", off, self.end) + 1
            j += 1
        while j > i:
            off = block.rfind(b"\n", 0, off - 1) + 1
            j -= 1
        self._last = (i, off)
        return off

    def _line(self, off: int) -> bytes:
        return bytes(self.block[off : self.block.find(b"\n", off, self.end)])

    @overload
    def __getitem__(self, i: int) -> bytes: ...

    @overload
    def __getitem__(self, i: slice) -> list[bytes]: ...

    def __getitem__(self, i: int | slice) -> bytes | list[bytes]:
        if isinstance(i, slice):
            lo, hi, step = i.indices(self._n)
            if step != 1:
                raise ValueError("BlockLines slices have no step")
            out: list[bytes] = []
            if lo < hi:
                off = self.start(lo)
                for _ in range(lo, hi):
                    nl = self.block.find(b"\n", off, self.end)
                    out.append(bytes(self.block[off:nl]))
                    off = nl + 1
                self._last = (hi, off)
            return out
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("line index out of range")
        return self._line(self.start(i))


def build_screens(
    catalogue: Catalogue,
    *,
    use_re2: bool | None = None,
    use_hyperscan: bool | None = None,
    flagged: Iterable[str] = (),
) -> tuple[Screen, Screen]:
    """The bulk screen (every pattern a candidate line may need) and the served-traffic screen.

    VLLM_MEDIC_TRIAGE_NO_RE2=1 forces the pure-Python screen (what runs without google-re2);
    VLLM_MEDIC_TRIAGE_NO_HYPERSCAN=1 the RE2 one (what runs where the hyperscan wheel is missing).
    `flagged`: patterns the bulk screen also looks for without making their lines candidates (the weak
    layer's cues: the scan notes where the first block holding one starts, `Accumulator.weak_from`)."""
    if use_re2 is None:
        use_re2 = os.environ.get("VLLM_MEDIC_TRIAGE_NO_RE2", "") in ("", "0")
    if use_hyperscan is None:
        use_hyperscan = use_re2 and os.environ.get("VLLM_MEDIC_TRIAGE_NO_HYPERSCAN", "") in ("", "0")
    families = load_families()
    return (
        Screen(
            [
                *catalogue.screen_patterns(),
                *GENERIC_PATTERNS,
                *families.screen_patterns(),
                *computed_screen_patterns(),
                *RUN_BANNERS,
                ANNOUNCE.pattern,
            ],
            use_re2=use_re2,
            use_hyperscan=use_hyperscan,
            flagged=flagged,
        ),
        # Searched once per block until found: RE2 stops at the first match, which is early.
        Screen([*SERVED_PATTERNS, *SERVED_EXTRA], use_re2=use_re2),
    )
