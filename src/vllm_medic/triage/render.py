"""Terminal view of a triage verdict: root cause with context, cascade summary, fix steps."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from vllm_medic.redact import redact_text
from vllm_medic.triage.api import TriageResult
from vllm_medic.triage.normalize import timestamp_str


def render(result: TriageResult, console: Console) -> None:
    def p(text: str, **_: object) -> None:
        # Log lines must stay whole (copy-paste, grep): let the terminal wrap, not rich.
        console.print(text, highlight=False, soft_wrap=True, emoji=False)

    v = result.verdict
    for w in result.warnings:
        p(f"[yellow]warning:[/] {escape(w)}", highlight=False)
    scanned = sum(s.get("lines", 0) for s in result.sources)
    p(f"[dim]scanned {len(result.sources)} source(s), {scanned:,} lines[/]", highlight=False)
    if v.root is None:
        p(
            "[green][✓][/] No failure found: no root-cause signature, ERROR, Traceback or FATAL line.",
            highlight=False,
        )
        _signals(result, console)
        return
    ev = v.root.event
    sig = v.root.signature
    title = v.title or (sig.title if sig else "Earliest error line (no known signature)")
    p(
        f"[red][✗][/] [bold]Root cause: {escape(title)}[/]  [dim]({escape(v.category or 'other')}, "
        f"layer {escape(v.layer or 'generic')}, signature {escape(v.root_id or v.root.sig_id)}, confidence {v.confidence:.2f})[/]",
        highlight=False,
    )
    where = f"{ev.source}:{ev.line}"
    extras = [
        x
        for x in (
            timestamp_str(ev.timestamp),
            f"rank {ev.rank}" if ev.rank is not None else None,
            ev.process,
            ev.node,
        )
        if x
    ]
    p(
        f"    at [bold]{escape(where)}[/]" + (f"  [dim]{escape(' · '.join(extras))}[/]" if extras else ""),
        highlight=False,
    )
    first = ev.line - len(v.root.before)
    for i, text in enumerate(v.root.before):
        p(f"    [dim]{first + i:>7} │ {escape(redact_text(text)[:300])}[/]", highlight=False)
    p(f"    [bold red]{ev.line:>7} │ {escape(redact_text(ev.text)[:600])}[/]", highlight=False)
    for i, text in enumerate(v.root.after, 1):
        p(f"    [dim]{ev.line + i:>7} │ {escape(redact_text(text)[:300])}[/]", highlight=False)
    p(f"    [dim]why ({escape(v.layer or 'generic')} layer): {escape(v.reason)}[/]", highlight=False)
    if v.phase is not None:
        shown = v.phase.value if v.phase.evidenced else f"{v.phase.value}? (phase not evidenced)"
        p(f"    [dim]phase: {escape(shown)} — {escape('; '.join(v.phase.evidence))}[/]", highlight=False)
    if v.runs_note:
        p(f"    [dim]runs: {escape(v.runs_note)}[/]", highlight=False)
    if v.cascade:
        p("[bold]Cascade (consequences after it):[/]", highlight=False)
        for c in v.cascade[:15]:
            f = c.first
            p(
                f"    • {escape(c.title)} — {escape(c.summary)}; first at {escape(f.source)}:{f.line}",
                highlight=False,
            )
        if len(v.cascade) > 15:
            p(f"    • … {len(v.cascade) - 15} more kinds (see --json)", highlight=False)
    if v.fix:
        p("[bold]What to do, in order:[/]", highlight=False)
        for i, step in enumerate(v.fix, 1):
            p(f"    [bold]{i}.[/] {escape(step)}", highlight=False)
    for d in v.docs:
        p(f"    [dim]docs: {escape(d)}[/]", highlight=False)
    _signals(result, console)


def _signals(result: TriageResult, console: Console) -> None:
    if not result.verdict.signals:
        return
    console.soft_wrap = True
    console.print("[bold]Signals worth a look (not failures on their own):[/]", highlight=False, emoji=False)
    for s in result.verdict.signals:
        f = s.first
        console.print(
            f"    • {escape(s.title)} ({escape(s.category)}) — {escape(s.summary)}; first at "
            f"{escape(f.source)}:{f.line}",
            highlight=False,
        )
        console.print(
            f"      [dim]{escape(redact_text(f.text).strip()[:300])}[/]", highlight=False, emoji=False
        )
