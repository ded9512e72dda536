"""What the steps share during one run: options, the probe client, what was learnt about the server."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from vllm_medic.accept.options import AcceptOptions


@cache
def probes() -> dict[str, Any]:
    """The fixed probe texts and tool schema (data file, so they stay identical across releases)."""
    return json.loads(resources.files("vllm_medic.accept").joinpath("data/probes.json").read_text("utf-8"))


StartDistributed = Callable[[AcceptOptions, str | None], Any]


@dataclass
class RunContext:
    opts: AcceptOptions
    client: Any  # vllm_medic.serve.client.ServerClient (imported lazily: aiohttp is heavy)
    stop_event: threading.Event = field(default_factory=threading.Event)
    model: str | None = None
    version: str | None = None
    max_model_len: int | None = None
    block_size: int | None = None
    sustainable_concurrency: int | None = None  # set by the ramp; the soak runs at it
    server_reachable: bool | None = None
    engine_dead: str | None = None  # set by the ramp when the engine died: later load steps are skipped
    log_sources: list[Any] | None = None  # accept.logs.LogSource, read once by the first step needing them
    launch_args: dict[str, Any] | None = None
    # (step name, partial data) -> None: lets a long step save what it measured so far.
    progress: Callable[[str, dict[str, Any]], None] = lambda _name, _data: None
    # (name, content, media type) -> None: attach a file (the snapshot) to the run.
    attach: Callable[[str, str | bytes, str], None] = lambda _name, _content, _media: None
    run_nonce: str = ""
    live: Any = None  # accept.progress.LiveProgress: the terminal's progress line (None: quiet)
    # (options, model) -> load workers with run_step()/close(): how `--workers N` runs a level; the CLI
    # passes what the cluster package plugged in (cluster.distload: Ray actors), None without it
    start_distributed: StartDistributed | None = None
    distributed: Any = None  # what start_distributed made, created by the first level that needs it

    def model_name(self) -> str:
        return self.model or self.opts.model or "default"
