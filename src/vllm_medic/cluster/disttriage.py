"""Triage across nodes: scan each node's logs where they lie, then name the earliest root cluster-wide.

One Ray task per alive node runs the ordinary ``triage()`` over that node's files (globs and
``$VARS`` expanded on the node, so one command line serves every node). Each node's verdict comes
back with the node's clock offset (NTP-style, from the shortest of a few round trips); timestamps
are corrected by it before comparing, so a node whose clock runs behind cannot make its later
cascade look earlier than another node's root cause.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

_FORMATS = ("%m-%d %H:%M:%S.%f", "%m-%d %H:%M:%S")


def parse_timestamp(text: str | None) -> datetime | None:
    """Triage's timestamp strings: ISO-8601 with a year, or vLLM's ``MM-DD HH:MM:SS`` (no year)."""
    if not text:
        return None
    try:
        ts = datetime.fromisoformat(text)
        return ts.replace(tzinfo=None) - (ts.utcoffset() or timedelta(0)) if ts.tzinfo else ts
    except ValueError:
        pass
    for fmt in _FORMATS:
        try:
            return datetime.strptime(f"2000-{text}", f"%Y-{fmt}")
        except ValueError:
            continue
    return None


def corrected(ts: datetime | None, offset_s: float | None) -> datetime | None:
    """A node's timestamp on the caller's clock (offset = node clock minus ours)."""
    if ts is None:
        return None
    return ts - timedelta(seconds=offset_s or 0.0)


def merge(nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Cluster verdict from per-node results ``{node: {"result": triage --json dict | None,
    "error": str | None, "clock_offset_s": float | None}}``.

    The root is the node root with the earliest corrected timestamp; roots without a timestamp only
    win when no node has one (then the highest confidence). Every other node's root is listed as a
    later anomaly (usually the cascade of the first)."""
    candidates = []
    for node, entry in sorted(nodes.items()):
        result = entry.get("result") or {}
        root = result.get("root_cause")
        if not root:
            continue
        ts = corrected(parse_timestamp(root.get("timestamp")), entry.get("clock_offset_s"))
        candidates.append((node, root, ts))
    timed = [(node, root, ts) for node, root, ts in candidates if ts is not None]
    winner: tuple[str, Any, datetime | None] | None
    if timed:
        winner = min(timed, key=lambda c: c[2])
    elif candidates:
        winner = max(candidates, key=lambda c: float(c[1].get("confidence") or 0.0))
    else:
        winner = None
    root_cause = None
    fix: list[str] = []
    docs: list[str] = []
    cascade: list[dict[str, Any]] = []
    if winner is not None:
        node, root, ts = winner
        root_cause = dict(root, node=node, corrected_timestamp=ts.isoformat() if ts else None)
        winner_result = nodes[node].get("result") or {}
        fix = list(winner_result.get("fix") or [])
        docs = list(winner_result.get("docs") or [])
        cascade = [dict(c, node=node) for c in winner_result.get("cascade") or []]
        for other, oroot, ots in candidates:
            if other == node:
                continue
            cascade.append(
                {
                    "node": other,
                    "signature": oroot.get("signature"),
                    "category": oroot.get("category"),
                    "count": 1,
                    "first": {
                        "source": oroot.get("source"),
                        "line": oroot.get("line"),
                        "text": oroot.get("text"),
                        "timestamp": oroot.get("timestamp"),
                        "corrected_timestamp": ots.isoformat() if ots else None,
                    },
                    "note": "this node's own first anomaly, after the cluster-wide root",
                }
            )
    return {
        "root_cause": root_cause,
        "cascade": cascade,
        "fix": fix,
        "docs": docs,
        "nodes": [
            {
                "node": node,
                "clock_offset_s": entry.get("clock_offset_s"),
                "error": entry.get("error"),
                "root_cause": ((entry.get("result") or {}).get("root_cause") or {}).get("signature"),
                "sources": len((entry.get("result") or {}).get("sources") or []),
                "warnings": (entry.get("result") or {}).get("warnings") or [],
            }
            for node, entry in sorted(nodes.items())
        ],
    }


def _triage_on_node(inputs: list[str], catalogue_texts: dict[str, str]) -> dict[str, Any]:
    """Runs on the node: expand paths there, triage, ship the verdict back as plain data."""
    import glob
    import tempfile

    from vllm_medic.errors import MedicError
    from vllm_medic.triage.api import triage

    expanded: list[str] = []
    for raw in inputs:
        pattern = os.path.expanduser(os.path.expandvars(raw))
        matches = sorted(glob.glob(pattern)) if any(ch in pattern for ch in "*?[") else [pattern]
        expanded.extend(m for m in matches if os.path.exists(m))
    if not expanded:
        return {"result": None, "error": f"no log files on this node match {', '.join(inputs)}"}
    with tempfile.TemporaryDirectory(prefix="vllm-medic-cat-") as tmp:
        cats = []
        for name, text in catalogue_texts.items():
            p = Path(tmp) / Path(name).name
            p.write_text(text, encoding="utf-8")
            cats.append(p)
        try:
            return {"result": triage(expanded, catalogue_paths=cats).to_dict(), "error": None}
        except MedicError as exc:
            return {"result": None, "error": str(exc)}


def triage_ray(
    address: str | None, inputs: list[str], catalogue_paths: Sequence[Path] = (), *, ship_package: bool = True
) -> dict[str, Any]:
    from vllm_medic.cluster.fanout import _ray_clock_offset, _ray_node_names

    catalogue_texts = {}
    from vllm_medic.safeio import read_arg_text

    for p in catalogue_paths:
        catalogue_texts[str(p)] = read_arg_text(p, "catalogue")
    from vllm_medic.cluster.raysession import connect

    ray = connect(address, what="triage --ray", ship_package=ship_package)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    try:
        alive = [n for n in ray.nodes() if n.get("Alive")]
        names = _ray_node_names(alive)
        task = ray.remote(num_cpus=0, max_retries=0)(_triage_on_node)
        refs = {
            n["NodeID"]: task.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
            ).remote(list(inputs), catalogue_texts)
            for n in alive
        }
        per_node: dict[str, dict[str, Any]] = {}
        for node_id, ref in refs.items():
            try:
                entry = ray.get(ref, timeout=600)
            except Exception as exc:  # noqa: BLE001 - one node failing is reported, not fatal
                entry = {"result": None, "error": f"{type(exc).__name__}: {str(exc)[-300:]}"}
            entry["clock_offset_s"] = _ray_clock_offset(ray, node_id)
            per_node[names[node_id]] = entry
    finally:
        ray.shutdown()
    merged = merge(per_node)
    merged["per_node"] = {k: v.get("result") for k, v in per_node.items()}
    return merged
