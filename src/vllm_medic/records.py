"""Tolerant conversion between JSON-shaped data and the snapshot's dataclasses.

``build(tp, data)`` reconstructs a dataclass tree from what ``json.loads`` gave: unknown keys are
ignored and wrong shapes fall back to defaults, so an old or hand-edited ``snapshot.json`` still
loads. Two field metadata keys let a record keep the JSON shape its producers always wrote:
``key`` (the JSON name when it is not a Python identifier, e.g. ``"nvidia-smi"``) and ``omit``
(leave the key out while the value is None: "not measured" is an absent key, not a null).
A dataclass may define ``build_from(data)`` and ``to_dict()`` for a shape these two cannot say.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

#: field metadata: the key is left out of the JSON while the value is None
OMIT: dict[str, Any] = {"omit": True}


def key(name: str, omit: bool = False) -> dict[str, Any]:
    """Field metadata naming the JSON key (``field(metadata=key("nvidia-smi"))``)."""
    return {"key": name, "omit": omit}


def json_key(f: dataclasses.Field[Any]) -> str:
    return str(f.metadata.get("key", f.name))


def to_plain(value: Any) -> Any:
    """A dataclass tree as JSON-shaped data, honouring ``key`` / ``omit`` and a record's own ``to_dict``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "to_dict", None)
        if callable(own):
            return own()
        return fields_to_dict(value)
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    return value


def fields_to_dict(record: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        v = getattr(record, f.name)
        if v is None and f.metadata.get("omit"):
            continue
        out[json_key(f)] = to_plain(v)
    return out


def build(tp: Any, data: Any) -> Any:
    """Tolerant reconstruction: unknown keys are ignored, wrong shapes fall back to defaults."""
    if data is None:
        return None
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _build_record(tp, data)
    if origin in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        for a in args:
            try:
                built = build(a, data)
            except (TypeError, ValueError):
                continue
            if built is not None:
                return built
        return None
    if origin is list:
        (inner,) = typing.get_args(tp) or (Any,)
        if not isinstance(data, list):
            return []
        out = [build(inner, x) for x in data]
        return [x for x in out if x is not None]
    if origin is dict:
        _k, v = typing.get_args(tp) or (Any, Any)
        if not isinstance(data, dict):
            return {}
        built = {str(k): build(v, x) for k, x in data.items()}
        return built if _optional(v) else {k: x for k, x in built.items() if x is not None}
    return _build_scalar(tp, data)


def _build_record(tp: type, data: Any) -> Any:
    if not isinstance(data, dict):
        return tp() if all_defaults(tp) else None
    own = getattr(tp, "build_from", None)
    if callable(own):
        return own(data)
    try:
        return tp(**build_fields(tp, data))
    except TypeError:
        return None


def build_fields(tp: type, data: dict[str, Any]) -> dict[str, Any]:
    """The constructor arguments for record ``tp`` from the keys ``data`` has.

    A value that comes out None for a field that cannot hold None is left out: the field keeps its
    default, and a required one makes the record unbuildable (the caller drops it)."""
    hints = typing.get_type_hints(tp)
    out: dict[str, Any] = {}
    for f in dataclasses.fields(tp):
        if json_key(f) not in data:
            continue
        value = build(hints[f.name], data[json_key(f)])
        if value is None and not _optional(hints[f.name]):
            continue
        out[f.name] = value
    return out


def _optional(tp: Any) -> bool:
    return tp is Any or (
        typing.get_origin(tp) in (types.UnionType, typing.Union) and type(None) in typing.get_args(tp)
    )


def _build_scalar(tp: Any, data: Any) -> Any:
    if tp is Any:
        return data
    if tp is int:
        if isinstance(data, bool):
            return int(data)
        return (
            int(data)
            if isinstance(data, int | float | str) and str(data).strip().lstrip("-").isdecimal()
            else None
        )
    if tp is str:
        return data if isinstance(data, str) else str(data)
    if tp is bool:
        return bool(data)
    return data


def all_defaults(tp: type) -> bool:
    return all(
        f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        for f in dataclasses.fields(tp)
    )
