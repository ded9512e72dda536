"""`collect --ray ADDRESS | --hosts FILE | --k8s SELECTOR`: one multi-node bundle for the cluster."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from vllm_medic.collect.api import CollectOptions, FanoutOptions
from vllm_medic.errors import UsageError


def run_fanout(
    fan: FanoutOptions, opts: CollectOptions, output: Path | None, as_json: bool, out: Console
) -> Path:
    from vllm_medic.cluster.bundle import cluster_summary, write_multinode_bundle
    from vllm_medic.cluster.multicheck import render_table
    from vllm_medic.report.jsonout import dumps

    chosen = [name for name, v in (("--ray", fan.ray), ("--hosts", fan.hosts), ("--k8s", fan.k8s)) if v]
    if len(chosen) > 1:
        raise UsageError(f"choose one transport, not {' and '.join(chosen)}")
    collections = _collect_with_progress(fan, opts, as_json)
    if not collections:
        raise UsageError("the cluster reported no alive nodes")
    dest = output or Path(f"vllm-medic-cluster-{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}")
    dest = write_multinode_bundle(collections, dest)
    summary, _report = cluster_summary(collections)
    ok = sum(1 for e in summary["nodes"] if e["status"] == "ok")
    if as_json:
        sys.stdout.write(dumps(summary) + "\n")
        _fail_if_none_collected(ok, summary, dest)
        return dest
    for entry in summary["nodes"]:
        status = "[green][✓][/]" if entry["status"] == "ok" else "[red][✗][/]"
        detail = f"{entry['duration_s']:.1f} s" + (
            f", clock offset {entry['clock_offset_s']:+.3f} s"
            if entry.get("clock_offset_s") is not None
            else ""
        )
        out.print(f"{status} {escape(entry['node'])} via {entry['transport']} ({detail})", highlight=False)
        if entry.get("error"):
            out.print(f"    {escape(str(entry['error']))}", highlight=False)
    render_table(out, summary["consistency"] | {"nodes": summary["nodes"]})
    out.print(
        f"\nMulti-node bundle: {escape(str(dest))} ({ok}/{len(summary['nodes'])} nodes collected). "
        f"Next: vllm-medic check --from {escape(str(dest))} --recipe RECIPE",
        highlight=False,
    )
    _fail_if_none_collected(ok, summary, dest)
    return dest


def _collect_with_progress(fan: FanoutOptions, opts: CollectOptions, as_json: bool) -> list[Any]:
    """The chosen transport's collection, with the nodes answered / planned and failures so far drawn
    live on a terminal (quiet in pipes, CI and --json: vllm_medic.progress)."""
    from vllm_medic.cluster import fanout as fanout_mod
    from vllm_medic.progress import LiveLine, wanted

    tally = fanout_mod.Tally()
    transport = "ray" if fan.ray else ("ssh" if fan.hosts else "kubectl")
    t0 = time.monotonic()
    with LiveLine(wanted(as_json)).showing(
        lambda: fanout_mod.progress_line(transport, tally, time.monotonic() - t0)
    ):
        if fan.ray:
            return fanout_mod.collect_ray(None if fan.ray == "auto" else fan.ray, opts, tally=tally)
        if fan.hosts:
            return fanout_mod.collect_ssh(
                fanout_mod.parse_hosts_file(fan.hosts),
                opts,
                key_filename=fan.ssh_key,
                user=fan.ssh_user,
                accept_new_host_keys=fan.ssh_accept_new,
                tally=tally,
            )
        return fanout_mod.collect_k8s(
            str(fan.k8s),
            opts,
            namespace=fan.namespace,
            container=fan.container,
            remote_python=fan.remote_python,
            tally=tally,
        )


def _fail_if_none_collected(ok: int, summary: dict, dest: Path) -> None:
    """Not one node answered: the bundle (with each node's error) is written, but the tool did not work."""
    if ok == 0:
        from vllm_medic.errors import ToolError

        first = next((e.get("error") for e in summary["nodes"] if e.get("error")), None)
        raise ToolError(
            f"no node could be collected (0/{len(summary['nodes'])}); first error: {first or 'unknown'}. "
            f"The bundle {dest} records each node's error."
        )
