"""`doctor` output in the flutter-doctor spirit: one block per category, the fix under each problem,
probe timings, and a closing summary."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape

from vllm_medic.collect.source_entry import SourceEntry
from vllm_medic.model import Category, Finding, Severity, sort_by_method, worst_severity
from vllm_medic.report.terminal import GLYPH, STYLE, summary_line

CATEGORY_TITLE = {
    Category.DRIVER_CUDA: "Driver and CUDA",
    Category.IMAGE_DEPENDENCY: "Image and dependencies",
    Category.OOM_STARTUP: "Startup memory",
    Category.OOM_RUNTIME: "Runtime memory",
    Category.PARALLEL_LAYOUT: "GPUs and parallel layout",
    Category.NCCL_NETWORK: "NCCL and network",
    Category.PREFIX_CACHE: "Prefix caching",
    Category.OTHER: "Other",
}


def probe_rows(sources: dict[str, SourceEntry]) -> list[dict[str, Any]]:
    rows = []
    for e in sources.values():
        rows.append(
            {
                "name": e.name,
                "status": e.status or "?",
                "duration_s": float(e.duration_s) if e.duration_s is not None else None,
                "message": e.message or "",
            }
        )
    return sorted(rows, key=lambda r: -(r["duration_s"] or 0.0))


def render_doctor(
    console: Console,
    findings: list[Finding],
    *,
    recipe_name: str,
    sources: dict[str, SourceEntry],
    wall_s: float,
    verbose: bool = False,
) -> None:
    console.print(f"[bold]vllm-medic doctor[/] — recipe {escape(recipe_name)}", highlight=False)
    items = sort_by_method(findings)
    for cat in Category:
        group = [f for f in items if f.category is cat]
        if not group:
            continue
        worst = worst_severity(group)
        glyph, style = GLYPH[worst], STYLE[worst]
        n_bad = sum(1 for f in group if f.severity in (Severity.WARN, Severity.FAIL))
        n_unchecked = sum(1 for f in group if f.severity is Severity.NOT_CHECKED)
        tally = f", {n_bad} need attention" if n_bad else ""
        tally += f", {n_unchecked} not checked" if n_unchecked else ""
        console.print(
            f"[{style}]{escape(glyph)}[/] [bold]{CATEGORY_TITLE[cat]}[/] [dim]({len(group)} checks{tally})[/]",
            highlight=False,
        )
        for f in group:
            show_detail = f.severity in (Severity.WARN, Severity.FAIL, Severity.NOT_CHECKED) or verbose
            mark = GLYPH[f.severity].strip("[]")
            console.print(
                f"    [{STYLE[f.severity]}]{mark}[/] {escape(f.title)} [dim]{escape(f.id)}[/]",
                highlight=False,
            )
            if not show_detail:
                continue
            brief = f.severity is Severity.NOT_CHECKED and not verbose  # what was missing, how to capture it
            for e in f.evidence[:1] if brief else f.evidence:
                console.print(f"        [dim]{escape(e)}[/]", highlight=False)
            for i, step in enumerate(f.fix[-1:] if brief else f.fix, 1):
                console.print(f"        [bold]{i}.[/] {escape(step)}", highlight=False)
            if brief:
                continue
            for d in f.docs[:2]:
                console.print(f"        [dim]docs: {escape(d)}[/]", highlight=False)
    rows = probe_rows(sources)
    if rows:
        console.print()
        console.print("[bold]Probes[/] [dim](slowest first)[/]", highlight=False)
        for r in rows:
            dur = f"{r['duration_s'] * 1000:.0f}ms" if r["duration_s"] is not None else "-"
            msg = f" — {escape(r['message'][:100])}" if r["status"] != "ok" and r["message"] else ""
            console.print(f"    [{dur:>7}] {escape(r['name'])}: {escape(r['status'])}{msg}", highlight=False)
    console.print()
    console.print(f"{summary_line(items)} [dim](doctor took {wall_s:.2f}s)[/]", highlight=False)
