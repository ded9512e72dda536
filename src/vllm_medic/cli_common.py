"""Helpers every command uses: the common output flags and the one exit-code policy."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from vllm_medic.model import ExitCode, Finding, exit_code_for

if TYPE_CHECKING:
    from rich.console import Console

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]
JunitOpt = Annotated[
    Path | None, typer.Option("--junit", help="Write findings as JUnit XML to FILE.", metavar="FILE")
]
StrictOpt = Annotated[bool, typer.Option("--strict", help="Exit 1 on warnings too, not only on failures.")]
VerboseOpt = Annotated[bool, typer.Option("--verbose", "-v", help="Show evidence for passing checks too.")]


class _ConsoleOnFirstUse:
    """Stands in for `Console(stderr=True)` and makes it on first use: rich costs ~25 ms of start-up,
    which `--json` output and a run that has nothing to say on stderr never need."""

    _made: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._made is None:
            from rich.console import Console

            self._made = Console(stderr=True)
        return getattr(self._made, name)


stderr = cast("Console", _ConsoleOnFirstUse())


def console() -> Console:
    """Wrapped to the terminal when there is one; unwrapped into pipes, files and CI logs, so every
    evidence line, path and fix command stays on one line (copy-pasteable, greppable)."""
    from rich.console import Console

    return Console(soft_wrap=not sys.stdout.isatty())


def emit_findings(
    findings: Iterable[Finding],
    *,
    as_json: bool,
    junit: Path | None,
    strict: bool,
    suite: str,
    extra: dict[str, Any] | None = None,
    title: str | None = None,
    verbose: bool = False,
) -> ExitCode:
    from vllm_medic.report.junit import write_junit

    items = list(findings)
    code = exit_code_for(items, strict)
    if as_json:
        from vllm_medic.report.jsonout import dumps

        payload: dict[str, Any] = dict(extra or {})
        payload["findings"] = [f.to_dict() for f in items]
        payload["exit_code"] = int(code)
        sys.stdout.write(dumps(payload) + "\n")
    else:
        from vllm_medic.report.terminal import render_findings

        render_findings(items, console(), verbose=verbose, title=title)
    if junit is not None:  # after the findings are shown: an unwritable FILE must not hide them
        write_junit(junit, items, suite, strict)
    return code


def fail_usage(message: str) -> typer.Exit:
    stderr.print(f"[red]error:[/] {message}", highlight=False)
    return typer.Exit(int(ExitCode.USAGE))
