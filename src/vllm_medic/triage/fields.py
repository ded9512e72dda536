"""Structured-dump fields (`  message: …` in a pod status, `      Reason:  …` in `kubectl describe`).

An indented line is code to the scan (a traceback's quoted source, a wrapped continuation) unless it is
one of these fields: a `key: value` whose key (data/structured_fields.yaml) names what the program said
about the object. Such a line's value is judged like any other line.
"""

from __future__ import annotations

import functools
import re
from importlib import resources

# `key:` then at least one space and a value; the key is a YAML/describe key (letters, digits, `_`, `-`,
# spaces as `kubectl describe` prints them: `Last Failure Info`), optionally quoted (JSON-ish dumps).
_FIELD = re.compile(r"""^[ \t]+["']?([A-Za-z][\w -]{0,40}?)["']?:[ \t]+\S""")


@functools.cache
def field_keys() -> frozenset[str]:
    """The keys of data/structured_fields.yaml, lower-cased (parsed once per process)."""
    from vllm_medic.triage.catalogue import safe_yaml

    text = (resources.files("vllm_medic.triage") / "data" / "structured_fields.yaml").read_text(
        encoding="utf-8"
    )
    doc = safe_yaml(text)
    keys = doc.get("keys") if isinstance(doc, dict) else None
    if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
        raise ValueError("data/structured_fields.yaml: `keys` must be a list of non-empty strings")
    return frozenset(k.lower() for k in keys)


def is_structured_field(message: str) -> bool:
    """True for an indented `key: value` line whose key is a structured dump's message/reason field."""
    m = _FIELD.match(message)
    return m is not None and m.group(1).strip().lower().replace(" ", "") in field_keys()
