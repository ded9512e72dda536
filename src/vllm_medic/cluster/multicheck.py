"""`check` on a multi-node bundle: every node's own verdicts, folded, plus the cross-node rules.

A finding raised identically on several nodes is reported once with the nodes named; the
consistency findings (``CLU...``) and the table of what differs by node come from
``cluster.consistency``; a node whose collection failed is a finding of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from vllm_medic.cluster.bundle import load_multinode
from vllm_medic.cluster.consistency import compare
from vllm_medic.model import Category, Finding, Severity

if TYPE_CHECKING:
    from vllm_medic.checks.cli import ClusterCheckRequest


def fold(per_node: dict[str, list[Finding]]) -> list[Finding]:
    """Merge identical findings across nodes; evidence is prefixed by the node it came from."""
    folded: dict[tuple[str, str, str], tuple[Finding, list[str]]] = {}
    for node, findings in sorted(per_node.items()):
        for f in findings:
            key = (f.id, f.severity.value, f.title)
            if key not in folded:
                folded[key] = (
                    Finding(f.id, f.severity, f.category, f.title, [], list(f.fix), list(f.docs)),
                    [],
                )
            merged, nodes = folded[key]
            nodes.append(node)
            for e in f.evidence:
                line = f"[{node}] {e}"
                if line not in merged.evidence:
                    merged.evidence.append(line)
    out = []
    total = len(per_node)
    for merged, nodes in folded.values():
        where = "every node" if len(nodes) == total and total > 1 else ", ".join(nodes)
        merged.evidence.insert(0, f"on {where}")
        out.append(merged)
    return out


def check_multinode(
    path: Path,
    recipe: Any,
    *,
    model_config: dict | None = None,
    strategy: str | None = None,
    hardware: str | None = None,
) -> tuple[list[Finding], dict[str, Any]]:
    from vllm_medic.checks.api import run_checks
    from vllm_medic.checks.inputs import Evidence

    summary, nodes = load_multinode(path)
    per_node: dict[str, list[Finding]] = {}
    for node, result in nodes.items():
        ev = Evidence(result.snapshot, f"node {node}", dict(result.raw), dict(result.manifest))
        per_node[node] = run_checks(
            ev.snapshot,
            recipe,
            model_config=model_config,
            strategy=strategy,
            hardware=hardware,
            raw=ev.raw,
            sources=ev.sources,
        )
    findings = fold(per_node)
    report = compare({n: r.snapshot for n, r in nodes.items()})
    findings.extend(report.findings)
    failed = [n for n in summary.get("nodes") or [] if n.get("status") != "ok"]
    if failed:
        findings.append(
            Finding(
                id="CLU000",
                severity=Severity.FAIL,
                category=Category.OTHER,
                title=f"{len(failed)} node(s) could not be collected",
                evidence=[f"{n.get('node')}: {n.get('error')}" for n in failed],
                fix=[
                    "Reach the node by hand (ssh / kubectl exec / ray status) and collect there: `vllm-medic collect -o NODE.tar.gz`",
                    "A node that does not answer may be the fault itself: check its health before the others",
                ],
            )
        )
    cluster = {
        "nodes": summary.get("nodes") or [],
        "rows": report.rows,
    }
    return findings, cluster


def render_table(console: Console, cluster: dict[str, Any], all_rows: bool = False) -> None:
    rows = [r for r in cluster.get("rows") or [] if all_rows or r.get("differs")]
    nodes = [str(n.get("node")) for n in cluster.get("nodes") or [] if n.get("status") == "ok"]
    if not rows:
        console.print(f"[green]Every compared fact is the same on all {len(nodes)} nodes.[/]")
        return
    table = Table(title="What differs between nodes", show_lines=False)
    table.add_column("fact")
    for n in nodes:
        table.add_column(escape(n))
    for r in rows:
        values = r.get("values") or {}
        table.add_row(escape(str(r.get("fact"))), *(escape(str(values.get(n, ""))) for n in nodes))
    console.print(table)


def check_command(request: ClusterCheckRequest) -> int | None:
    """`check --from` on a multi-node bundle (None when ``request.path`` is not one): each node's verdicts
    folded, plus what differs between nodes."""
    from vllm_medic.checks.api import severity_counts
    from vllm_medic.cli_common import console, emit_findings
    from vllm_medic.cluster.bundle import is_multinode

    path, rec = request.path, request.recipe
    if not is_multinode(path):
        return None
    findings, cluster = check_multinode(
        path, rec, model_config=request.model_config, strategy=request.strategy, hardware=request.hardware
    )
    if not request.as_json:
        render_table(console(), cluster)
    code = emit_findings(
        findings,
        as_json=request.as_json,
        junit=request.junit,
        strict=request.strict,
        suite="vllm-medic.check",
        extra={
            "recipe": rec.summary(),
            "evidence_from": f"multi-node bundle {path}",
            "cluster": cluster,
            "counts": severity_counts(findings),
        },
        title=f"vllm-medic check — recipe {rec.name} ({rec.source}); evidence: multi-node bundle {path}",
        verbose=request.verbose,
    )
    return int(code)
