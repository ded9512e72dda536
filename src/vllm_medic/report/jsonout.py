"""JSON output shared by every command (secrets redacted on the way out)."""

from __future__ import annotations

import json
from typing import Any

from vllm_medic.redact import redact_obj


def dumps(obj: Any, redact: bool = True) -> str:
    return json.dumps(redact_obj(obj) if redact else obj, indent=2, ensure_ascii=False, default=str)
