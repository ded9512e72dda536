"""One entry of manifest.json's ``sources``: what ran for a source, how it ended, where its output is.

The record is typed; manifest.json stays the JSON it always was. An entry read back (``--from`` a
bundle, a node's answer over SSH/Kubernetes/Ray, an older version's manifest) keeps its keys in the
order it had, and keys this version does not know travel in ``extra``: a bundle re-written by
``collect --from`` holds the same bytes. A key not yet written is added, after the others, when it is
first given a value: the order the dicts this record replaced had.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: the keys of every entry this version writes, in their order; the optional ones follow when set
CORE_KEYS = ("name", "command", "started", "duration_s", "exit_code", "status", "file", "message")
OPTIONAL_KEYS = ("stderr", "origin", "partial", "notes")
_KNOWN = CORE_KEYS + OPTIONAL_KEYS


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_notes(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(n, str) for n in v)


#: what a value read from JSON must be to fill its typed field (else it is kept, as read, in ``extra``)
_FITS: dict[str, Callable[[Any], bool]] = {
    "command": _is_str,
    "started": _is_str,
    "duration_s": _is_number,
    "exit_code": _is_int,
    "status": _is_str,
    "file": _is_str,
    "message": _is_str,
    "stderr": _is_str,
    "origin": _is_str,
    "partial": _is_str,
    "notes": _is_notes,
}


@dataclass
class SourceEntry:
    """None is "not recorded". ``keys``: the keys written, in order (a bare entry names only itself;
    setting a field adds its key)."""

    name: str
    command: str | None = None
    started: str | None = None  # ISO time the command started (probes run here)
    duration_s: float | None = None
    exit_code: int | None = None
    status: str | None = None  # ok, missing, timeout, nonzero, permission, error, not_applicable, ...
    file: str | None = None  # the canonical file holding its output, when one was kept
    message: str | None = None
    stderr: str | None = None  # a probe's last 2,000 characters of stderr ("" when it wrote none)
    origin: str | None = None  # launch: argv, file:PATH, docker-inspect:CONTAINER
    partial: str | None = None  # why the output is not the whole of it (set by the readers)
    notes: list[str] | None = None  # what the readers could not make sense of
    extra: dict[str, Any] = field(default_factory=dict)
    keys: tuple[str, ...] = ("name",)

    def __post_init__(self) -> None:
        self.keys += tuple(k for k in _KNOWN if k not in self.keys and getattr(self, k) is not None)

    def __setattr__(self, key: str, value: Any) -> None:
        super().__setattr__(key, value)
        if key in _KNOWN and value is not None and "keys" in self.__dict__ and key not in self.keys:
            super().__setattr__("keys", (*self.keys, key))

    @classmethod
    def of(cls, name: str, file: str | None, **kw: Any) -> SourceEntry:
        """An entry this version records: every core key written, a source that answered unless told."""
        keys = CORE_KEYS + tuple(k for k in kw if k not in CORE_KEYS)
        entry = cls(name, duration_s=0.0, status="ok", file=file, message="", keys=keys)
        for key, value in kw.items():
            setattr(entry, key, value)
        return entry

    def to_json(self) -> dict[str, Any]:
        return {key: self._value(key) for key in self.keys}

    def _value(self, key: str) -> Any:
        return self.extra[key] if key in self.extra else getattr(self, key) if key in _KNOWN else None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SourceEntry:
        """``data`` holds a truthy ``name`` (the caller skips those without one); a value of another type
        than its field's stays in ``extra`` and the field reads as not recorded."""
        entry = cls(str(data["name"]), keys=tuple(data))
        if not isinstance(data["name"], str):
            entry.extra["name"] = data["name"]
        for key, value in data.items():
            if key == "name":
                continue
            if key in _FITS and _FITS[key](value):
                setattr(entry, key, list(value) if key == "notes" else value)
            else:
                entry.extra[key] = value
        return entry

    def forget(self, key: str) -> None:
        """Drop a key this version re-derives (``partial``, ``notes``): written again only if set again."""
        if key in _KNOWN and key != "name":
            setattr(self, key, None)
        self.extra.pop(key, None)
        self.keys = tuple(k for k in self.keys if k != key)


def entries_by_name(sources: Any) -> dict[str, SourceEntry]:
    """A manifest's ``sources`` (a list of entries, or a mapping by name) as typed entries by name;
    anything else, and entries without a name, count as nothing recorded."""
    items = sources.values() if isinstance(sources, dict) else sources if isinstance(sources, list) else []
    entries = (SourceEntry.from_json(e) for e in items if isinstance(e, dict) and e.get("name"))
    return {e.name: e for e in entries}
