"""`history`, `report` and `diff`: read the run history back (SQLite by default, `--db URL` for any other)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from vllm_medic.cli_common import JsonOpt, JunitOpt, StrictOpt, console
from vllm_medic.errors import ToolError, UsageError
from vllm_medic.model import ExitCode

if TYPE_CHECKING:
    from vllm_medic.store.api import Store

DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="SQLAlchemy URL of the history (default: $VLLM_MEDIC_DB, else SQLite in the user data directory).",
        metavar="URL",
    ),
]
RunArg = Annotated[str, typer.Argument(help="Run id, a unique prefix of it, or 'latest'.", metavar="RUN")]
STATUS_GLYPH = {"pass": "✓", "warn": "!", "fail": "✗", "skipped": "-", "running": "…"}


def _open(db: str | None) -> Store:
    """Read-only commands never create a database: a mistyped SQLite path is an error, not a new file."""
    from vllm_medic.store.api import open_store

    return open_store(db, must_exist=True)


def _snapshot_of(store: Store, run: dict[str, Any]) -> dict[str, Any] | None:
    from vllm_medic.store.views import load_snapshot

    if not any(a["name"] == "snapshot.json" for a in run.get("attachments") or []):
        return None
    return load_snapshot(store.get_attachment(run["run_id"], "snapshot.json"))


def _write_file(path: Path, text: str) -> None:
    """Write atomically (temp file + rename) so an interrupted write never leaves half a sheet."""
    if str(path) == "-":
        sys.stdout.write(text)
        return
    if path.expanduser().is_dir():
        raise UsageError(
            f"cannot write {path}: it is a directory; give a file name, e.g. {path / 'sheet.html'}"
        )
    parent = path.expanduser().resolve().parent
    if not parent.is_dir():
        raise UsageError(f"cannot write {path}: directory {parent} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a sheet is meant to be shared
        os.replace(tmp, path)
    except OSError as exc:
        raise ToolError(f"cannot write {path}: {exc}") from exc


def report_exit_code(run: dict[str, Any], strict: bool) -> ExitCode:
    """0 only when the run finished and every step that ran passed (with --strict, warnings fail too, and
    so does a pass whose environment was not verified)."""
    statuses = [s.get("status") for s in run.get("steps") or []]
    if run.get("verdict") not in ("pass", "pass_unverified") or run.get("status") != "finished":
        return ExitCode.FINDINGS
    if strict and run.get("verdict") == "pass_unverified":
        return ExitCode.FINDINGS
    if "fail" in statuses or "running" in statuses or (strict and "warn" in statuses):
        return ExitCode.FINDINGS
    return ExitCode.OK


def _print_history(runs: list[dict[str, Any]], url: str) -> None:
    """One line per run (id first, so it can be pasted into `report`/`diff`), its steps on the next."""
    from rich.markup import escape

    con = console()
    if not runs:
        con.print(f"No runs recorded yet in {url}.", highlight=False, markup=False)
        return
    con.print(f"[bold]Runs in {escape(url)}[/] (newest first)", highlight=False)
    for r in runs:
        verdict = r["verdict"] or "–"
        style = {"pass": "green", "fail": "red"}.get(verdict, "yellow")
        con.print(
            f"{escape(r['run_id'])}  {escape(r['kind'])}  [{style}]{escape(verdict):<10}[/] "
            f"{escape(r['status']):<11} {escape(r['started_at'][:19].replace('T', ' '))}  {escape(r['target'])}",
            highlight=False,
            soft_wrap=True,
        )
        steps = " ".join(f"{s['name']}{STATUS_GLYPH.get(s['status'], '?')}" for s in r["steps"])
        con.print(f"    {escape(steps or 'no steps recorded')}", highlight=False, soft_wrap=True)
        if r["status"] == "interrupted" and r.get("reason"):
            con.print(f"    why: {escape(str(r['reason']))}", highlight=False)


def _print_run(run: dict[str, Any]) -> None:
    from rich.markup import escape

    from vllm_medic.model import Finding
    from vllm_medic.report.terminal import render_finding

    con = console()
    con.print(
        f"[bold]Run {escape(run['run_id'])}[/] ({escape(run['kind'])}) → {escape(run['target'])}: "
        f"verdict [bold]{escape(str(run.get('verdict') or '–'))}[/], status {escape(run['status'])}",
        highlight=False,
    )
    if run.get("reason"):
        con.print(f"  why: {escape(str(run['reason']))}", highlight=False)
    for s in run.get("steps") or []:
        con.print(
            f"\n[bold]{escape(STATUS_GLYPH.get(s['status'], '?'))} {escape(s['name'])}[/]: {escape(s['status'])}",
            highlight=False,
        )
        for raw in s.get("findings") or []:
            try:
                render_finding(con, Finding.from_dict(raw))
            except (KeyError, ValueError, TypeError):
                con.print(f"    (unreadable finding: {escape(str(raw)[:200])})", highlight=False)


def _print_diff(d: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape

    from vllm_medic.report.svg import fmt

    con = Console(soft_wrap=True)
    a, b = d["a"], d["b"]
    con.print(
        f"[bold]A[/] {escape(a['run_id'])} ({escape(str(a['verdict']))}, {escape(a['started_at'])})  →  "
        f"[bold]B[/] {escape(b['run_id'])} ({escape(str(b['verdict']))}, {escape(b['started_at'])})",
        highlight=False,
    )
    env = d["environment"]
    con.print("\n[bold]Environment[/]", highlight=False)
    if not env["changed"] and not env["launch_args"]["changed"]:
        con.print("  no change in " + (", ".join(env["unchanged"]) or "any recorded field"), highlight=False)
    for c in env["changed"]:
        if c["field"] == "topology":
            con.print("  [yellow]topology changed[/] (see `report --html` of each run)", highlight=False)
            continue
        con.print(
            f"  [yellow]{escape(c['field'])}[/]: {escape(str(c['a']))} → {escape(str(c['b']))}",
            highlight=False,
        )
    la = env["launch_args"]
    if la["changed"]:
        con.print(
            f"  [yellow]launch args[/]: removed {escape(' '.join(la['removed']) or '–')}; "
            f"added {escape(' '.join(la['added']) or '–')}",
            highlight=False,
        )
    con.print("\n[bold]Steps[/]", highlight=False)
    for s in d["steps"]:
        mark = "[yellow]changed[/]" if s["changed"] else "same"
        con.print(f"  {escape(s['name'])}: {s['a'] or '–'} → {s['b'] or '–'} ({mark})", highlight=False)
    res = d["results"]
    con.print("\n[bold]Results[/]", highlight=False)
    for key, label in (
        ("max_sustainable_concurrency", "max sustainable concurrency"),
        ("prefix_hit_ratio", "prefix-cache hit ratio"),
    ):
        r = res[key]
        va = "–" if r["a"] is None else fmt(r["a"])
        vb = "–" if r["b"] is None else fmt(r["b"])
        tag = " [red](worse)[/]" if r["worse"] else ""
        con.print(f"  {label}: {va} → {vb}{tag}", highlight=False)
    if res["levels"]:
        con.print("\n[bold]Per concurrency, A → B[/] (red: worse; every metric in --json)", highlight=False)
    labels = {
        "ttft_p50_ms": "TTFT p50 ms",
        "ttft_p99_ms": "TTFT p99 ms",
        "tpot_p99_ms": "TPOT p99 ms",
        "e2e_p99_ms": "E2E p99 ms",
        "output_tokens_per_s": "out tok/s",
        "errors": "errors",
    }
    for lv in res["levels"]:
        cells = []
        for key, label in labels.items():
            m = lv["metrics"].get(key)
            if m is None:
                continue
            va = "–" if m["a"] is None else fmt(m["a"])
            vb = "–" if m["b"] is None else fmt(m["b"])
            pct = "" if m["change_pct"] is None else f" ({m['change_pct']:+.0f}%)"
            cell = f"{label} {va}→{vb}{pct}"
            cells.append(f"[red]{escape(cell)}[/]" if m["worse"] else escape(cell))
        status = lv["status"]
        con.print(
            f"  c={lv['concurrency']} "
            + escape(f"[{status['a'] or '–'}→{status['b'] or '–'}]")
            + ": "
            + ", ".join(cells),
            highlight=False,
        )


def register(app: typer.Typer) -> None:
    @app.command("history")
    def history(
        db: DbOpt = None,
        limit: Annotated[int, typer.Option("--limit", help="Show at most N runs, newest first.", min=1)] = 20,
        kind: Annotated[
            str | None, typer.Option("--kind", help="Only runs of this kind (accept, ...).")
        ] = None,
        as_json: JsonOpt = False,
    ) -> None:
        """List recorded runs, newest first (a run whose writer died reads as interrupted)."""
        from vllm_medic.report.jsonout import dumps
        from vllm_medic.store.api import NoHistory, default_db_url, sqlite_path

        try:
            store = _open(db)
        except NoHistory:
            url = db or default_db_url()
            if as_json:
                sys.stdout.write(dumps({"db": url, "runs": []}) + "\n")
            else:
                console().print(
                    f"No runs recorded yet: {sqlite_path(url)} does not exist.", highlight=False, markup=False
                )
            return
        runs = store.list_runs(limit=limit, kind=kind)
        if as_json:
            sys.stdout.write(dumps({"db": store.url, "runs": runs}) + "\n")
        else:
            _print_history(runs, store.url)

    @app.command("report")
    def report(
        run: RunArg,
        db: DbOpt = None,
        html: Annotated[
            Path | None,
            typer.Option(
                "--html", help="Write the offline acceptance sheet to FILE ('-' for stdout).", metavar="FILE"
            ),
        ] = None,
        as_json: JsonOpt = False,
        junit: JunitOpt = None,
        strict: StrictOpt = False,
    ) -> None:
        """Render a recorded run: offline HTML acceptance sheet, JSON, JUnit XML (terminal when none is asked).

        Exit 0 only when the run finished with verdict pass and no step failed; 1 otherwise."""
        from vllm_medic.report.jsonout import dumps

        store = _open(db)
        data = store.get_run(run)
        if html is not None:
            from vllm_medic.report.html import render_sheet

            _write_file(html, render_sheet(data, _snapshot_of(store, data)))
        if junit is not None:
            from vllm_medic.store.run_junit import run_to_junit

            _write_file(junit, run_to_junit(data, strict))
        code = report_exit_code(data, strict)
        if as_json:
            payload = dict(data)
            payload["exit_code"] = int(code)
            sys.stdout.write(dumps(payload) + "\n")
        elif html is None and junit is None:
            _print_run(data)
        elif str(html) != "-":
            written = [str(p) for p in (html, junit) if p is not None]
            typer.echo(
                f"run {data['run_id']}: verdict {data.get('verdict') or '–'}; wrote {', '.join(written)}",
                err=True,
            )
        raise typer.Exit(int(code))

    @app.command("diff")
    def diff(
        run_a: Annotated[
            str, typer.Argument(help="The baseline run (id, prefix or 'latest').", metavar="RUN_A")
        ],
        run_b: Annotated[str, typer.Argument(help="The run to compare with it.", metavar="RUN_B")],
        db: DbOpt = None,
        as_json: JsonOpt = False,
    ) -> None:
        """What changed between two runs: environment (driver, image digest, vLLM, topology, launch args,
        GPUs) and results (step status, latency percentiles and throughput per concurrency, prefix-cache
        hit ratio, max sustainable concurrency)."""
        from vllm_medic.report.jsonout import dumps
        from vllm_medic.store.diffing import diff_runs

        store = _open(db)
        a, b = store.get_run(run_a), store.get_run(run_b)
        d = diff_runs(a, _snapshot_of(store, a), b, _snapshot_of(store, b))
        if as_json:
            sys.stdout.write(dumps(d) + "\n")
        else:
            _print_diff(d)
