"""`vllm-medic health` (in-image probes, Xid, fabric, container limits) and `vllm-medic nccl-path`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from vllm_medic.cli_common import JsonOpt, JunitOpt, StrictOpt, VerboseOpt, console, emit_findings, stderr
from vllm_medic.errors import UsageError

if TYPE_CHECKING:
    from vllm_medic.snapshot import Snapshot
    from vllm_medic.snapshot_health import HealthFacts


def register(app: typer.Typer) -> None:
    app.command("health")(health_cmd)
    app.command("nccl-path")(nccl_path_cmd)


def health_cmd(
    from_dir: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="Read captured outputs (dmesg.txt, nvidia-smi-q.txt, shm.txt, in-image-…) "
            "from DIR instead of probing this machine.",
            metavar="DIR",
        ),
    ] = None,
    image: Annotated[
        str | None,
        typer.Option(
            "--image", help="Also probe inside IMAGE with `docker run --gpus all`.", metavar="IMAGE"
        ),
    ] = None,
    save: Annotated[
        Path | None,
        typer.Option(
            "--save", help="Write the raw outputs and health.json to DIR (redacted).", metavar="DIR"
        ),
    ] = None,
    tp: Annotated[
        int | None,
        typer.Option("--tp", help="Tensor-parallel size of the deployment (world size for limits)."),
    ] = None,
    pp: Annotated[int | None, typer.Option("--pp", help="Pipeline-parallel size of the deployment.")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per host command.")] = 20.0,
    image_timeout: Annotated[
        float, typer.Option("--image-timeout", help="Seconds per `docker run` probe.")
    ] = 180.0,
    as_json: JsonOpt = False,
    junit: JunitOpt = None,
    strict: StrictOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """GPU faults (Xid), NVLink fabric, container limits and the image's insides: what takes clusters down."""
    from vllm_medic.checks.health_judges import run_health_rules
    from vllm_medic.collect.health import probe
    from vllm_medic.snapshot import Snapshot

    _check_timeouts(timeout, image_timeout)
    snap, raw = Snapshot(), dict[str, str]()
    if from_dir is not None:
        snap, health = _read_captured(from_dir, snap)
    else:
        health, raw = _probe_here(image, timeout, image_timeout, save)
    if tp is not None:
        snap.launch.args["tensor_parallel_size"] = tp
    if pp is not None:
        snap.launch.args["pipeline_parallel_size"] = pp
    snap.health = health
    findings = run_health_rules(snap)
    if save is not None:
        probe.write_raw(raw, save)
        from vllm_medic.report.jsonout import dumps

        (save / "health.json").write_text(dumps(health.to_dict()) + "\n", "utf-8")
    code = emit_findings(
        findings,
        as_json=as_json,
        junit=junit,
        strict=strict,
        suite="vllm-medic.health",
        extra={"health": health.to_dict()},
        title="vllm-medic health",
        verbose=verbose,
    )
    raise typer.Exit(int(code))


def _check_timeouts(timeout: float, image_timeout: float) -> None:
    import math

    for flag, value in (("--timeout", timeout), ("--image-timeout", image_timeout)):
        if not (math.isfinite(value) and value > 0):
            raise UsageError(f"{flag} must be a positive number of seconds, got {value:g}")


def _read_captured(from_dir: Path, snap: Snapshot) -> tuple[Snapshot, HealthFacts]:
    """(the bundle's snapshot.json, else ``snap``; the health facts) from the outputs captured in DIR."""
    from vllm_medic.collect.health import probe
    from vllm_medic.safeio import loads_json
    from vllm_medic.snapshot import Snapshot

    if not from_dir.exists():
        raise UsageError(f"--from {from_dir}: no such directory or bundle")
    cut: list[str] = []
    try:
        files = probe.read_dir(from_dir, cut)
    except (OSError, EOFError) as exc:
        raise UsageError(f"--from {from_dir}: cannot read ({exc})") from exc
    for note in cut:
        stderr.print(f"note: {note}", highlight=False, markup=False)
    snap_text = files.pop("snapshot.json", None)
    if not files:
        raise UsageError(
            f"--from {from_dir}: none of the expected files ({', '.join(probe.CANONICAL_FILES[:6])}, …)"
        )
    if snap_text is not None:
        try:
            snap = Snapshot.from_dict(loads_json(snap_text))
        except (json.JSONDecodeError, AttributeError, TypeError) as exc:
            raise UsageError(f"{from_dir}: snapshot.json is not valid JSON ({exc})") from exc
    return snap, probe.from_files(files)


def _probe_here(
    image: str | None, timeout: float, image_timeout: float, save: Path | None
) -> tuple[HealthFacts, dict[str, str]]:
    """Probe this machine (and IMAGE); on Ctrl-C what was measured so far is still saved under --save."""
    from vllm_medic.collect.health import probe

    raw: dict[str, str] = {}
    try:
        return probe.collect_live(image=image, timeout=timeout, image_timeout=image_timeout, raw=raw)
    except KeyboardInterrupt:
        if save is not None and raw:
            probe.write_raw(raw, save)
            stderr.print(
                f"interrupted: {len(raw)} output(s) measured so far saved under {save}", highlight=False
            )
        raise


def nccl_path_cmd(
    logs: Annotated[
        list[Path],
        typer.Argument(help="Logs run with NCCL_DEBUG=INFO (files, directories, .gz); '-' for stdin."),
    ],
    from_bundle: Annotated[
        Path | None,
        typer.Option(
            "--from",
            help="A collect bundle (dir or .tar.gz) of one node: its RDMA ports (ibdev2netdev) "
            "tell whether sockets were used although RDMA exists.",
            metavar="BUNDLE",
        ),
    ] = None,
    as_json: JsonOpt = False,
    junit: JunitOpt = None,
    strict: StrictOpt = False,
    verbose: VerboseOpt = False,
) -> None:
    """The real NCCL path per rank: version, network, transports, interfaces, GPU Direct RDMA."""
    from vllm_medic.health.nccl_path import nccl_findings, parse_nccl_logs, table_rows

    sources = _read_log_sources(logs)
    rdma_hint = _rdma_ports_up(from_bundle) if from_bundle is not None else []
    parsed = parse_nccl_logs(sources)
    findings = nccl_findings(parsed, rdma_hint)
    rows = table_rows(parsed["ranks"])
    if not as_json and rows:
        _print_rank_table(rows)
    code = emit_findings(
        findings,
        as_json=as_json,
        junit=junit,
        strict=strict,
        suite="vllm-medic.nccl-path",
        extra={
            "ranks": [r.to_dict() for r in parsed["ranks"]],
            "table": rows,
            "unattributed_versions": parsed["unattributed_versions"],
            "vllm_nccl": parsed["vllm_nccl"],
        },
        title="NCCL path",
        verbose=verbose,
    )
    raise typer.Exit(int(code))


def _read_log_sources(logs: list[Path]) -> list[tuple[str, str]]:
    """(name, text) of each log; '-' reads stdin; a missing path is a usage error."""
    from vllm_medic.health.nccl_path import read_logs

    sources: list[tuple[str, str]] = []
    paths = []
    for p in logs:
        if str(p) == "-":
            sources.append(("<stdin>", sys.stdin.read()))
        elif not p.exists():
            raise UsageError(f"{p}: no such file or directory")
        else:
            paths.append(p)
    try:
        sources.extend(read_logs(paths))
    except OSError as exc:
        raise UsageError(f"cannot read logs: {exc}") from exc
    return sources


def _rdma_ports_up(bundle: Path) -> list[str]:
    """The bundle's RDMA ports that are up (ibdev2netdev): NCCL on sockets beside them is a failure."""
    from vllm_medic.collect.api import load_captured

    snap = load_captured(bundle).snapshot  # UsageError (exit 2) when it is not a bundle
    return [
        f"{p.ib_dev}:{p.port or 1}" + (f" ({p.netdev}, {p.state})" if p.netdev else "")
        for p in snap.rdma
        if (p.state or "Up").lower() == "up"
    ]


_RANK_COLUMNS = ("rank", "host", "pid", "dev", "nccl", "network", "transports", "interfaces", "gdr")


def _print_rank_table(rows: list[dict[str, str]]) -> None:
    from rich.table import Table

    t = Table(title="NCCL communication path per rank", show_lines=False)
    for col in _RANK_COLUMNS:
        t.add_column(col, overflow="fold")
    for r in rows:
        t.add_row(*(r[c] for c in _RANK_COLUMNS))
    console().print(t)
