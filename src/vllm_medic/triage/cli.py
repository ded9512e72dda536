"""`vllm-medic triage`: first-anomaly triage across rank and node logs."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from vllm_medic.cli_common import JsonOpt, JunitOpt
from vllm_medic.hooks import Hook

#: `triage --ray ADDRESS LOG...` (address, logs, catalogues, as_json, junit) -> exit code; plugged by
#: the cluster package (cluster/cli.py)
CLUSTER_TRIAGE: Hook[Callable[[str, list[str], list[Path], bool, Path | None], int]] = Hook("triage --ray")

LogsArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="Log files, directories (recursive), globs, .gz files, or '-' for stdin.", metavar="LOG..."
    ),
]
DockerOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--docker", help="Read `docker logs --timestamps CONTAINER` (repeatable).", metavar="CONTAINER"
    ),
]
KubectlOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--kubectl",
        help="Read `kubectl logs` of a POD, or of a selector given as '-l app=x' or "
        "'app=x' (all containers; repeatable).",
        metavar="POD|SELECTOR",
    ),
]
PreviousOpt = Annotated[
    bool, typer.Option("--previous", help="With --kubectl: also the previous (crashed) containers.")
]
CatalogueOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalogue",
        help="Extra signature file (YAML, repeatable); its signatures are tried first.",
        metavar="FILE",
    ),
]
FollowOpt = Annotated[
    bool,
    typer.Option(
        "--follow", "-f", help="Watch the logs live and print anomalies as they appear (Ctrl-C to stop)."
    ),
]


RayOpt = Annotated[
    str | None,
    typer.Option(
        "--ray",
        help="Triage where the logs lie: one Ray task per alive node reads LOG... on that node "
        "(globs and $VARS expanded there); verdicts merged on a clock-corrected timeline. ADDRESS or 'auto'.",
        metavar="ADDRESS",
    ),
]


def register(app: typer.Typer) -> None:
    app.command("triage")(triage_cmd)


def triage_cmd(
    logs: LogsArg = None,
    docker: DockerOpt = None,
    kubectl: KubectlOpt = None,
    previous: PreviousOpt = False,
    catalogue: CatalogueOpt = None,
    follow: FollowOpt = False,
    ray: RayOpt = None,
    as_json: JsonOpt = False,
    junit: JunitOpt = None,
) -> None:
    """Find the earliest root-cause line in failed-deployment logs, separate the cascade, say what to do.

    Exit 1 when a root cause is found, 0 when none, 2 usage error, 3 the tool could not read its inputs.
    """
    if ray is not None:
        if follow or docker or kubectl or not logs or "-" in logs:
            from vllm_medic.errors import UsageError

            raise UsageError(
                "--ray reads node-local files: give LOG paths or globs, without --follow/--docker/--kubectl/-"
            )
        raise typer.Exit(CLUSTER_TRIAGE.need()(ray, list(logs), list(catalogue or []), as_json, junit))
    try:
        _triage(logs, docker, kubectl, previous, catalogue, follow, as_json, junit)
    except KeyboardInterrupt:
        from vllm_medic.cli_common import stderr

        stderr.print("[yellow]interrupted[/] before anything was read; nothing to report", highlight=False)
        raise typer.Exit(130) from None


def _triage(
    logs: list[str] | None,
    docker: list[str] | None,
    kubectl: list[str] | None,
    previous: bool,
    catalogue: list[Path] | None,
    follow: bool,
    as_json: bool,
    junit: Path | None,
) -> None:
    from vllm_medic.triage.api import triage

    logs, kubectl = _join_selector(list(logs or []), list(kubectl or []))
    if follow:
        _follow(logs or [], docker or [], kubectl or [], catalogue or [], as_json)
        return
    from vllm_medic.progress import LiveLine, wanted

    live = LiveLine(wanted(as_json))
    watch = None
    if live.enabled:  # nothing at all is set up when the line would not be drawn
        from vllm_medic.triage.progress import ScanProgress

        watch = ScanProgress()
    with live.showing(watch.line if watch is not None else str):
        result = triage(
            logs or [],
            docker=docker or [],
            kubectl=kubectl or [],
            previous=previous,
            catalogue_paths=catalogue or [],
            watch=watch,
        )
    if junit is not None:
        from vllm_medic.report.junit import write_junit

        write_junit(junit, result.findings(), "vllm-medic.triage")
    code = 1 if result.found else 0
    if as_json:
        from vllm_medic.report.jsonout import dumps

        payload = result.to_dict()
        payload["findings"] = [f.to_dict() for f in result.findings()]
        payload["exit_code"] = code
        # Every string is scanned (findings' evidence quotes raw lines); key-name redaction would hide
        # the `signature` field.
        sys.stdout.write(dumps(payload, by_name=False) + "\n")
    else:
        from vllm_medic.cli_common import console
        from vllm_medic.triage.render import render

        render(result, console())
    if result.interrupted:
        raise typer.Exit(130)
    raise typer.Exit(code)


def _follow(
    logs: list[str], docker: list[str], kubectl: list[str], catalogue: list[Path], as_json: bool
) -> None:
    import json
    import threading

    from vllm_medic.errors import UsageError
    from vllm_medic.triage.api import Anomaly, follow

    if not logs and not docker and not kubectl:
        raise UsageError("--follow needs at least one log file, --docker or --kubectl")
    if "-" in logs:
        raise UsageError("--follow cannot read stdin; pipe into a file and follow that")
    seen_root = threading.Event()

    def show(a: Anomaly) -> None:
        if a.role in ("root", "generic"):
            seen_root.set()
        if as_json:
            sys.stdout.write(json.dumps(a.to_dict(), ensure_ascii=False) + "\n")
        else:
            sys.stdout.write(
                f"[{a.role}] {a.category} {a.signature} {a.source}:{a.line}: {a.text.strip()[:400]}\n"
            )
        sys.stdout.flush()

    stop = threading.Event()
    try:
        follow(logs, show, stop, docker=docker, kubectl=kubectl, catalogue_paths=catalogue)
    except KeyboardInterrupt:
        stop.set()
    raise typer.Exit(1 if seen_root.is_set() else 0)


def _join_selector(logs: list[str], kubectl: list[str]) -> tuple[list[str], list[str]]:
    """`--kubectl -l app=vllm` arrives as the value "-l" plus a stray positional: put them together."""
    joined: list[str] = []
    for value in kubectl:
        if value.strip() == "-l":
            if not logs:
                from vllm_medic.errors import UsageError

                raise UsageError("--kubectl -l needs a selector, e.g. --kubectl -l app=vllm")
            joined.append("-l " + logs.pop(0))
        else:
            joined.append(value)
    return logs, joined
