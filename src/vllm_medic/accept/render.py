"""Output of one acceptance run: terminal lines or JSON on stdout, JUnit and HTML files, and the exit code."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.markup import escape

from vllm_medic.accept.outcome import verdict_label
from vllm_medic.accept.runner import RunSummary, scrub
from vllm_medic.cli_common import console, stderr
from vllm_medic.errors import UsageError
from vllm_medic.model import ExitCode, Finding
from vllm_medic.report.jsonout import dumps
from vllm_medic.report.junit import write_junit
from vllm_medic.report.terminal import render_finding

STATUS_STYLE = {"pass": "green", "warn": "yellow", "fail": "red", "skipped": "dim", "running": "cyan"}
VERDICT_STYLE = {"pass": "green", "pass_unverified": "yellow", "fail": "red", "incomplete": "yellow"}
ENV_STYLE = {"pass": "green", "warn": "yellow", "fail": "red", "not_verified": "yellow"}


def environment(summary: RunSummary) -> dict[str, Any]:
    archive = next((s for s in summary.steps if s.name == "archive"), None)
    env = archive.data.get("environment") if archive is not None else None
    if isinstance(env, dict):
        return env
    return {"status": "not_verified", "reason": "the archive step did not run", "findings": []}


def exit_code(summary: RunSummary) -> ExitCode:
    if summary.interrupted:
        return ExitCode.INTERRUPTED
    if summary.tool_error:
        return ExitCode.TOOL_ERROR
    return ExitCode.OK if summary.verdict in ("pass", "pass_unverified") else ExitCode.FINDINGS


def all_findings(summary: RunSummary) -> list[Finding]:
    return [f for s in summary.steps for f in s.findings]


def emit(
    summary: RunSummary,
    store: Any,
    *,
    as_json: bool,
    junit: Path | None,
    html: Path | None,
    strict: bool,
    verbose: bool,
    secret: str | None,
) -> ExitCode:
    code = exit_code(summary)
    if summary.store_errors:
        stderr.print(
            f"[yellow]warning:[/] the run history could not be fully written ({len(summary.store_errors)} "
            f"error(s); first: {escape(str(scrub(summary.store_errors[0], secret)))}); the results below are "
            "complete, but `vllm-medic report` will not show all of them",
            highlight=False,
        )
    if junit is not None:
        write_junit(
            junit,
            all_findings(summary),
            "vllm-medic accept",
            strict,
            properties={
                "verdict": summary.verdict,
                "verdict_label": verdict_label(summary.verdict),
                "environment": str(environment(summary).get("status")),
            },
        )
    if html is not None:
        try:
            _write_html(html, summary, store, secret)
        except Exception as exc:  # noqa: BLE001 - a broken store must not hide the results on stdout
            stderr.print(
                f"[red]error:[/] could not write the HTML sheet {escape(str(html))}: {escape(str(exc))}"
            )
            code = ExitCode.TOOL_ERROR if code is ExitCode.OK else code
    if as_json:
        payload: dict[str, Any] = summary.to_dict()
        payload["db"] = getattr(store, "url", None)
        payload["exit_code"] = int(code)
        payload["verdict_label"] = verdict_label(summary.verdict)
        payload["environment"] = environment(summary)
        if summary.tool_error:
            payload["tool_error"] = summary.tool_error
        sys.stdout.write(dumps(scrub(payload, secret)) + "\n")
        return code
    out = console()
    for step in summary.steps:
        style = STATUS_STYLE.get(step.status, "")
        reason = step.data.get("skipped_reason") if step.status == "skipped" else None
        out.print(
            f"[bold]{escape(step.name)}[/]: [{style}]{step.status}[/]"
            + (f" — {escape(str(reason))}" if reason else ""),
            highlight=False,
        )
        for f in step.findings:
            safe = Finding.from_dict(scrub(f.to_dict(), secret))
            render_finding(out, safe, verbose)
    _print_environment(out, environment(summary), verbose)
    verdict_style = VERDICT_STYLE.get(summary.verdict, "")
    out.print()
    out.print(
        f"verdict: [{verdict_style}]{escape(verdict_label(summary.verdict))}[/]  run {escape(summary.run_id)}"
        + (f"  ({escape(summary.interrupted)})" if summary.interrupted else ""),
        highlight=False,
    )
    out.print(f"[dim]sheet: vllm-medic report {escape(summary.run_id)} --html FILE[/]", highlight=False)
    if summary.tool_error:
        stderr.print(f"[red]tool error:[/] {escape(str(scrub(summary.tool_error, secret)))}", highlight=False)
    return code


def _print_environment(out: Any, env: dict[str, Any], verbose: bool) -> None:
    status = str(env.get("status"))
    out.print()
    label = "not verified" if status == "not_verified" else status
    out.print(f"[bold]Environment verdict[/]: [{ENV_STYLE.get(status, '')}]{label}[/]", highlight=False)
    if status == "not_verified":
        out.print(f"  {escape(str(env.get('reason') or ''))}", highlight=False)
        return
    out.print(
        f"  recipe {escape(str(env.get('recipe')))}; evidence: {escape(str(env.get('evidence_from')))}",
        highlight=False,
    )
    for f in env.get("findings") or []:
        if f.get("severity") in ("fail", "warn") or verbose:
            render_finding(out, Finding.from_dict(f), verbose)


def _write_html(path: Path, summary: RunSummary, store: Any, secret: str | None) -> None:
    from vllm_medic.report.html import render_sheet
    from vllm_medic.store.views import load_snapshot

    run = store.get_run(summary.run_id)
    snapshot = None
    if any(a.get("name") == "snapshot.json" for a in run.get("attachments") or []):
        snapshot = load_snapshot(store.get_attachment(summary.run_id, "snapshot.json"))
    text = render_sheet(scrub(run, secret), scrub(snapshot, secret) if snapshot else None)
    parent = path.expanduser().resolve().parent
    if not parent.is_dir():
        raise UsageError(f"cannot write {path}: directory {parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=parent)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
