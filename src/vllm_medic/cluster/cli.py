"""The cluster's part of the command line: the multi-node forms of the stages' commands.

It adds no command of its own. The stages leave hooks (vllm_medic/hooks.py) where a command has a
multi-node form; this plugs the cluster's handlers into them, so `check`, `collect`, `triage` and
`accept` keep one set of options each while cluster stays the top floor: it imports the stages, they
never import it. The handlers import their modules when called, so startup stays light.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from vllm_medic.accept.options import AcceptOptions
    from vllm_medic.checks.cli import ClusterCheckRequest
    from vllm_medic.collect.api import CollectOptions, FanoutOptions


def register(app: typer.Typer) -> None:
    from vllm_medic.accept import cli as accept_cli
    from vllm_medic.checks import cli as checks_cli
    from vllm_medic.collect import cli as collect_cli
    from vllm_medic.triage import cli as triage_cli

    checks_cli.CLUSTER_CHECK.plug(_check_bundle)
    collect_cli.FANOUT.plug(_fanout)
    triage_cli.CLUSTER_TRIAGE.plug(_triage_ray)
    accept_cli.DISTRIBUTED.plug(_load_workers)


def _check_bundle(request: ClusterCheckRequest) -> int | None:
    from vllm_medic.cluster.multicheck import check_command

    return check_command(request)


def _fanout(
    fan: FanoutOptions, opts: CollectOptions, output: Path | None, as_json: bool, out: Console
) -> Path:
    from vllm_medic.cluster.collect_cmd import run_fanout

    return run_fanout(fan, opts, output, as_json, out)


def _triage_ray(
    address: str, logs: list[str], catalogue: list[Path], as_json: bool, junit: Path | None
) -> int:
    from vllm_medic.cluster.triage_cmd import triage_cluster

    return triage_cluster(address, logs, catalogue, as_json, junit)


def _load_workers(opts: AcceptOptions, model: str | None) -> Any:
    from vllm_medic.cluster.distload import for_accept

    return for_accept(opts, model)
