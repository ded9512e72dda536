"""Where `check` and `doctor` get their snapshot from: a bundle, a snapshot file, or a live collection.

Imports of the collect package stay inside functions so `vllm-medic --help` stays fast.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_medic.errors import ToolError, UsageError
from vllm_medic.snapshot import Snapshot

if TYPE_CHECKING:
    from vllm_medic.collect.source_entry import SourceEntry


@dataclass
class Evidence:
    snapshot: Snapshot
    origin: str  # "bundle DIR", "snapshot FILE", "live"
    raw: dict[str, bytes] = field(default_factory=dict)
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def sources(self) -> dict[str, SourceEntry]:
        from vllm_medic.collect.source_entry import entries_by_name

        return entries_by_name(self.manifest.get("sources"))


def from_snapshot_file(path: Path) -> Evidence:
    from vllm_medic.safeio import loads_json, read_arg_text

    if not path.exists():
        raise UsageError(f"--snapshot {path}: no such file")
    try:
        data = loads_json(read_arg_text(path, "--snapshot"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UsageError(f"--snapshot {path}: not a readable snapshot.json: {exc}") from exc
    if not isinstance(data, dict):
        raise UsageError(f"--snapshot {path}: top level is not a JSON object")
    return Evidence(Snapshot.from_dict(data), f"snapshot {path}")


def from_bundle(path: Path) -> Evidence:
    if not path.exists():
        raise UsageError(f"--from {path}: no such file or directory")
    try:
        from vllm_medic.collect.api import load_captured
    except ImportError as exc:  # pragma: no cover - only while the collect stage is missing
        raise ToolError(f"cannot read bundles: the collect stage is not installed ({exc})") from exc
    result = load_captured(path)
    return Evidence(result.snapshot, f"bundle {path}", dict(result.raw), dict(result.manifest))


def live(image: str | None, launch: str | None, timeout_s: float, model_path: str | None) -> Evidence:
    try:
        from vllm_medic.collect.api import CollectOptions, collect_here
    except ImportError as exc:  # pragma: no cover - only while the collect stage is missing
        raise ToolError(f"cannot collect: the collect stage is not installed ({exc})") from exc
    result = collect_here(
        CollectOptions(image=image, launch=launch, timeout_s=timeout_s, model_path=model_path)
    )
    return Evidence(result.snapshot, "live (collected here)", dict(result.raw), dict(result.manifest))


def apply_launch(snapshot: Snapshot, launch_text: str) -> None:
    """--launch TEXT|FILE overrides the snapshot's launch."""
    from vllm_medic.collect.api import check_launch_argument
    from vllm_medic.collect.launch import parse_launch

    check_launch_argument(launch_text)  # a FIFO, a directory or a missing file: exit 2 saying so
    p = Path(launch_text).expanduser()
    text = launch_text
    source = "argv"
    if "\n" not in launch_text and len(launch_text) < 4096 and p.is_file():
        from vllm_medic.safeio import read_arg_text

        text = read_arg_text(p, "--launch")
        source = "file"
    launch = parse_launch(text, source=source)
    if not launch.argv and not launch.args:
        raise UsageError(
            f"--launch: no vLLM command found in {launch_text[:80]!r} ({'; '.join(launch.warnings)})"
        )
    snapshot.launch = launch
