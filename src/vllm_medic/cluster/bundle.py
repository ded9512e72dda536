"""The multi-node bundle: one ordinary bundle per node under ``nodes/<node>/`` plus ``cluster.json``.

``cluster.json`` lists every node (transport, address, whether collection worked and why not, its
clock offset) and the cross-node consistency table, so `check` on the bundle can judge both each node
and the cluster as a whole.
"""

from __future__ import annotations

import json
import os
import re
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from vllm_medic import __version__
from vllm_medic.cluster.consistency import ConsistencyReport, compare
from vllm_medic.cluster.fanout import NodeCollection
from vllm_medic.collect.api import (
    MAX_BUNDLE_BYTES,
    MAX_CAPTURED_FILE_BYTES,
    CollectResult,
    load_captured,
    tar_members,
    write_bundle,
)
from vllm_medic.errors import ToolError, UsageError

CLUSTER_FILE = "cluster.json"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "node"


def cluster_summary(collections: list[NodeCollection]) -> tuple[dict[str, Any], ConsistencyReport]:
    report = compare({c.node: c.result.snapshot for c in collections if c.result is not None})
    summary = {
        "kind": "multi-node",
        "tool_version": __version__,
        "nodes": [
            {
                "node": c.node,
                "dir": f"nodes/{_safe(c.node)}",
                "transport": c.transport,
                "address": c.address,
                "status": "ok" if c.ok else "failed",
                "error": c.error,
                "duration_s": c.duration_s,
                "clock_offset_s": c.clock_offset_s,
                **({"details": c.details} if c.details else {}),
            }
            for c in collections
        ],
        "consistency": report.to_dict(),
    }
    return summary, report


def write_multinode_bundle(collections: list[NodeCollection], dest: Path) -> Path:
    dest = Path(dest)
    summary, _ = cluster_summary(collections)
    if dest.name.endswith((".tar.gz", ".tgz")):
        with tempfile.TemporaryDirectory(prefix="vllm-medic-cluster-") as tmp:
            staged = _write_dir(collections, summary, Path(tmp) / "bundle")
            top = dest.name.removesuffix(".tar.gz").removesuffix(".tgz")
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
                fd, partial = tempfile.mkstemp(prefix=".vllm-medic-", suffix=".tar.gz", dir=dest.parent)
                os.close(fd)
                with tarfile.open(partial, "w:gz") as tar:
                    tar.add(staged, arcname=top)
                os.replace(partial, dest)
            except OSError as exc:
                raise ToolError(f"cannot write the bundle to {dest}: {exc.strerror or exc}") from None
        return dest
    return _write_dir(collections, summary, dest)


def _write_dir(collections: list[NodeCollection], summary: dict[str, Any], dest: Path) -> Path:
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for c, entry in zip(collections, summary["nodes"], strict=True):
            if c.result is not None:
                write_bundle(c.result, dest / entry["dir"])
        (dest / CLUSTER_FILE).write_text(json.dumps(summary, indent=2, default=str) + "\n", encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"cannot write the bundle to {dest}: {exc.strerror or exc}") from None
    return dest


def is_multinode(path: Path) -> bool:
    path = Path(path)
    if path.is_dir():
        return (path / CLUSTER_FILE).is_file() or any(p.is_file() for p in path.glob(f"*/{CLUSTER_FILE}"))
    try:
        if path.is_file() and tarfile.is_tarfile(path):
            with tarfile.open(path, "r:*") as tar:
                return any(os.path.basename(m.name) == CLUSTER_FILE for m in tar_members(tar, path, []))
    except (tarfile.TarError, OSError, EOFError):
        # Truncated or unreadable: not recognisably multi-node; the single-node reader then names the
        # problem. (An EOFError escaping to Click would print 'Aborted!' and exit 1, like a Ctrl-C.)
        return False
    return False


def _extract_capped(path: Path, dest: Path, cut: list[str]) -> None:
    """Regular files and directories only (tarfile's ``data`` filter refuses links out, absolute names
    and devices), at most MAX_TAR_MEMBERS members, 64 MiB each and 512 MiB in all; what is left out is
    noted in ``cut``."""
    total = 0
    with tarfile.open(path, "r:*") as tar:
        for member in tar_members(tar, path, cut):
            if not (member.isfile() or member.isdir()):
                continue
            if member.size > MAX_CAPTURED_FILE_BYTES:
                cut.append(f"{member.name}: {member.size / 2**20:.0f} MiB, over the cap per file: not read")
                continue
            total += member.size
            if total > MAX_BUNDLE_BYTES:
                raise UsageError(
                    f"{path}: more than {MAX_BUNDLE_BYTES // 2**20} MiB of files; not a vllm-medic bundle?"
                )
            tar.extract(member, dest, filter="data")


def load_multinode(path: Path) -> tuple[dict[str, Any], dict[str, CollectResult]]:
    """Read a multi-node bundle (directory or .tar.gz): the summary and each node's collection."""
    path = Path(path)
    if path.is_file():
        with tempfile.TemporaryDirectory(prefix="vllm-medic-cluster-") as tmp:
            cut: list[str] = []
            try:
                _extract_capped(path, Path(tmp), cut)
            except (tarfile.TarError, OSError, EOFError) as exc:
                raise UsageError(f"cannot read {path}: {exc}") from None
            summary, nodes = load_multinode(Path(tmp))
            for result in nodes.values():
                result.manifest.setdefault("cut", []).extend(cut)
            return summary, nodes
    root = path if (path / CLUSTER_FILE).is_file() else next(p.parent for p in path.glob(f"*/{CLUSTER_FILE}"))
    from vllm_medic.safeio import loads_json, read_text

    try:
        summary = loads_json(read_text(root / CLUSTER_FILE, MAX_CAPTURED_FILE_BYTES, CLUSTER_FILE))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"cannot read {root / CLUSTER_FILE}: {exc}") from None
    if not isinstance(summary, dict):
        raise UsageError(
            f"{root / CLUSTER_FILE}: expected a JSON object with 'nodes', got {type(summary).__name__}"
        )
    nodes = {}
    entries = summary.get("nodes")
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise UsageError(f"{root / CLUSTER_FILE}: 'nodes' must be a list of objects (one per node)")
    from vllm_medic.safeio import inside, kind_of

    for entry in entries:
        if entry.get("status") != "ok":
            continue
        node_dir = inside(root, str(entry.get("dir") or ""))
        if node_dir is None:
            raise UsageError(
                f"{root / CLUSTER_FILE}: node {entry.get('node')!r} has dir {entry.get('dir')!r}, which is not "
                "inside the bundle: refused (a bundle names its node directories relative to itself)"
            )
        if kind_of(root / str(entry["dir"])) == "a directory":
            result = load_captured(node_dir)
            result.snapshot.node = str(entry.get("node"))
            nodes[str(entry.get("node"))] = result
    return summary, nodes
