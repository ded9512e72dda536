"""Public API of triage: `triage()`, `scan_text()`, `follow()`; `TriageResult.to_dict()` is `--json`."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_medic.errors import ToolError, UsageError
from vllm_medic.model import Finding
from vllm_medic.redact import redact_text
from vllm_medic.triage.catalogue import Catalogue, load_catalogue
from vllm_medic.triage.dedent import maybe_dedent
from vllm_medic.triage.follow import Anomaly, follow_sources
from vllm_medic.triage.normalize import timestamp_str
from vllm_medic.triage.parallel import jobs_for, merge, scan_in_workers
from vllm_medic.triage.repetition import find_repetition
from vllm_medic.triage.scanner import Accumulator, SourceScanner, build_screens
from vllm_medic.triage.sources import LogSource, check_inputs, expand_inputs, iter_streams
from vllm_medic.triage.spool import Spool
from vllm_medic.triage.verdict import Verdict, judge, repetition_verdict, sort_hits, to_findings, weak_verdict
from vllm_medic.triage.weak import find_weak
from vllm_medic.triage.weak import screen_patterns as weak_screen_patterns

__all__ = ["Anomaly", "TriageResult", "follow", "scan_text", "triage"]


@dataclass
class TriageResult:
    verdict: Verdict
    sources: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    catalogue_files: list[str] = field(default_factory=list)
    interrupted: bool = False

    @property
    def found(self) -> bool:
        return self.verdict.root is not None

    def to_dict(self) -> dict[str, Any]:
        v = self.verdict
        root = None
        if v.root is not None:
            ev = v.root.event
            sig = v.root.signature
            root = {
                "category": v.category,
                "layer": v.layer,
                "signature": v.root_id,
                "family": v.root.family.family.id if v.root.family is not None and sig is None else None,
                "title": v.title or (sig.title if sig else "earliest error line (no known signature)"),
                "source": ev.source,
                "line": ev.line,
                "text": redact_text(ev.text),
                "timestamp": timestamp_str(ev.timestamp),
                "confidence": round(v.confidence, 2),
                "reason": v.reason,
                "why": v.reason,
                "rank": ev.rank,
                "node": ev.node,
                "process": ev.process,
                "traceback_start": ev.traceback_start,
                "phase_evidence": v.phase_evidence,
                "phase": v.phase.to_dict() if v.phase is not None else None,
                "runs": v.runs_note,
                "context": {
                    "before": [redact_text(x) for x in v.root.before],
                    "after": [redact_text(x) for x in v.root.after],
                },
            }
        return {
            "root_cause": root,
            "cascade": [c.to_json() for c in v.cascade],
            "signals": [s.to_json() for s in v.signals],
            "fix": list(v.fix),
            "docs": list(v.docs),
            "sources": self.sources,
            "warnings": self.warnings,
            "catalogue": self.catalogue_files,
            "interrupted": self.interrupted,
        }

    def findings(self) -> list[Finding]:
        return to_findings(self.verdict)


def _scan(
    sources: list[LogSource], catalogue: Catalogue, warnings: list[str], watch: Any = None
) -> TriageResult:
    """``watch`` (a ``triage.progress.ScanProgress``) is told the sources and each stream as it starts."""
    if watch is not None:
        watch.begin(sources)
    acc = Accumulator(warnings=warnings)
    screen, served = build_screens(catalogue, flagged=weak_screen_patterns())
    described: list[dict[str, Any]] = []
    failed = 0
    interrupted = False

    spools: dict[int, tuple[str, LogSource, Spool]] = {}

    def scan_one(i: int, into: Accumulator, index: int) -> tuple[list[dict[str, Any]], bool, bool]:
        """(streams described, nothing read but warned, interrupted) for `sources[i]`."""
        src, before = sources[i], len(into.warnings)
        seen: list[dict[str, Any]] = []
        try:
            for name, stream in iter_streams(src, into.warnings):
                if not src.replayable:  # stdin, a command's output: keep a copy for the weak layer
                    spool = Spool()
                    spools[index + len(seen)] = (name, src, spool)
                    stream = spool.tee(stream)  # type: ignore[assignment]
                scanner = SourceScanner(
                    catalogue, screen, served, into, index + len(seen), name, rank=src.rank, node=src.node
                )
                if watch is not None:
                    watch.stream(src, stream, scanner)
                try:
                    scanner.feed_stream(maybe_dedent(stream))
                finally:
                    seen.append({"name": name, "lines": scanner.line_no, "bytes": scanner.total_bytes})
        except OSError as exc:
            into.warnings.append(f"{src.name}: cannot read ({exc}), skipped")
        except KeyboardInterrupt:
            into.warnings.append(
                f"interrupted while reading {src.name}: the verdict covers only what was read before"
            )
            return seen, False, True
        unread = len(into.warnings) > before and not any(d["lines"] for d in seen[-1:])
        return seen, unread, False

    jobs = jobs_for(sources)
    if jobs > 1:
        # Files only: one stream each, so file i is source index i in every worker.
        def work(i: int) -> tuple[Accumulator, list[dict[str, Any]], bool]:
            part = Accumulator(warnings=[])
            seen, unread, _ = scan_one(i, part, i)
            return part, seen, unread

        done = 0
        try:
            for part, seen, unread in scan_in_workers(len(sources), jobs, catalogue, work):
                merge(acc, part)
                described.extend(seen)
                failed += unread
                done += 1
        except KeyboardInterrupt:
            interrupted = True
            warnings.append(
                f"interrupted while reading {sources[done].name}: the verdict covers only what was read before"
            )
    else:
        for i in range(len(sources)):
            seen, unread, interrupted = scan_one(i, acc, len(described))
            described.extend(seen)
            failed += unread
            if interrupted:
                break
    if sources and failed == len(sources) and not interrupted:
        raise ToolError("nothing could be read: " + "; ".join(warnings))
    try:
        verdict = judge(acc, catalogue)
        if verdict.root is None and not interrupted:
            # The last layer before "no root": a second look at the inputs for a weak failure cue (weak.py).
            try:
                find = find_weak(
                    _replayable(sources, described) + _spooled(spools), acc, catalogue, sort_hits
                )
            except KeyboardInterrupt:
                find, interrupted = None, True
                warnings.append(
                    "interrupted during the second look for weak cues: every input was read once and held no root"
                )
            if find is not None:
                verdict = weak_verdict(find, acc, catalogue, verdict)
            elif (repeated := find_repetition(acc, sort_hits)) is not None:
                verdict = repetition_verdict(repeated, acc, catalogue, verdict)
            elif not interrupted:
                warnings.extend(f"{name}: {spool.cut}" for name, _, spool in spools.values() if spool.cut)
    finally:
        for _, _, spool in spools.values():
            spool.close()
    return TriageResult(verdict, described, warnings, catalogue.files, interrupted)


def _spooled(spools: dict[int, tuple[str, LogSource, Spool]]) -> list[tuple[int, LogSource]]:
    """(stream index, a source over its kept copy) for each stream that could be read only once."""
    return [
        (
            index,
            LogSource(
                name=name, opener=spool.opener, rank=src.rank, node=src.node, replayable=True, spooled=True
            ),
        )
        for index, (name, src, spool) in sorted(spools.items())
        if spool.kept
    ]


def _replayable(sources: list[LogSource], described: list[dict[str, Any]]) -> list[tuple[int, LogSource]]:
    """(stream index, source) of the sources that can be read a second time (files, text): the index
    is the one the scan gave the source's stream (a command's stdout and stderr are two streams)."""
    out: list[tuple[int, LogSource]] = []
    k = 0
    for src in sources:
        first = k
        while k < len(described) and described[k]["name"] in (src.name, f"{src.name} (stderr)"):
            k += 1
        if src.replayable and k > first:
            out.append((first, src))
    return out


def triage(
    inputs: list[str],
    *,
    docker: list[str] | tuple[str, ...] = (),
    kubectl: list[str] | tuple[str, ...] = (),
    previous: bool = False,
    catalogue_paths: list[Path] | tuple[Path, ...] = (),
    watch: Any = None,
) -> TriageResult:
    """Scan every input and return the verdict. Raises UsageError when nothing could be read.
    ``watch``: a ``triage.progress.ScanProgress`` for the terminal's progress line."""
    check_inputs(list(inputs), docker, kubectl)
    catalogue = load_catalogue(list(catalogue_paths))
    warnings: list[str] = []
    sources = expand_inputs(
        list(inputs), docker=docker, kubectl=kubectl, previous=previous, warnings=warnings
    )
    if not sources:
        raise UsageError("nothing to read: " + "; ".join(warnings) if warnings else "nothing to read")
    return _scan(sources, catalogue, warnings, watch)


def scan_text(
    text: str, source: str = "<text>", *, catalogue_paths: list[Path] | tuple[Path, ...] = ()
) -> TriageResult:
    """Triage a string (one log)."""
    catalogue = load_catalogue(list(catalogue_paths))
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    src = LogSource(name=source, opener=lambda: io.BytesIO(data), replayable=True)
    return _scan([src], catalogue, [])


def follow(
    inputs: list[str],
    on_anomaly: Callable[[Anomaly], None],
    stop: threading.Event,
    *,
    docker: list[str] | tuple[str, ...] = (),
    kubectl: list[str] | tuple[str, ...] = (),
    poll_s: float = 0.2,
    catalogue_paths: list[Path] | tuple[Path, ...] = (),
) -> None:
    """Watch logs (tail -F semantics: rotation and truncation) and call `on_anomaly` for every root or
    cascade line as it appears, until `stop` is set."""
    catalogue = load_catalogue(list(catalogue_paths))
    follow_sources(
        list(inputs), catalogue, on_anomaly, stop, docker=list(docker), kubectl=list(kubectl), poll_s=poll_s
    )
