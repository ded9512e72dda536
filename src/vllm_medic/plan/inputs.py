"""Read a model's config and weight size from disk (the only I/O the planner does besides recipes)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_medic.errors import UsageError


@dataclass(frozen=True)
class ModelFiles:
    config: dict[str, Any]
    config_path: Path
    weight_bytes: int | None
    weight_basis: str


def _read_json(path: Path) -> Any:
    from vllm_medic.safeio import loads_json, read_arg_text

    try:
        return loads_json(read_arg_text(path, "file"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path} is not valid JSON: {exc}") from exc


def read_model(path_str: str) -> ModelFiles:
    """``path`` is a ``config.json`` or a model directory (config.json + safetensors index or shards)."""
    path = Path(path_str)
    if not path.exists():
        raise UsageError(f"--config {path}: no such file or directory")
    directory = path if path.is_dir() else path.parent
    config_path = path / "config.json" if path.is_dir() else path
    from vllm_medic.safeio import kind_of

    kind = kind_of(config_path.resolve())
    if kind not in (None, "missing"):  # a FIFO would block the read; named, at once
        raise UsageError(f"--config {config_path} is {kind}, not a regular file: refused")
    if not config_path.is_file():
        raise UsageError(f"{directory} has no config.json")
    config = _read_json(config_path)
    if not isinstance(config, dict):
        raise UsageError(f"{config_path} is not a JSON object")
    weight_bytes: int | None = None
    basis = ""
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        data = _read_json(index)
        total = (data.get("metadata") or {}).get("total_size") if isinstance(data, dict) else None
        if isinstance(total, int | float) and total > 0:
            weight_bytes = int(total)
            basis = f"{index} metadata.total_size = {weight_bytes:,} bytes"
    if weight_bytes is None:
        shards = sorted(directory.glob("*.safetensors"))
        if shards:
            weight_bytes = sum(p.stat().st_size for p in shards)
            basis = f"sum of {len(shards)} .safetensors file(s) in {directory} = {weight_bytes:,} bytes"
    return ModelFiles(config=config, config_path=config_path, weight_bytes=weight_bytes, weight_basis=basis)
