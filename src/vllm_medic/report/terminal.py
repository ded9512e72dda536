"""Terminal rendering in the flutter-doctor spirit: one glyph line per finding, the fix under it."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.markup import escape

from vllm_medic.model import Finding, Severity, sort_by_method

GLYPH = {Severity.PASS: "[✓]", Severity.INFO: "[•]", Severity.WARN: "[!]", Severity.FAIL: "[✗]"}
STYLE = {Severity.PASS: "green", Severity.INFO: "cyan", Severity.WARN: "yellow", Severity.FAIL: "red"}


def render_finding(console: Console, f: Finding, verbose: bool = False) -> None:
    glyph = GLYPH[f.severity]
    console.print(
        f"[{STYLE[f.severity]}]{escape(glyph)}[/] [bold]{escape(f.title)}[/] [dim]({escape(f.id)}, {f.category.value})[/]",
        highlight=False,
    )
    if f.severity is Severity.PASS and not verbose:
        for e in f.evidence[:1]:
            console.print(f"    [dim]• {escape(e)}[/]", highlight=False)
        return
    for e in f.evidence:
        console.print(f"    • {escape(e)}", highlight=False)
    for i, step in enumerate(f.fix, 1):
        console.print(f"    [bold]{i}.[/] {escape(step)}", highlight=False)
    for d in f.docs:
        console.print(f"    [dim]docs: {escape(d)}[/]", highlight=False)


def summary_line(findings: list[Finding]) -> str:
    fails = sum(1 for f in findings if f.severity is Severity.FAIL)
    warns = sum(1 for f in findings if f.severity is Severity.WARN)
    if not fails and not warns:
        return "• No issues found."
    cats = {f.category for f in findings if f.severity in (Severity.FAIL, Severity.WARN)}
    return f"! Found {fails} failure(s) and {warns} warning(s) in {len(cats)} categor{'y' if len(cats) == 1 else 'ies'}."


def render_findings(
    findings: Iterable[Finding],
    console: Console | None = None,
    verbose: bool = False,
    title: str | None = None,
) -> None:
    console = console or Console()
    items = sort_by_method(findings)
    if title:
        console.print(f"[bold]{escape(title)}[/]", highlight=False)
    for f in items:
        render_finding(console, f, verbose)
    console.print()
    console.print(summary_line(items), highlight=False)
