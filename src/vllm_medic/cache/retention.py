"""Which prefix lengths can hit the cache, and is an observed miss expected (pure).

Full attention caches every whole block, but vLLM never serves a whole prompt from cache (the last
token is always computed), so a repeat of an L-token prompt hits ``floor((L-1)/block)*block``
tokens. Hybrid models (mamba / linear attention / KDA: ``mamba_cache_mode`` ``align`` or ``all``)
also need the recurrent state *at the hit position*, and that state is only kept at checkpoints:

* prompt ends: each earlier prompt's length, rounded down to the alignment unit;
* interval checkpoints every ``prefix_cache_retention_interval`` tokens
  (``VLLM_PREFIX_CACHE_RETENTION_INTERVAL``; rounded up to the alignment unit; ``0`` = prompt ends
  only; unset = every block, the dense behaviour).

The alignment unit is ``hash_block_size`` when the server reports one (the prefix-match unit),
else ``block_size``. Sources: vLLM blog 2026-07-27 "Agentic serving: smarter cache retention
policies", ``vllm/envs.py`` help for ``VLLM_PREFIX_CACHE_RETENTION_INTERVAL``, vllm-facts §1.5.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RetentionPolicy:
    block_size: int
    hybrid: bool
    mamba_cache_mode: str | None
    interval: int | None  # None = every block (dense); 0 = prompt ends only
    hash_block_size: int | None = None
    sources: tuple[str, ...] = ()

    @property
    def unit(self) -> int:
        return self.hash_block_size or self.block_size


@dataclass
class Expectation:
    tokens: int  # the longest prefix that can hit
    attention_limit: int  # what full attention alone would allow
    reason: str
    checkpoints: list[int] = field(default_factory=list)


def _int_or_none(v: Any) -> int | None:
    if v is None:
        return None
    s = str(v).strip()
    if s.lower() in ("", "none", "null"):
        return None
    try:
        return int(float(s))
    except ValueError:
        return None


def policy_from(
    row: dict[str, str] | None,
    env: dict[str, str] | None = None,
    args: dict[str, Any] | None = None,
    block_size: int | None = None,
) -> RetentionPolicy:
    """Build the policy from ``vllm:cache_config_info`` labels, then the launch env / args."""
    row = row or {}
    env = env or {}
    args = args or {}
    sources: list[str] = []
    block = block_size or _int_or_none(row.get("block_size")) or _int_or_none(args.get("block_size")) or 16
    mode = row.get("mamba_cache_mode") or args.get("mamba_cache_mode")
    mode = str(mode) if mode not in (None, "None") else None
    hybrid = mode in ("align", "all")
    interval = _int_or_none(row.get("prefix_cache_retention_interval"))
    if interval is not None:
        sources.append(
            f'vllm:cache_config_info prefix_cache_retention_interval="{row.get("prefix_cache_retention_interval")}"'
        )
    else:
        for key, val, where in (
            ("env", env.get("VLLM_PREFIX_CACHE_RETENTION_INTERVAL"), "VLLM_PREFIX_CACHE_RETENTION_INTERVAL"),
            ("arg", args.get("prefix_cache_retention_interval"), "--prefix-cache-retention-interval"),
        ):
            interval = _int_or_none(val)
            if interval is not None:
                sources.append(f"{where}={val} ({key})")
                break
    if mode:
        sources.append(f"mamba_cache_mode={mode}")
    return RetentionPolicy(
        block_size=block,
        hybrid=hybrid,
        mamba_cache_mode=mode,
        interval=interval,
        hash_block_size=_int_or_none(row.get("hash_block_size")),
        sources=tuple(sources),
    )


def expected_hit(
    policy: RetentionPolicy, prompt_len: int, common_prefix: int, earlier_prompt_lens: list[int]
) -> Expectation:
    """The prefix a request of ``prompt_len`` tokens can reuse, given what earlier prompts left behind.

    ``common_prefix`` is how many leading tokens it shares with the best earlier prompt.
    """
    limit = max(0, min(common_prefix, prompt_len - 1))
    attn = limit // policy.block_size * policy.block_size
    if not policy.hybrid:
        return Expectation(
            attn,
            attn,
            f"full attention: whole blocks of {policy.block_size} within the shared prefix (last token always computed)",
        )
    unit = policy.unit
    cps: set[int] = set()
    for end in earlier_prompt_lens:
        cp = end // unit * unit
        if 0 < cp <= attn:
            cps.add(cp)
    if policy.interval is None:
        if policy.mamba_cache_mode == "all":
            return Expectation(attn, attn, "hybrid, mamba_cache_mode=all: state kept at every block")
        step = unit
        what = "every block (no retention interval set)"
    elif policy.interval > 0:
        step = math.ceil(policy.interval / unit) * unit
        what = f"every {step} tokens (retention interval {policy.interval}, aligned to {unit})"
    else:
        step = 0
        what = "prompt ends only (retention interval 0)"
    if step:
        cps.update(range(step, attn + 1, step))
    hit = max(cps, default=0)
    listed = sorted(cps)[-5:]
    return Expectation(
        hit,
        attn,
        f"hybrid ({policy.mamba_cache_mode}): recurrent state only at checkpoints — earlier prompt ends and {what}",
        listed,
    )
