"""What `vllm-medic accept` was asked to do: parsed, validated options (usage errors exit 2)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from vllm_medic.accept_steps import STEP_NAMES
from vllm_medic.errors import UsageError

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


@dataclass
class AcceptOptions:
    url: str
    steps: tuple[str, ...] = STEP_NAMES
    quick: bool = False
    model: str | None = None
    api_key_env: str | None = None
    api_key: str | None = field(default=None, repr=False)
    log_paths: tuple[Path, ...] = ()
    docker: str | None = None
    kubectl: str | None = None
    concurrency: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    requests_per_step: int | None = 32
    step_duration_s: float | None = None
    error_budget: float = 0.01
    max_client_lag_ms: float = (
        20.0  # the load generator's self-check: event-loop lag p99 above this = invalid
    )
    request_timeout_s: float = 60.0
    ready_timeout_s: float = 60.0
    soak_s: float = 300.0
    max_tokens: int = 64
    bundle: Path | None = None
    collect: bool = True
    workers: int = 1  # >1: each load level runs in this many Ray actors (cluster.distload), merged exactly
    ray_address: str | None = None
    recipe: str = "generic"  # the archive step's preflight (`check`) runs this recipe over the snapshot
    strategy: str | None = None

    @property
    def has_logs(self) -> bool:
        return bool(self.log_paths or self.docker or self.kubectl)


def normalise_url(url: str) -> str:
    """``host:port`` → ``http://host:port``; strips a trailing ``/v1`` so endpoints compose."""
    raw = url.strip()
    if "://" not in raw:
        raw = "http://" + raw
    try:
        parsed = urlparse(raw)  # `http://[::1` (an unclosed IPv6 bracket) fails here already
        hostname = parsed.hostname
    except ValueError as exc:
        raise UsageError(f"not a valid URL: {url!r} ({exc})") from exc
    if any(ch.isspace() for ch in raw) or parsed.scheme not in ("http", "https") or not hostname:
        raise UsageError(f"not an http(s) URL: {url!r} (expected e.g. http://127.0.0.1:8000)")
    try:
        _ = parsed.port
    except ValueError as exc:
        raise UsageError(f"bad port in URL {url!r}: {exc}") from exc
    if parsed.username or parsed.password:
        raise UsageError(
            "credentials in the URL are not accepted; put the key in an env var and pass --api-key-env"
        )
    base = raw.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base


def parse_steps(text: str | None) -> tuple[str, ...]:
    if not text:
        return STEP_NAMES
    wanted = [s.strip().replace("-", "_") for s in text.split(",") if s.strip()]
    unknown = [s for s in wanted if s not in STEP_NAMES]
    if unknown or not wanted:
        raise UsageError(
            f"unknown step(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(STEP_NAMES)}"
        )
    return tuple(s for s in STEP_NAMES if s in wanted)


def parse_concurrency(text: str | None, max_concurrency: int | None, quick: bool) -> tuple[int, ...]:
    if text and max_concurrency is not None:
        raise UsageError("give either --concurrency LEVELS or --max-concurrency N, not both")
    if text:
        try:
            levels = [int(x) for x in text.split(",") if x.strip()]
        except ValueError as exc:
            raise UsageError(f"--concurrency wants comma-separated integers, got {text!r}") from exc
        if not levels or any(c < 1 for c in levels):
            raise UsageError(f"--concurrency levels must be positive integers, got {text!r}")
        if levels != sorted(set(levels)):
            raise UsageError(f"--concurrency levels must be strictly increasing, got {text!r}")
        return tuple(levels)
    cap = max_concurrency if max_concurrency is not None else (4 if quick else 32)
    if cap < 1:
        raise UsageError(f"--max-concurrency must be at least 1, got {cap}")
    levels, c = [], 1
    while c <= cap:
        levels.append(c)
        c *= 2
    if levels[-1] != cap:
        levels.append(cap)
    return tuple(levels)


def parse_duration(text: str, flag: str) -> float:
    """``90``, ``90s``, ``5m``, ``1.5h``, ``500ms`` → seconds."""
    m = _DURATION_RE.match(text or "")
    if not m:
        raise UsageError(f"{flag} wants a duration like 30s, 5m or 1h, got {text!r}")
    seconds = float(m.group(1)) * _DURATION_UNITS[m.group(2)]
    if seconds <= 0:
        raise UsageError(f"{flag} must be positive, got {text!r}")
    return seconds
