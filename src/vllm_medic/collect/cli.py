"""`vllm-medic collect`: the evidence bundle (live, or rebuilt from captured outputs with --from)."""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Protocol

import typer

from vllm_medic.cli_common import JsonOpt, stderr
from vllm_medic.hooks import Hook
from vllm_medic.model import ExitCode

if TYPE_CHECKING:
    from rich.console import Console

    from vllm_medic.collect.api import CollectOptions, FanoutOptions


class Fanout(Protocol):
    """`collect --ray/--hosts/--k8s`: one multi-node bundle for the cluster; its path."""

    def __call__(
        self, fan: FanoutOptions, opts: CollectOptions, output: Path | None, as_json: bool, out: Console
    ) -> Path: ...


#: plugged by the cluster package (cluster/cli.py)
FANOUT: Hook[Fanout] = Hook("multi-node collection (--ray/--hosts/--k8s)")


def register(app: typer.Typer) -> None:
    app.command(
        "collect",
        help="Gather the evidence bundle: raw outputs of nvidia-smi, topo, RDMA, modules, image, vLLM, "
        "Python packages, environment and launch, plus snapshot.json and manifest.json. "
        "With --from, rebuild the snapshot from captured outputs (a directory or a .tar.gz bundle).",
    )(collect_command)


def collect_command(
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Bundle directory, or FILE.tar.gz. Default: ./vllm-medic-bundle-HOST-TIME"
        ),
    ] = None,
    from_path: Annotated[
        Path | None,
        typer.Option(
            "--from", help="Rebuild from captured outputs: a directory of canonical files or a bundle."
        ),
    ] = None,
    image: Annotated[
        str | None, typer.Option("--image", help="Docker image to inspect, e.g. vllm/vllm-openai:kimi-k3.")
    ] = None,
    launch: Annotated[
        str | None,
        typer.Option(
            "--launch",
            help="The launch: 'vllm serve ...' text, a script / manifest file, or docker:CONTAINER.",
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Local model directory (reads its config.json).")
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Per-command timeout in seconds.")] = 10.0,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            help="Collect on every alive node of this Ray cluster (ADDRESS, or 'auto').",
            metavar="ADDRESS",
            rich_help_panel="Cluster",
        ),
    ] = None,
    hosts: Annotated[
        Path | None,
        typer.Option(
            "--hosts",
            help="Collect on every node of this file over SSH ([user@]host[:port] per line).",
            rich_help_panel="Cluster",
        ),
    ] = None,
    k8s: Annotated[
        str | None,
        typer.Option(
            "--k8s",
            help="Collect in every Running pod matching this label selector (kubectl exec).",
            metavar="SELECTOR",
            rich_help_panel="Cluster",
        ),
    ] = None,
    namespace: Annotated[str | None, typer.Option("--namespace", "-n", rich_help_panel="Cluster")] = None,
    container: Annotated[str | None, typer.Option("--container", "-c", rich_help_panel="Cluster")] = None,
    ssh_key: Annotated[str | None, typer.Option("--ssh-key", rich_help_panel="Cluster")] = None,
    ssh_user: Annotated[str | None, typer.Option("--ssh-user", rich_help_panel="Cluster")] = None,
    ssh_accept_new: Annotated[
        bool,
        typer.Option(
            "--ssh-accept-new", help="Trust host keys not yet in known_hosts.", rich_help_panel="Cluster"
        ),
    ] = False,
    remote_python: Annotated[
        str,
        typer.Option(
            "--remote-python",
            help="Interpreter that runs the probe program on SSH/k8s nodes.",
            rich_help_panel="Cluster",
        ),
    ] = "python3",
    as_json: JsonOpt = False,
) -> None:
    from vllm_medic.collect.api import CollectOptions, collect_here, load_captured, write_bundle
    from vllm_medic.collect.summary import print_summary
    from vllm_medic.report.jsonout import dumps

    if not timeout > 0 or timeout == float("inf"):  # `not >` also catches NaN
        stderr.print(f"[red]error:[/] --timeout must be a positive number, got {timeout:g}", highlight=False)
        raise typer.Exit(int(ExitCode.USAGE))
    from vllm_medic.collect.api import check_bundle_destination, check_launch_argument

    if output is not None:
        check_bundle_destination(output)  # before collecting: a bad -o costs nothing
    if launch and from_path is None:
        check_launch_argument(launch)
    from vllm_medic.collect.api import FanoutOptions

    fan = FanoutOptions(
        ray, hosts, k8s, namespace, container, ssh_key, ssh_user, ssh_accept_new, remote_python
    )
    if fan.requested:
        if from_path is not None:
            stderr.print("[red]error:[/] --from cannot be combined with --ray/--hosts/--k8s", highlight=False)
            raise typer.Exit(int(ExitCode.USAGE))
        from vllm_medic.cli_common import console

        FANOUT.need()(
            fan,
            CollectOptions(image=image, launch=launch, timeout_s=timeout, model_path=model),
            output,
            as_json,
            console(),
        )
        return
    if from_path is not None:
        if image or launch or model:
            stderr.print("[yellow]note:[/] --image/--launch/--model are ignored with --from", highlight=False)
        result = load_captured(from_path)
        dest = write_bundle(result, output) if output is not None else None
    else:
        result = collect_here(CollectOptions(image=image, launch=launch, timeout_s=timeout, model_path=model))
        dest = write_bundle(result, output or _default_bundle_dir(result.snapshot.node))
    if as_json:
        try:
            sys.stdout.write(dumps(result.snapshot.to_dict()) + "\n")
            sys.stdout.flush()
        except BrokenPipeError:  # `collect --json | head`: the reader left; the bundle is written
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print_summary(result, dest, stderr, brief=True)
    else:
        from vllm_medic.cli_common import console

        print_summary(result, dest, console(), brief=False)
    if result.interrupted:
        raise typer.Exit(int(ExitCode.INTERRUPTED))


def _default_bundle_dir(node: str | None) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    host = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in (node or "host"))
    return Path(f"vllm-medic-bundle-{host}-{stamp}")
