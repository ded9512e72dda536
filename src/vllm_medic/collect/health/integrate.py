"""Where health plugs into collect's snapshot builder; checks/rules_health.py judges what it stores.

``health_step`` is one step of ``collect.build`` (live collect and ``--from`` alike): it reads the
health files among the raw outputs and stores the facts under ``Snapshot.extra["health"]``.
``health_from_raw`` does the same for any raw dict (bundles made before the step existed).
"""

from __future__ import annotations

from typing import Any

from vllm_medic.collect.health.files import HEALTH_FILES

_EXTRA_FILES = ("nvidia-smi-q.txt", "nvidia-smi-q.xml")


def health_from_raw(raw: dict[str, bytes], image: str | None = None) -> dict[str, Any]:
    wanted = set(HEALTH_FILES.values()) | set(_EXTRA_FILES)
    files = {name: data.decode("utf-8", "replace") for name, data in raw.items() if name in wanted}
    if not files:  # nothing health can read (nvidia-smi -q alone is enough: fabric state, cliques)
        return {}
    from vllm_medic.collect.health.probe import from_files  # deferred: collect imports this module at startup

    health = from_files(files)
    if "in_image" in health and not health["in_image"].get("image"):
        health["in_image"]["image"] = image
    return health


def health_step(ctx: Any) -> None:
    """collect.build step: ``ctx`` has ``raw`` (file -> bytes), ``options`` and ``snapshot``."""
    health = health_from_raw(ctx.raw, (ctx.options or {}).get("image"))
    if health:
        ctx.snapshot.extra["health"] = health
