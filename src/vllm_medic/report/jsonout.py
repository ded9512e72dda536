"""JSON output shared by every command (secrets redacted on the way out)."""

from __future__ import annotations

import json
from typing import Any

from vllm_medic.redact import redact_obj


def dumps(obj: Any, redact: bool = True, *, by_name: bool = True) -> str:
    """``by_name=False``: every string is still scanned, but keys named like secrets (triage's
    ``signature``) keep their values."""
    return json.dumps(
        redact_obj(obj, by_name=by_name) if redact else obj, indent=2, ensure_ascii=False, default=str
    )
