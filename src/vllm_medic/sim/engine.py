"""The sim's engine model: a block-hash prefix cache, KV blocks held by running requests, a seat limit.

Prefix cache, as vLLM's V1 engine counts it (token-based):
- a prompt is cut into full blocks of ``block_size`` tokens; block *i*'s hash chains block *i-1*'s;
- queries += prompt tokens, hits += cached tokens; at least one prompt token is always computed, so at
  most ``(len - 1) // block_size`` blocks can hit (a prompt that is an exact block multiple cannot hit
  its last block — the real Kimi-K3 issue #50235 pattern in hybrid mode);
- after prefill the prompt's full blocks are stored (LRU over ``num_gpu_blocks``).
Hybrid (mamba "align") mode: a recurrent state exists only at checkpoints, so only these positions can
hit: each earlier prompt's end (rounded down to a block) and, if ``retention_interval`` > 0, every
interval (rounded up to a block multiple). ``retention_interval`` None keeps every block (dense).
"""

from __future__ import annotations

import asyncio
import math
from collections import OrderedDict
from dataclasses import dataclass, field


def block_hashes(tokens: list[int], block_size: int) -> list[int]:
    out: list[int] = []
    parent = 0
    for i in range(len(tokens) // block_size):
        parent = hash((parent, tuple(tokens[i * block_size : (i + 1) * block_size])))
        out.append(parent)
    return out


@dataclass
class PrefixCache:
    block_size: int
    capacity_blocks: int
    enabled: bool = True
    hybrid: bool = False
    retention_interval: int | None = None
    _blocks: OrderedDict[int, None] = field(default_factory=OrderedDict)

    def lookup(self, tokens: list[int]) -> int:
        """Cached prompt tokens for this prompt (does not store anything)."""
        if not self.enabled or len(tokens) < 2:
            return 0
        hashes = block_hashes(tokens, self.block_size)[: (len(tokens) - 1) // self.block_size]
        best = 0
        for i, h in enumerate(hashes):
            if h not in self._blocks:
                if not self.hybrid:
                    break
                continue
            self._blocks.move_to_end(h)
            best = i + 1  # chained hashes: a hit here means the whole prefix up to here matches
        return best * self.block_size

    def insert(self, tokens: list[int]) -> None:
        if not self.enabled:
            return
        hashes = block_hashes(tokens, self.block_size)
        if not hashes:
            return
        if self.hybrid and self.retention_interval is not None:
            keep = {len(hashes) - 1}  # prompt end, rounded down to a block boundary
            if self.retention_interval > 0:
                step = max(1, math.ceil(self.retention_interval / self.block_size))
                keep.update(range(step - 1, len(hashes), step))
            chosen = [hashes[i] for i in sorted(keep)]
        else:
            chosen = hashes
        for h in chosen:
            self._blocks[h] = None
            self._blocks.move_to_end(h)
        while len(self._blocks) > self.capacity_blocks:
            self._blocks.popitem(last=False)


@dataclass
class EngineStats:
    prompt_tokens: int = 0
    generation_tokens: int = 0
    queries: int = 0
    hits: int = 0
    preemptions: int = 0
    success: dict[str, int] = field(default_factory=dict)


class Engine:
    """One data-parallel engine: seats (max_num_seqs), KV blocks and a prefix cache."""

    def __init__(
        self, index: int, *, block_size: int, num_gpu_blocks: int, max_num_seqs: int, cache: PrefixCache
    ):
        self.index = index
        self.block_size = block_size
        self.num_gpu_blocks = num_gpu_blocks
        self.max_num_seqs = max_num_seqs
        self.cache = cache
        self.stats = EngineStats()
        self.running = 0
        self.waiting = 0
        self.used_blocks = 0
        self._cond = asyncio.Condition()

    @property
    def kv_usage(self) -> float:
        return min(1.0, self.used_blocks / self.num_gpu_blocks)

    def blocks_for(self, tokens: int) -> int:
        return max(1, math.ceil(tokens / self.block_size))

    async def admit(self, blocks: int) -> None:
        """Wait for a seat and ``blocks`` free KV blocks (a request bigger than the cache gets it all)."""
        blocks = min(blocks, self.num_gpu_blocks)
        async with self._cond:
            self.waiting += 1
            try:
                await self._cond.wait_for(
                    lambda: (
                        self.running < self.max_num_seqs and self.used_blocks + blocks <= self.num_gpu_blocks
                    )
                )
            finally:
                self.waiting -= 1
            self.running += 1
            self.used_blocks += blocks

    def try_grow(self) -> bool:
        if self.used_blocks + 1 > self.num_gpu_blocks:
            return False
        self.used_blocks += 1
        return True

    async def release(self, blocks: int) -> None:
        async with self._cond:
            self.running -= 1
            self.used_blocks = max(0, self.used_blocks - blocks)
            self._cond.notify_all()

    async def preempt(self, blocks: int) -> None:
        """Give back a running request's blocks (vLLM recomputes it later); counts a preemption."""
        self.stats.preemptions += 1
        await self.release(blocks)
