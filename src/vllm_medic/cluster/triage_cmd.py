"""`triage --ray ADDRESS LOG...`: the cluster-wide verdict, printed or as JSON."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.markup import escape

from vllm_medic.model import Category, Finding, Severity


def cluster_findings(merged: dict) -> list[Finding]:
    root = merged.get("root_cause")
    if not root:
        return []
    cat = root.get("category") if root.get("category") in {c.value for c in Category} else "other"
    return [
        Finding(
            id=f"TRI-{root.get('signature') or 'GENERIC'}",
            severity=Severity.FAIL,
            category=Category(cat),
            title=f"first anomaly cluster-wide on {root.get('node')}: {root.get('title') or root.get('signature')}",
            evidence=[f"{root.get('node')}:{root.get('source')}:{root.get('line')}: {root.get('text')}"]
            + [
                f"{c.get('node')}: later: {(c.get('first') or {}).get('text')}"
                for c in merged.get("cascade") or []
            ][:10],
            fix=list(merged.get("fix") or []),
            docs=list(merged.get("docs") or []),
        )
    ]


def triage_cluster(
    address: str, logs: list[str], catalogue: list[Path], as_json: bool, junit: Path | None
) -> int:
    from vllm_medic.cluster.disttriage import triage_ray

    merged = triage_ray(None if address == "auto" else address, logs, catalogue)
    findings = cluster_findings(merged)
    if junit is not None:
        from vllm_medic.report.junit import write_junit

        write_junit(junit, findings, "vllm-medic.triage")
    code = 1 if merged.get("root_cause") else 0
    if as_json:
        from vllm_medic.report.jsonout import dumps

        merged["findings"] = [f.to_dict() for f in findings]
        merged["exit_code"] = code
        sys.stdout.write(dumps(merged, redact=False) + "\n")  # texts were redacted on the nodes
        return code
    from vllm_medic.cli_common import console

    out = console()
    for n in merged.get("nodes") or []:
        off = n.get("clock_offset_s")
        state = n.get("error") or (
            f"first anomaly: {n.get('root_cause')}" if n.get("root_cause") else "nothing found"
        )
        out.print(
            f"• {escape(str(n.get('node')))} (clock offset {off:+.3f} s): {escape(str(state))}"
            if off is not None
            else f"• {escape(str(n.get('node')))}: {escape(str(state))}",
            highlight=False,
        )
    root = merged.get("root_cause")
    if not root:
        out.print("\n[green]No root cause found on any node.[/]")
        return code
    out.print(
        f"\n[red][✗][/] [bold]Root cause ({escape(str(root.get('category')))}), on {escape(str(root.get('node')))}[/] "
        f"{escape(str(root.get('source')))}:{root.get('line')} at {escape(str(root.get('timestamp')))}",
        highlight=False,
    )
    out.print(f"    {escape(str(root.get('text')))}", highlight=False)
    for c in merged.get("cascade") or []:
        first = c.get("first") or {}
        out.print(
            f"    then on {escape(str(c.get('node')))}: {escape(str(first.get('text')))[:200]}",
            highlight=False,
        )
    for i, step in enumerate(merged.get("fix") or [], 1):
        out.print(f"    [bold]{i}.[/] {escape(str(step))}", highlight=False)
    return code
