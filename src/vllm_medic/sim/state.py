"""The sim's mutable state: its engines, histograms, fault RNG, open streams, and the crash."""

from __future__ import annotations

import itertools
import random
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from aiohttp import web

from vllm_medic.sim.config import SimConfig
from vllm_medic.sim.engine import Engine, PrefixCache, block_hashes
from vllm_medic.sim.exposition import ITL_BUCKETS, REQUEST_BUCKETS, TTFT_BUCKETS, PromHistogram


class Crashed(Exception):
    """The sim's engine died while this request was running."""


@dataclass
class EngineHists:
    ttft: PromHistogram = field(default_factory=lambda: PromHistogram(TTFT_BUCKETS))
    itl: PromHistogram = field(default_factory=lambda: PromHistogram(ITL_BUCKETS))
    tpot: PromHistogram = field(default_factory=lambda: PromHistogram(ITL_BUCKETS))
    e2e: PromHistogram = field(default_factory=lambda: PromHistogram(REQUEST_BUCKETS))
    queue: PromHistogram = field(default_factory=lambda: PromHistogram(REQUEST_BUCKETS))


class SimState:
    def __init__(self, cfg: SimConfig) -> None:
        self.cfg = cfg
        self.rng = random.Random(cfg.seed)
        self.engines = [
            Engine(
                i,
                block_size=cfg.block_size,
                num_gpu_blocks=cfg.num_gpu_blocks,
                max_num_seqs=cfg.max_num_seqs,
                cache=PrefixCache(
                    cfg.block_size,
                    cfg.num_gpu_blocks,
                    enabled=cfg.enable_prefix_caching,
                    hybrid=cfg.hybrid,
                    retention_interval=cfg.retention_interval if cfg.hybrid else None,
                ),
            )
            for i in range(cfg.engines)
        ]
        self.hists = [EngineHists() for _ in range(cfg.engines)]
        self._rr = itertools.count()
        self._ids = itertools.count(1)
        self.in_flight = 0
        self.dead = False
        self.created = int(time.time())
        self.streams: dict[int, web.Request] = {}  # requests with an open SSE stream (a crash cuts them)
        self.on_crash: list[Any] = []
        self.log_path = Path(cfg.log_file) if cfg.log_file else None

    def next_id(self) -> int:
        return next(self._ids)

    def pick_engine(self, tokens: list[int]) -> Engine:
        if len(self.engines) == 1:
            return self.engines[0]
        if self.cfg.routing == "hash":
            first = block_hashes(tokens, self.cfg.block_size)[:1]
            return self.engines[(first[0] if first else 0) % len(self.engines)]
        return self.engines[next(self._rr) % len(self.engines)]

    def chance(self, p: float) -> bool:
        return p > 0 and self.rng.random() < p

    def log(self, level: str, where: str, message: str, prefix: str = "(APIServer pid=1) ") -> None:
        if self.log_path is None:
            return
        stamp = datetime.now().strftime("%m-%d %H:%M:%S")
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(f"{prefix}{level} {stamp} [{where}] {message}\n")

    def crash(self) -> None:
        if self.dead:
            return
        self.dead = True
        engine_prefix = "(EngineCore_DP0 pid=2) "
        if self.cfg.crash_kind == "oom":
            self.log(
                "ERROR",
                "core.py:1",
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 786.00 MiB. GPU 0 has a total "
                "capacity of 79.11 GiB of which 140.75 MiB is free. (vllm-medic sim: injected)",
                engine_prefix,
            )
        self.log("ERROR", "core.py:1", "EngineCore encountered a fatal error.", engine_prefix)
        self.log(
            "ERROR",
            "async_llm.py:1",
            "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
            "See stack trace (above) for the root cause.",
        )
        for request in list(self.streams.values()):
            if request.transport is not None:
                request.transport.abort()
        for cb in self.on_crash:
            cb()
