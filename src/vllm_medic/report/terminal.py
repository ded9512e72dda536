"""Terminal rendering in the flutter-doctor spirit: one glyph line per finding, the fix under it."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console
from rich.markup import escape

from vllm_medic.model import Finding, Severity, sort_by_method

GLYPH = {
    Severity.PASS: "[✓]",
    Severity.NOT_CHECKED: "[?]",
    Severity.INFO: "[•]",
    Severity.WARN: "[!]",
    Severity.FAIL: "[✗]",
}
STYLE = {
    Severity.PASS: "green",
    Severity.NOT_CHECKED: "magenta",
    Severity.INFO: "cyan",
    Severity.WARN: "yellow",
    Severity.FAIL: "red",
}


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
    """Failures and warnings first; what was not checked is counted apart, never folded into "no issues"."""
    fails = sum(1 for f in findings if f.severity is Severity.FAIL)
    warns = sum(1 for f in findings if f.severity is Severity.WARN)
    unchecked = sum(1 for f in findings if f.severity is Severity.NOT_CHECKED)
    tail = f"; {unchecked} not checked (missing evidence: see [?] lines)" if unchecked else ""
    if not fails and not warns:
        return ("• No issues found in what was checked" + tail + ".") if unchecked else "• No issues found."
    cats = {f.category for f in findings if f.severity in (Severity.FAIL, Severity.WARN)}
    return (
        f"! Found {fails} failure(s) and {warns} warning(s) in {len(cats)} "
        f"categor{'y' if len(cats) == 1 else 'ies'}{tail}."
    )


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
