"""Judgement: pick the earliest root cause, separate the cascade, decide startup vs runtime OOM.

Pure functions over what the scanner kept; no I/O.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from vllm_medic.model import Category, Finding, Severity
from vllm_medic.triage.catalogue import Catalogue
from vllm_medic.triage.normalize import timestamp_str
from vllm_medic.triage.scanner import Accumulator, Hit, SigStats

# Frames that only run while the engine starts (profiling, loading, KV-cache sizing, graph capture).
_STARTUP_FRAMES = re.compile(
    r"profile_run|determine_available_memory|determine_num_available_blocks|_dummy_run|_dummy_sampler_run"
    r"|load_model|capture_model|initialize_kv_cache|_initialize_kv_caches|init_device|compile_or_warm_up_model"
    r"|initialize_from_config|from_engine_args|_init_executor|init_worker"
)
# Lines that exist only once requests are being served.
_RUNTIME_TEXT = re.compile(
    r"serving_chat\.py|serving_completion\.py|serving_engine\.py|Error in model execution"
    r"|err_execute_model_input|Dumping input data"
)
_RUNTIME_SIGS = {"engine-dead"}

CONF_STRONG = 0.9
CONF_STRONG_CONTESTED = 0.75
CONF_GENERIC = 0.3
CONF_CASCADE_ONLY = 0.15


@dataclass
class Verdict:
    root: Hit | None
    category: str | None
    confidence: float
    reason: str
    phase_evidence: str | None
    cascade: list[dict[str, Any]] = field(default_factory=list)
    fix: list[str] = field(default_factory=list)
    docs: list[str] = field(default_factory=list)
    signals: list[dict[str, Any]] = field(default_factory=list)


def _tier(hit: Hit) -> int:
    """0 strong root, 1 generic error line, 2 cascade only, 9 weak signal (never a root by itself)."""
    sig = hit.signature
    if sig is None:
        return 1
    if sig.role == "cascade":
        return (
            2 if sig.priority > 0 else 10
        )  # priority-0 cascades (orderly shutdown) are never reported alone
    return 0 if sig.strong else 9


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


def decide_phase(root: Hit, acc: Accumulator) -> tuple[bool, str]:
    """(ran_before, evidence): had the server started/served before this event?"""
    frames = "\n".join(root.event.frames)
    if frames and (m := _STARTUP_FRAMES.search(frames)):
        return False, f"the traceback runs through `{m.group(0)}` (engine start-up)"
    if m := _RUNTIME_TEXT.search(root.event.text):
        return True, f"the error line itself comes from request handling (`{m.group(0)}`)"
    for idx, ev in acc.served.items():
        served_hit = Hit(ev, None, idx)
        if earlier(served_hit, root) < 0:
            where = f"{ev.source}:{ev.line}"
            return True, f"the server had started/served before it: {where} `{ev.message.strip()[:120]}`"
    for (sig_id, _idx), hit in acc.first.items():
        if sig_id in _RUNTIME_SIGS or _RUNTIME_TEXT.search(hit.event.text):
            return (
                True,
                f"only a running engine logs {hit.event.source}:{hit.event.line} `{hit.event.message.strip()[:120]}`",
            )
    return False, "no sign the server had started or served requests before it"


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


def judge(acc: Accumulator, catalogue: Catalogue) -> Verdict:
    hits = list(acc.first.values())
    signals = [_entry(h, acc) for h in _sorted([h for h in hits if _tier(h) == 9])]
    by_tier: dict[int, list[Hit]] = {}
    for h in hits:
        by_tier.setdefault(_tier(h), []).append(h)
    if not by_tier or min(by_tier) >= 9:
        reason = "no anomaly found" if not signals else "no failure found; only weak signals (see signals)"
        return Verdict(None, None, 0.0, reason, None, signals=signals)
    tier = min(by_tier)
    ordered = _sorted(by_tier[tier])
    root = ordered[0]
    sig = root.signature
    if tier == 0:
        contested = [
            h
            for h in ordered[1:]
            if h.event.timestamp is not None
            and h.event.timestamp == root.event.timestamp
            and h.signature is not None
            and h.signature.category != sig.category
        ]
        confidence = CONF_STRONG_CONTESTED if contested else CONF_STRONG
        reason = f"earliest root-cause signature `{sig.id}`"
    elif tier == 1:
        confidence, reason = (
            CONF_GENERIC,
            "no catalogue signature matched; earliest ERROR/Traceback/FATAL line",
        )
    else:
        confidence = CONF_CASCADE_ONLY
        reason = "only consequences (cascade) found; the root cause is probably in a log not given"

    category = sig.category if sig is not None and tier == 0 else Category.OTHER.value
    phase_evidence = None
    if sig is not None and sig.runtime_category and tier == 0:
        ran, phase_evidence = decide_phase(root, acc)
        if ran:
            category = sig.runtime_category

    cascade: list[dict[str, Any]] = []
    for h in _sorted([h for h in hits if h is not root]):
        if earlier(h, root) < 0 and _tier(h) != 3:
            continue  # weaker signals before the root are not its consequences
        key = h.sig_id
        if any(c["signature"] == key for c in cascade):
            continue
        stats = acc.stats.get(key, SigStats())
        cascade.append(
            {
                "signature": key,
                "role": h.signature.role if h.signature else "generic",
                "category": h.signature.category if h.signature else Category.OTHER.value,
                "title": h.signature.title if h.signature else "error line",
                "count": stats.count,
                "ranks": sorted(stats.ranks),
                "sources": list(stats.sources),
                "summary": summarize(stats, exclude_one=False),
                "first": _where(h),
            }
        )
    own = acc.stats.get(root.sig_id)
    if own is not None and own.count > 1:
        cascade.insert(
            0,
            {
                "signature": root.sig_id,
                "role": "repeat",
                "category": category,
                "title": "same signature as the root cause",
                "count": own.count - 1,
                "ranks": sorted(own.ranks),
                "sources": list(own.sources),
                "summary": summarize(own, exclude_one=True),
                "first": _where(root),
            },
        )

    fix: list[str] = []
    docs: list[str] = []
    if sig is not None and tier == 0:
        fix.extend(sig.fix)
        docs.extend(sig.docs)
    for step in catalogue.category_fix.get(category, []):
        if step not in fix:
            fix.append(step)
    for d in catalogue.category_docs.get(category, []):
        if d not in docs:
            docs.append(d)
    return Verdict(root, category, confidence, reason, phase_evidence, cascade, fix, docs, signals)


def _entry(h: Hit, acc: Accumulator) -> dict[str, Any]:
    stats = acc.stats.get(h.sig_id, SigStats())
    return {
        "signature": h.sig_id,
        "role": h.signature.role if h.signature else "generic",
        "category": h.signature.category if h.signature else Category.OTHER.value,
        "title": h.signature.title if h.signature else "error line",
        "count": stats.count,
        "ranks": sorted(stats.ranks),
        "sources": list(stats.sources),
        "summary": summarize(stats, exclude_one=False),
        "first": _where(h),
    }


def _where(h: Hit) -> dict[str, Any]:
    ev = h.event
    return {
        "source": ev.source,
        "line": ev.line,
        "text": ev.text,
        "rank": ev.rank,
        "timestamp": timestamp_str(ev.timestamp),
    }


def to_findings(v: Verdict) -> list[Finding]:
    if v.root is None:
        out = [Finding("triage.root-cause", Severity.PASS, Category.OTHER, "No failure found in the logs")]
        for s in v.signals:
            out.append(
                Finding(
                    f"triage.signal.{s['signature']}",
                    Severity.INFO,
                    Category(s["category"]),
                    s["title"],
                    evidence=[
                        f"{s['first']['source']}:{s['first']['line']}: {s['first']['text'].strip()[:300]}",
                        s["summary"],
                    ],
                )
            )
        return out
    ev = v.root.event
    title = (
        v.root.signature.title
        if v.root.signature and v.root.signature.role != "cascade"
        else (
            "Earliest error line (no known signature)" if v.root.signature is None else v.root.signature.title
        )
    )
    evidence = [f"{ev.source}:{ev.line}: {ev.text.strip()[:400]}"]
    if v.phase_evidence:
        evidence.append(f"phase: {v.phase_evidence}")
    evidence.extend(
        f"cascade: {c['title']} ({c['summary']}), first at {c['first']['source']}:{c['first']['line']}"
        for c in v.cascade[:10]
    )
    return [
        Finding(
            id=f"triage.{v.root.sig_id}",
            severity=Severity.FAIL,
            category=Category(v.category or "other"),
            title=f"{title} (confidence {v.confidence:.2f})",
            evidence=evidence,
            fix=list(v.fix),
            docs=list(v.docs),
        )
    ]
