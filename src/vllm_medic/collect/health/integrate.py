"""Where health plugs into collect's snapshot builder; checks/rules_health.py judges what it stores.

``health_step`` is one step of ``collect.build`` (live collect and ``--from`` alike): it reads the
health files among the raw outputs and stores the facts as ``Snapshot.health``.
``health_from_raw`` does the same for any raw dict (bundles made before the step existed).
"""

from __future__ import annotations

from typing import Any

from vllm_medic.collect.health.files import HEALTH_FILES
from vllm_medic.snapshot_health import HealthFacts

_EXTRA_FILES = ("nvidia-smi-q.txt", "nvidia-smi-q.xml")


def health_from_raw(raw: dict[str, bytes], image: str | None = None) -> HealthFacts:
    wanted = set(HEALTH_FILES.values()) | set(_EXTRA_FILES)
    files = {name: data.decode("utf-8", "replace") for name, data in raw.items() if name in wanted}
    if not files:  # nothing health can read (nvidia-smi -q alone is enough: fabric state, cliques)
        return HealthFacts()
    from vllm_medic.collect.health.probe import from_files  # deferred: collect imports this module at startup

    health = from_files(files)
    if health.in_image is not None and not health.in_image.image:
        health.in_image.image = image
    return health


def health_step(ctx: Any) -> None:
    """collect.build step: ``ctx`` has ``raw`` (file -> bytes), ``options`` and ``snapshot``."""
    health = health_from_raw(ctx.raw, (ctx.options or {}).get("image"))
    if not health.empty():
        ctx.snapshot.health = health
