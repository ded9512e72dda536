"""Judgement: pick the earliest root cause, separate the cascade, decide startup vs runtime OOM.

Pure functions over what the scanner kept; no I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from vllm_medic.model import Category, Finding, Severity
from vllm_medic.redact import redact_text
from vllm_medic.triage.cascade_entry import CascadeEntry, FirstSeen
from vllm_medic.triage.catalogue import Catalogue
from vllm_medic.triage.computed import LAYER_COMPUTED
from vllm_medic.triage.families import FamilyBook, FamilyVerdict, frames_above, load_families
from vllm_medic.triage.normalize import timestamp_str
from vllm_medic.triage.novelty import load_healthy_model
from vllm_medic.triage.phase import RUNTIME_SIGNATURES, RUNTIME_TEXT, Phase
from vllm_medic.triage.phase import decide as phase_decide
from vllm_medic.triage.repetition import CONF_REPETITION, LAYER_REPETITION, RepetitionFind
from vllm_medic.triage.scanner import Accumulator, Hit, SigStats
from vllm_medic.triage.weak import CONF_WEAK, LAYER_WEAK, WeakFind, default_category, describe, title_of
from vllm_medic.triage.wrappers import WINDOW_LINES

LAYER_SIGNATURE, LAYER_FAMILY, LAYER_NOVELTY, LAYER_GENERIC = "signature", "family", "novelty", "generic"

CONF_STRONG = 0.9
CONF_STRONG_CONTESTED = 0.75
CONF_COMPUTED = 0.6
CONF_FAMILY = 0.6
CONF_NOVELTY = 0.4
CONF_GENERIC = 0.3
CONF_PROMOTED = 0.25
CONF_CASCADE_ONLY = 0.15
PHASE_NOT_EVIDENCED_PENALTY = 0.15

# Tiers, best first: a lower tier wins whatever the time; inside a tier the earliest hit wins.
# A computed check (numbers compared on the line) ranks after the signatures, ahead of the families.
T_SIGNATURE, T_COMPUTED, T_FAMILY, T_NOVEL, T_GENERIC, T_RAISE, T_CASCADE, T_WEAK, T_NEVER = (
    0,
    1,
    2,
    3,
    4,
    5,
    6,
    9,
    10,
)
_LAYER = {
    T_SIGNATURE: LAYER_SIGNATURE,
    T_COMPUTED: LAYER_COMPUTED,
    T_FAMILY: LAYER_FAMILY,
    T_NOVEL: LAYER_NOVELTY,
    T_GENERIC: LAYER_GENERIC,
    T_RAISE: LAYER_NOVELTY,
    T_CASCADE: LAYER_SIGNATURE,
    T_WEAK: LAYER_SIGNATURE,
}
# Weak signals that become the root, with low confidence, when nothing else in the logs failed.
_PROMOTABLE = (
    "access-4xx",
    "prefix-cache-zero-hit",
    "prefix-cache-zero-hit-metrics",
    "nccl-info-error-return",
    "kv-transfer-waiting",
)
# Weak signals that stand alone whatever the server did before them (not judged against a start-up).
_PROMOTABLE_ANYWHERE = {"nccl-info-error-return"}
_STARTED = re.compile(r"Application startup complete|Uvicorn running on")
# A /metrics hits counter at 0 means something only next to a queries counter that is not.
_QUERIES_NONZERO = re.compile(
    r"prefix_cache_queries(?:_total)?(?:\{[^}]*\})?\s+[1-9]|\bprefix_queries_delta:\s*[1-9]"
)
# A server that stopped in order and started again inside one file, with no failure logged: the
# reason is outside the log (supervisor, probe, OOM killer). Reported with the lowest confidence.
RESTART_SIG = "unexplained-restart"
RESTART_TITLE = "The server shut down and started again, and this log does not say why"
RESTART_FIX = (
    "Find why it stopped where it was restarted: `kubectl describe pod` (Last State: Terminated, "
    "Reason and Exit Code: OOMKilled / Error / Completed), `kubectl logs --previous`, "
    "`docker inspect --format '{{json .State}}' <container>`, the supervisor's or systemd's log.",
    "A liveness/readiness probe that timed out while the engine was busy also restarts it: compare "
    "the probe's timeout with the time requests took just before the shutdown.",
)


@dataclass
class Verdict:
    root: Hit | None
    category: str | None
    confidence: float
    reason: str
    phase_evidence: str | None
    cascade: list[CascadeEntry] = field(default_factory=list)
    fix: list[str] = field(default_factory=list)
    docs: list[str] = field(default_factory=list)
    signals: list[CascadeEntry] = field(default_factory=list)
    layer: str | None = None
    title: str | None = None
    phase: Phase | None = None
    runs_note: str | None = None
    # The weak layer's cue (weak.py), when it found the root: the root's id is then `weak-<cue>`.
    weak_cue: str | None = None

    @property
    def root_id(self) -> str | None:
        if self.root is None:
            return None
        return f"weak-{self.weak_cue}" if self.weak_cue else self.root.sig_id


def _tier(hit: Hit) -> int:
    sig = hit.signature
    if sig is not None:
        if sig.role == "cascade":
            return T_CASCADE if sig.priority > 0 else T_NEVER  # orderly shutdown is never reported alone
        return T_SIGNATURE if sig.strong else T_WEAK
    if hit.computed is not None:
        return T_COMPUTED
    if hit.family is not None:
        return T_FAMILY
    return {"novel": T_NOVEL, "generic": T_GENERIC, "raise": T_RAISE}.get(hit.kind, T_GENERIC)


CLOCK_SKEW_S = (
    2.0  # node clocks disagree by about this much: closer than this across files is "the same moment"
)


def _priority(h: Hit) -> int:
    return h.signature.priority if h.signature else 0


def earlier(a: Hit, b: Hit) -> int:
    """Order two hits in time: timestamps across files where both have one, else file position.

    Across files, two hits within CLOCK_SKEW_S count as simultaneous and the more specific signature
    (higher priority) goes first: a peer's "remote process exited" must not beat the real fault on
    another node just because that node's clock runs a second ahead."""
    ta, tb = a.event.timestamp, b.event.timestamp
    if a.source_index == b.source_index:
        if ta is not None and tb is not None and ta != tb:
            return -1 if ta < tb else 1
        return (a.event.line > b.event.line) - (a.event.line < b.event.line)
    if ta is not None and tb is not None:
        if abs((ta - tb).total_seconds()) <= CLOCK_SKEW_S and _priority(a) != _priority(b):
            return -1 if _priority(a) > _priority(b) else 1
        if ta != tb:
            return -1 if ta < tb else 1
    return (a.source_index > b.source_index) - (a.source_index < b.source_index)


def _sorted(hits: list[Hit]) -> list[Hit]:
    return sorted(hits, key=functools.cmp_to_key(earlier))


sort_hits = _sorted  # hits in time order, for the weak layer (weak.find_weak)


def decide_phase(
    root: Hit, acc: Accumulator, pool: list[Hit] | None = None, runs_note: str | None = None
) -> Phase:
    """Startup or runtime for this root, from what the scan kept (see phase.py)."""
    served_before = None
    for idx, ev in acc.served.items():
        if earlier(Hit(ev, None, idx), root) < 0:
            served_before = f"{ev.source}:{ev.line} `{ev.message.strip()[:120]}`"
            break
    runtime_line = None
    for hit in pool if pool is not None else list(acc.first.values()):
        if hit is root:
            continue
        if hit.sig_id in RUNTIME_SIGNATURES or RUNTIME_TEXT.search(hit.event.text):
            runtime_line = f"{hit.event.source}:{hit.event.line} `{hit.event.message.strip()[:120]}`"
            break
    # A traceback that starts within a few lines after the root (the chain Python prints below it).
    chained_frames: list[str] = []
    for hit in pool if pool is not None else list(acc.first.values()):
        start = hit.event.traceback_start
        if (
            hit is not root
            and hit.source_index == root.source_index
            and start is not None
            and root.event.line < start <= root.event.line + 2 * WINDOW_LINES
        ):
            chained_frames = hit.event.frames
            break
    return phase_decide(
        frames=root.event.frames,
        chained_frames=chained_frames,
        text=root.event.text,
        before=root.before,
        after=root.after,
        served_before=served_before,
        runtime_line=runtime_line,
        runs_note=runs_note,
    )


def _span(ranks: set[int]) -> str:
    if not ranks:
        return ""
    rs = sorted(ranks)
    if len(rs) == 1:
        return f"rank {rs[0]}"
    if rs == list(range(rs[0], rs[-1] + 1)):
        return f"ranks {rs[0]}–{rs[-1]}"
    return "ranks " + ",".join(str(r) for r in rs[:16]) + ("…" if len(rs) > 16 else "")


def summarize(stats: SigStats, *, exclude_one: bool) -> str:
    n = stats.count - (1 if exclude_one else 0)
    where = _span(stats.ranks)
    if not where and stats.nodes:
        where = "nodes " + ", ".join(stats.nodes[:4]) + ("…" if len(stats.nodes) > 4 else "")
    if not where:
        where = ", ".join(stats.sources[:3]) + ("…" if len(stats.sources) > 3 else "")
    return f"x{n} similar" + (f" on {where}" if where else "")


def _current_runs(hits: list[Hit], acc: Accumulator) -> tuple[list[Hit], str | None]:
    """Per source, only the hits of its last run (after its last restart banner) when that run shows
    a failure; otherwise all of its hits (a healthy last run must not hide the failed one before)."""
    by_source: dict[int, list[Hit]] = {}
    for h in hits:
        by_source.setdefault(h.source_index, []).append(h)
    pool: list[Hit] = []
    notes: list[str] = []
    for idx, own in by_source.items():
        banners = acc.banners.get(idx, [])
        last = len(banners)
        current = [h for h in own if h.run == last]
        if len(banners) > 1 and any(_tier(h) < T_WEAK for h in current):
            pool.extend(current)
            b = banners[-1]
            notes.append(
                f"{b.source} holds {len(banners)} runs (restart banners at lines "
                f"{', '.join(str(x.line) for x in banners[:8])}); judged the last run, from line {b.line}"
            )
        else:
            pool.extend(own)
    return pool, ("; ".join(notes) or None)


def _promoted(hits: list[Hit], acc: Accumulator) -> tuple[Hit | None, bool]:
    """A weak signal that stands alone: requests refused with 4xx (no 2xx in that file, or none after
    the refusals began), a 0 % prefix-cache hit rate in an excerpt that does not show a healthy
    start-up, or a /metrics hits counter at 0 under a non-zero queries counter. Returns the hit and,
    for 4xx, whether the file ends refusing after it had answered 2xx."""
    for sig_id in _PROMOTABLE:
        cands = _sorted([h for h in hits if h.sig_id == sig_id])
        trailing = False
        if sig_id == "access-4xx":
            cands = [h for h in cands if h.source_index not in acc.ok_access]
            if not cands and acc.refusing:
                cands, trailing = _sorted(list(acc.refusing.values())), True
        elif sig_id in _PROMOTABLE_ANYWHERE:
            pass
        elif any(_STARTED.search(ev.message) for ev in acc.served.values()):
            cands = []
        elif sig_id == "prefix-cache-zero-hit-metrics":
            cands = [h for h in cands if any(_QUERIES_NONZERO.search(b) for b in h.before)]
        if cands:
            return cands[0], trailing
    return None, False


def _unwrap(root: Hit, pool: list[Hit]) -> Hit:
    """A wrapper line (wrappers.py) gives way to the classified line it announces, printed within a
    few lines below it in the same file and run: always when it quotes that line's error, and when
    the cause only follows it, when the cause says another category (the wrapper's own class was a
    guess from its wording; where both agree the earlier line points at the same diagnosis). A wrapper
    that no signature or family claims (its class is nobody's) gives way to a new line below it at the
    same tier: the cause it announces (round 20: torch_npu's bare `ERR02200 DIST call api failed` above
    CANN's own message)."""
    if not root.wrapper:
        return root
    bare = root.wrapper == "follows" and _tier(root) == T_NOVEL
    cause = _first_below(
        root,
        pool,
        WINDOW_LINES,
        lambda h: (
            not h.wrapper
            and (_tier(h) <= T_FAMILY or (bare and _tier(h) == T_NOVEL))
            and (root.wrapper in ("quotes", "dump", "header") or bare or _class_of(h) != _class_of(root))
        ),
    )
    return cause or root


def _first_below(root: Hit, pool: list[Hit], within: int, accept: Callable[[Hit], bool]) -> Hit | None:
    """The earliest hit of `pool` in root's file and run, at most `within` lines below it, that `accept`s."""
    line = root.event.line
    cands = [
        h
        for h in pool
        if h.source_index == root.source_index
        and h.run == root.run
        and line < h.event.line <= line + within
        and accept(h)
    ]
    return min(cands, key=lambda h: h.event.line) if cands else None


def _stated(root: Hit, pool: list[Hit]) -> Hit | None:
    """The line just below a computed root that states the check's consequence in the program's own
    words (the check's `stated_by`), in the same file and run: the line a reader quotes."""
    check = root.computed.check if root.computed is not None else None
    if check is None or check.stated_by is None:
        return None
    stated_by = check.stated_by
    return _first_below(
        root,
        pool,
        check.stated_within,
        lambda h: h.signature is None and h.computed is None and bool(stated_by.search(h.event.message)),
    )


def _class_of(h: Hit) -> str | None:
    if h.signature is not None:
        return h.signature.category
    if h.computed is not None:
        return h.computed.check.category
    return h.family.family.category if h.family is not None else None


def _restart(hits: list[Hit], acc: Accumulator) -> tuple[Hit, str] | None:
    """An orderly shutdown followed by a restart banner in the same file, when nothing else failed."""
    for h in _sorted([h for h in hits if _tier(h) == T_NEVER]):
        banners = acc.banners.get(h.source_index, [])
        if h.run < len(banners):
            nxt = banners[h.run]
            return h, (
                f"no failure is logged; the run in {h.event.source} stops in order at line "
                f"{h.event.line} and the server starts again at line {nxt.line} (restart banner): "
                "the cause of the restart is outside this log"
            )
    return None


def _category_of(root: Hit, tier: int) -> tuple[str, str | None]:
    """(category, runtime_category) of the root as its layer sees it."""
    if tier == T_SIGNATURE and root.signature is not None:
        return root.signature.category, root.signature.runtime_category
    if tier in (T_WEAK,) and root.signature is not None:
        return root.signature.category, None
    if tier == T_COMPUTED and root.computed is not None:
        return root.computed.check.category, None
    if root.family is not None:
        fam = root.family.family
        return fam.category, fam.runtime_category
    return Category.OTHER.value, None


def _lean(root: Hit, tier: int, families: FamilyBook) -> FamilyVerdict | None:
    """A novelty or generic root that no family claimed: the family its own words still favour."""
    if tier not in (T_NOVEL, T_GENERIC, T_RAISE) or root.family is not None or root.signature is not None:
        return None
    message, frames = _family_inputs(root)
    return families.score(
        message,
        frames,
        [*root.before, *root.after],
        root.event.origin,
        cut=root.event.cut is not None,
        threshold=families.lean_threshold,
        margin=families.lean_margin,
    )


# A stack frame as crash handlers print one below their announcement: Python's faulthandler and TVM-FFI
# (`File "…", line N in f`), gdb (`#3  0x… in f`), UCX's and glibc's backtrace (`3  /path/libx.so(f+0x…)`).
_STACK_LINE = re.compile(r'^\s*(?:File "|#\d+\s|\d+\s+(?:/|0x)|frame #\d+)|\.so[\w.\-]*\(')


def _stack_lean(root: Hit, tier: int, families: FamilyBook) -> FamilyVerdict | None:
    """A crash signature (`stack_leans` in the catalogue) whose stack is printed below it: the family those
    frames favour, at the lean's bars, when it names another category (a segfault inside UCX's TCP
    transport or NIXL's connector is the fabric's crash, not an unexplained one)."""
    sig = root.signature
    if tier != T_SIGNATURE or sig is None or not sig.stack_leans:
        return None
    frames = [line for line in root.after if _STACK_LINE.search(line)]
    if not frames:
        return None
    lean = families.score(
        "", frames, [], None, threshold=families.lean_threshold, margin=families.lean_margin
    )
    return lean if lean is not None and lean.family.category != sig.category else None


def _family_inputs(h: Hit) -> tuple[str, list[str]]:
    """The message and frames a family is scored on: the line's own frames (or those printed above a
    message-less exception), else the line joined with what it wraps onto the next lines."""
    frames = h.event.frames or frames_above(h.event.message, h.before)
    if not frames and (wrapped := _wrapped_message(h.event.message, h.after)):
        return wrapped, frames
    return h.event.message, frames


def _why(root: Hit, tier: int, promoted_count: int = 0) -> str:
    if tier == T_SIGNATURE and root.signature is not None:
        return f"earliest root-cause signature `{root.signature.id}`"
    if tier == T_COMPUTED and root.computed is not None:
        return f"no signature matched; {root.computed.why}"
    if tier == T_FAMILY and root.family is not None:
        return f"no signature matched; {root.family.why}"
    if tier == T_NOVEL:
        n = len(load_healthy_model().templates)
        return (
            "no signature or family matched; earliest line that is not one of the "
            f"{n} healthy templates (mined from real healthy logs) and carries a failure word"
        )
    if tier == T_RAISE:
        return "no exception line survived (cut traceback); a lone `raise` line is the only evidence"
    if tier == T_CASCADE:
        return "only consequences (cascade) found; the root cause is probably in a log not given"
    if tier == T_WEAK:
        what = root.signature.title if root.signature else "weak signal"
        return f"nothing else failed; the only anomaly is a weak signal ({what}, x{promoted_count})"
    return "no catalogue signature matched; earliest ERROR/Traceback/FATAL line"


def _title(root: Hit, tier: int, promoted_count: int, scope: str = "") -> str:
    if root.signature is not None and tier == T_WEAK and root.signature.id == "access-4xx":
        return f"{root.signature.title}: x{promoted_count}{scope}"
    if root.signature is not None and tier != T_CASCADE:
        return root.signature.title
    if root.signature is not None:
        return root.signature.title
    if tier == T_COMPUTED and root.computed is not None:
        return root.computed.check.title
    if tier == T_FAMILY and root.family is not None:
        return root.family.family.title
    if tier == T_NOVEL:
        return "First line unlike healthy output that carries a failure word (no known signature)"
    if tier == T_RAISE:
        return "A `raise` line from a cut traceback (no exception line shown)"
    return "Earliest error line (no known signature)"


_EMPTY_EXCEPTION = re.compile(r"\s*(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception):\s*")
_LOG_LINE_START = re.compile(
    r"\s*(?:\[|\(|\d{2,4}[-:/]|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\b|Traceback\b|File \")"
)


def _wrapped_message(message: str, after: list[str]) -> str | None:
    """An exception line with nothing after its colon whose message a console wrapped onto the next
    lines (Rich prints `ImportError:` alone, then the path, then `: undefined symbol: …`): the
    exception with those lines joined, up to the first blank or log-looking line."""
    if not _EMPTY_EXCEPTION.fullmatch(message):
        return None
    parts: list[str] = []
    for raw in after[:3]:
        if not raw.strip() or _LOG_LINE_START.match(raw):
            break
        parts.append(raw.strip())
    return f"{message.strip()} {' '.join(parts)}" if parts else None


def judge(acc: Accumulator, catalogue: Catalogue) -> Verdict:
    families = load_families()
    hits = list(acc.first.values())
    for h in hits:
        if (
            h.signature is None and h.computed is None
        ):  # rescore with the full context now that the lines after it are known
            message, frames = _family_inputs(h)
            if message is not h.event.message and (sig := catalogue.classify(message, [])) is not None:
                h.signature = sig
                continue
            h.family = families.score(
                message, frames, [*h.before, *h.after], h.event.origin, cut=h.event.cut is not None
            )
    signals = [_entry(h, acc) for h in _sorted([h for h in hits if _tier(h) == T_WEAK])]
    pool, runs_note = _current_runs(hits, acc)
    by_tier: dict[int, list[Hit]] = {}
    for h in pool:
        by_tier.setdefault(_tier(h), []).append(h)
    promoted_count = 0
    trailing_refusals = False
    restart_note: str | None = None
    wrapped_by: Hit | None = None
    computed_on: Hit | None = None  # the computed line, when the line below it states its consequence
    replaced: Hit | None = None
    if not by_tier or min(by_tier) >= T_WEAK:
        root, trailing_refusals = _promoted(hits, acc)
        if root is None and (found := _restart(hits, acc)) is not None:
            root, restart_note = found
        if root is None:
            reason = (
                "no anomaly found" if not signals else "no failure found; only weak signals (see signals)"
            )
            return Verdict(None, None, 0.0, reason, None, signals=signals)
        if restart_note is not None:
            tier, confidence = T_CASCADE, CONF_CASCADE_ONLY
        else:
            tier = T_WEAK
            promoted_count = acc.stats.get(root.sig_id, SigStats()).count
            signals = [s for s in signals if s.signature != root.sig_id]
            confidence = CONF_PROMOTED
    else:
        tier = min(by_tier)
        ordered = _sorted(by_tier[tier])
        root = ordered[0]
        if (cause := _unwrap(root, pool)) is not root:
            wrapped_by = root
            root, tier = cause, _tier(cause)
            ordered = _sorted(by_tier[tier])
        if tier == T_COMPUTED and (stated := _stated(root, pool)) is not None:
            computed_on, replaced = root, stated
            root = replace(stated, computed=root.computed)
        if tier == T_SIGNATURE:
            root_category = root.signature.category if root.signature is not None else None
            contested = [
                h
                for h in ordered[1:]
                if h.event.timestamp is not None
                and h.event.timestamp == root.event.timestamp
                and h.signature is not None
                and h.signature.category != root_category
            ]
            confidence = CONF_STRONG_CONTESTED if contested else CONF_STRONG
        else:
            confidence = {
                T_COMPUTED: CONF_COMPUTED,
                T_FAMILY: CONF_FAMILY,
                T_NOVEL: CONF_NOVELTY,
                T_GENERIC: CONF_GENERIC,
                T_RAISE: CONF_GENERIC,
            }.get(tier, CONF_CASCADE_ONLY)
    sig = root.signature
    category, runtime_category = _category_of(root, tier)
    lean = _lean(root, tier, families)
    if lean is not None:
        category, runtime_category = lean.family.category, lean.family.runtime_category
    stack = _stack_lean(root, tier, families)
    if stack is not None:
        category, runtime_category = stack.family.category, stack.family.runtime_category
    if tier == T_CASCADE:
        category = Category.OTHER.value
    phase = decide_phase(root, acc, pool, runs_note)
    if runtime_category:
        if phase.value == "runtime":
            category = runtime_category
        if not phase.evidenced:
            confidence = max(0.05, confidence - PHASE_NOT_EVIDENCED_PENALTY)
    layer = _LAYER.get(tier, LAYER_GENERIC)
    reason = restart_note or _why(root, tier, promoted_count)
    if lean is not None:
        reason += f"; no family reached the {families.threshold:g} a verdict needs, but the category leans to {lean.why}"
    if stack is not None:
        reason += f"; the stack printed below it leans to {stack.why}"
    if computed_on is not None:
        reason += (
            f" on line {computed_on.event.line}; reported on line {root.event.line}, which states its "
            "consequence in the program's own words (`stated_by` in data/computed_checks.yaml)"
        )
    if wrapped_by is not None:
        reason += f"; the line above it ({wrapped_by.event.source}:{wrapped_by.event.line}) only announces it"
    if restart_note is not None:
        title = RESTART_TITLE
    else:
        scope = ""
        if root.sig_id == "access-4xx" and tier == T_WEAK:
            scope = ", none answered 2xx" if root.source_index not in acc.ok_access else ""
            if trailing_refusals:
                scope = f", none answered 2xx after line {root.event.line} (the earlier ones were)"
        title = _title(root, tier, promoted_count, scope)

    cascade: list[CascadeEntry] = []
    for h in _sorted([h for h in pool if h is not root and h is not replaced]):
        if earlier(h, root) < 0:
            continue  # weaker signals before the root are not its consequences
        key = h.sig_id
        if any(c.signature == key for c in cascade):
            continue
        cascade.append(_entry(h, acc))
    own = acc.stats.get(root.sig_id)
    if own is not None and own.count > 1 and tier != T_WEAK:
        repeat = replace(
            _entry(root, acc),
            role="repeat",
            category=category,
            title="same signature as the root cause",
            count=own.count - 1,
            summary=summarize(own, exclude_one=True),
        )
        cascade.insert(0, repeat)

    fix: list[str] = []
    docs: list[str] = []
    if restart_note is not None:
        fix.extend(RESTART_FIX)
    elif sig is not None and tier in (T_SIGNATURE, T_WEAK):
        fix.extend(sig.fix)
        docs.extend(sig.docs)
    elif root.computed is not None and tier == T_COMPUTED:
        fix.extend(root.computed.check.fix)
    for step in catalogue.category_fix.get(category, []):
        if step not in fix:
            fix.append(step)
    for d in catalogue.category_docs.get(category, []):
        if d not in docs:
            docs.append(d)
    return Verdict(
        root,
        category,
        round(confidence, 2),
        reason,
        phase.summary,
        cascade,
        fix,
        docs,
        signals,
        layer=layer,
        title=title,
        phase=phase,
        runs_note=runs_note,
    )


def weak_verdict(find: WeakFind, acc: Accumulator, catalogue: Catalogue, base: Verdict) -> Verdict:
    """The verdict for a root only the weak layer found (weak.py): its cue's category, else the
    family its words lean to, else `other`; the lowest confidence; `why` names the cue."""
    families = load_families()
    root = find.hit
    category, runtime_category = default_category(find), None
    lean = None
    if find.cue.category is None:
        lean = families.score(
            root.event.message,
            [],
            [*root.before, *root.after],
            root.event.origin,
            threshold=families.lean_threshold,
            margin=families.lean_margin,
        )
        if lean is not None:
            category, runtime_category = lean.family.category, lean.family.runtime_category
    pool = list(acc.first.values())
    phase = decide_phase(root, acc, pool)
    confidence = CONF_WEAK
    if runtime_category:
        if phase.value == "runtime":
            category = runtime_category
        if not phase.evidenced:
            confidence = max(0.05, confidence - PHASE_NOT_EVIDENCED_PENALTY)
    reason = describe(find)
    if lean is not None:
        reason += f"; the category leans to {lean.why}"
    fix = list(catalogue.category_fix.get(category, []))
    docs = list(catalogue.category_docs.get(category, []))
    return Verdict(
        root,
        category,
        round(confidence, 2),
        reason,
        phase.summary,
        [],
        fix,
        docs,
        base.signals,
        layer=LAYER_WEAK,
        title=title_of(find),
        phase=phase,
        weak_cue=find.cue.id,
    )


def repetition_verdict(
    find: RepetitionFind, acc: Accumulator, catalogue: Catalogue, base: Verdict
) -> Verdict:
    """The verdict for a log that ends in one wait/retry line repeated (repetition.py): the category
    its words lean to, else `other`; the lowest confidence; `why` quotes the count and the share."""
    families = load_families()
    root = find.hit
    lean = families.score(
        root.event.message,
        [],
        [],
        root.event.origin,
        threshold=families.lean_threshold,
        margin=families.lean_margin,
    )
    category = lean.family.category if lean is not None else Category.OTHER.value
    phase = decide_phase(root, acc, list(acc.first.values()))
    reason = find.why + (f"; the category leans to {lean.why}" if lean is not None else "")
    return Verdict(
        root,
        category,
        CONF_REPETITION,
        reason,
        phase.summary,
        [],
        list(catalogue.category_fix.get(category, [])),
        list(catalogue.category_docs.get(category, [])),
        base.signals,
        layer=LAYER_REPETITION,
        title=f"The log ends in one wait/retry line repeated x{find.run.count}: what it waits for never happened",
        phase=phase,
    )


def _entry(h: Hit, acc: Accumulator) -> CascadeEntry:
    stats = acc.stats.get(h.sig_id, SigStats())
    fam = h.family.family if h.family is not None and h.signature is None else None
    check = h.computed.check if h.computed is not None and h.signature is None else None
    return CascadeEntry(
        signature=h.sig_id,
        role=h.signature.role if h.signature else (h.kind if fam is None else "family"),
        category=h.signature.category
        if h.signature
        else (check.category if check else fam.category if fam else Category.OTHER.value),
        title=h.signature.title
        if h.signature
        else (check.title if check else fam.title if fam else "error line"),
        count=stats.count,
        ranks=sorted(stats.ranks),
        sources=list(stats.sources),
        summary=summarize(stats, exclude_one=False),
        first=_where(h),
    )


def _where(h: Hit) -> FirstSeen:
    ev = h.event
    return FirstSeen(ev.source, ev.line, ev.text, ev.rank, timestamp_str(ev.timestamp))


def to_findings(v: Verdict) -> list[Finding]:
    if v.root is None:
        out = [Finding("triage.root-cause", Severity.PASS, Category.OTHER, "No failure found in the logs")]
        for s in v.signals:
            out.append(
                Finding(
                    f"triage.signal.{s.signature}",
                    Severity.INFO,
                    Category(s.category),
                    s.title,
                    evidence=[
                        f"{s.first.source}:{s.first.line}: {redact_text(s.first.text.strip()[:300])}",
                        s.summary,
                    ],
                )
            )
        return out
    ev = v.root.event
    title = v.title or "Earliest error line (no known signature)"
    evidence = [
        f"{ev.source}:{ev.line}: {redact_text(ev.text.strip()[:400])}",
        f"layer {v.layer}: {v.reason}",
    ]
    if v.phase_evidence:
        evidence.append(f"phase: {v.phase_evidence}")
    evidence.extend(
        f"cascade: {c.title} ({c.summary}), first at {c.first.source}:{c.first.line}" for c in v.cascade[:10]
    )
    return [
        Finding(
            id=f"triage.{v.root_id}",
            severity=Severity.FAIL,
            category=Category(v.category or "other"),
            title=f"{title} (confidence {v.confidence:.2f})",
            evidence=evidence,
            fix=list(v.fix),
            docs=list(v.docs),
        )
    ]
