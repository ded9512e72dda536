"""Step 3, prefix_reuse: the same long prefix (system prompt + tools + input, several KV blocks) sent
at least three times; the verdict comes from the server's own counters, not from TTFT alone."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any

from vllm_medic.accept.context import RunContext, probes
from vllm_medic.accept.outcome import DOCS_METRICS, DOCS_PREFIX_CACHING, StepOutcome
from vllm_medic.model import Category, Finding, Severity

PREFIX_BLOCKS = 4
DEFAULT_BLOCK_SIZE = 16


@dataclass
class ReuseObservation:
    """Everything the verdict needs; filled by the I/O part, judged by ``judge_reuse``."""

    sends: int
    block_size: int | None
    prompt_tokens: int | None
    enable_prefix_caching: str | None  # label value from vllm:cache_config_info ("True"/"False")
    hits_delta: float | None
    queries_delta: float | None
    hits_metric: str | None
    cached_tokens: list[int | None] = field(default_factory=list)
    ttft_s: list[float | None] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def expected_hits(self) -> int | None:
        """Full blocks before the last prompt token, reusable on every repeat."""
        if not self.block_size or not self.prompt_tokens:
            return None
        per_repeat = ((self.prompt_tokens - 1) // self.block_size) * self.block_size
        return per_repeat * max(0, self.sends - 1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sends": self.sends, "block_size": self.block_size, "prompt_tokens": self.prompt_tokens,
            "enable_prefix_caching": self.enable_prefix_caching, "hits_delta": self.hits_delta,
            "queries_delta": self.queries_delta, "hits_metric": self.hits_metric,
            "expected_hits": self.expected_hits(), "cached_tokens": self.cached_tokens, "ttft_s": self.ttft_s,
            "errors": self.errors,
        }  # fmt: skip


CACHING_OFF_FIX = [
    "start vLLM with --enable-prefix-caching (hybrid models such as Kimi K3 default it off; set it explicitly)",
    "then check it reached the engine: `vllm-medic cache URL` or the log's 'enable_prefix_caching=True'",
]


def judge_reuse(obs: ReuseObservation) -> list[Finding]:
    if obs.errors:
        return [
            Finding(
                "ACC-PREFIX-005", Severity.FAIL, Category.PREFIX_CACHE,
                "prefix reuse could not be measured: requests failed", obs.errors[:5],
                ["fix the failing requests first (see the basic step)"],
            )
        ]  # fmt: skip
    findings: list[Finding] = []
    expected = obs.expected_hits()
    counters = (
        f"{obs.hits_metric or 'vllm:prefix_cache_hits'} +{obs.hits_delta:.0f} / queries +{obs.queries_delta or 0:.0f} "
        f"over {obs.sends} identical sends of {obs.prompt_tokens} prompt tokens (block size {obs.block_size}; "
        f"expected ≥{expected} hit tokens)"
        if obs.hits_delta is not None
        else "no prefix-cache counters in /metrics"
    )
    repeat_cached = [c for c in obs.cached_tokens[1:] if c is not None]
    cached_ev = (
        f"usage.prompt_tokens_details.cached_tokens per send: {obs.cached_tokens}"
        if any(c is not None for c in obs.cached_tokens)
        else "usage.prompt_tokens_details.cached_tokens not reported"
    )
    ttft_ev = ttft_evidence(obs.ttft_s)
    label_ev = f'vllm:cache_config_info enable_prefix_caching="{obs.enable_prefix_caching}"'
    if obs.enable_prefix_caching == "False":
        return [
            Finding(
                "ACC-PREFIX-001", Severity.FAIL, Category.PREFIX_CACHE, "prefix caching is off on this server",
                [label_ev, counters, cached_ev, ttft_ev], CACHING_OFF_FIX, [DOCS_PREFIX_CACHING],
            )
        ]  # fmt: skip
    hits_seen = (
        obs.hits_delta if obs.hits_delta is not None else (sum(repeat_cached) if repeat_cached else None)
    )
    if hits_seen is None:
        return [
            Finding(
                "ACC-PREFIX-004", Severity.WARN, Category.PREFIX_CACHE,
                "prefix reuse cannot be verified: no cache counters and no cached_tokens",
                [counters, cached_ev, ttft_ev],
                ["expose /metrics (vllm:prefix_cache_hits/queries) or start vLLM with --enable-prompt-tokens-details"],
                [DOCS_METRICS],
            )
        ]  # fmt: skip
    if hits_seen <= 0:
        return [
            Finding(
                "ACC-PREFIX-002", Severity.FAIL, Category.PREFIX_CACHE,
                "an identical long prefix was never reused",
                [counters, label_ev if obs.enable_prefix_caching else "cache_config_info not exposed", cached_ev, ttft_ev],
                [*CACHING_OFF_FIX,
                 "if caching is on: a retention/eviction policy or a per-request change in the prefix (timestamps, "
                 "shuffled tools) defeats reuse; `vllm-medic cache URL` checks both"],
                [DOCS_PREFIX_CACHING],
            )
        ]  # fmt: skip
    if expected and hits_seen < 0.5 * expected:
        findings.append(
            Finding(
                "ACC-PREFIX-003", Severity.WARN, Category.PREFIX_CACHE,
                f"only part of the repeated prefix was reused ({hits_seen:.0f} of ≥{expected} tokens)",
                [counters, cached_ev, ttft_ev],
                ["other traffic may have evicted blocks, or the KV cache is too small to keep the prefix; "
                 "rerun on a quiet server and check vllm:kv_cache_usage_perc"],
            )
        )  # fmt: skip
    else:
        findings.append(
            Finding(
                "ACC-PREFIX-000", Severity.PASS, Category.PREFIX_CACHE,
                f"the repeated prefix was reused ({hits_seen:.0f} cached tokens)", [counters, cached_ev, ttft_ev, label_ev],
            )
        )  # fmt: skip
    if obs.hits_delta and obs.hits_delta > 0 and not any(c is not None for c in obs.cached_tokens):
        findings.append(
            Finding(
                "ACC-PREFIX-006", Severity.INFO, Category.PREFIX_CACHE,
                "the server does not report cached_tokens in usage",
                [cached_ev], ["start vLLM with --enable-prompt-tokens-details so clients can see cache hits per request"],
            )
        )  # fmt: skip
    drop = ttft_drop(obs.ttft_s)
    if drop is not None and drop <= 0:
        findings.append(
            Finding(
                "ACC-PREFIX-007", Severity.INFO, Category.PREFIX_CACHE,
                "no TTFT drop on the repeats (not a failure by itself: short prefixes or a busy server hide it)",
                [ttft_ev],
            )
        )  # fmt: skip
    return findings


def ttft_drop(ttfts: list[float | None]) -> float | None:
    """Fractional drop of the median repeat TTFT against the first (cold) send."""
    if not ttfts or ttfts[0] is None:
        return None
    repeats = [t for t in ttfts[1:] if t is not None]
    if not repeats or ttfts[0] <= 0:
        return None
    return 1.0 - statistics.median(repeats) / ttfts[0]


def ttft_evidence(ttfts: list[float | None]) -> str:
    shown = ", ".join("n/a" if t is None else f"{t * 1000:.0f}" for t in ttfts)
    drop = ttft_drop(ttfts)
    return f"TTFT ms per send: {shown}" + (
        "" if drop is None else f" (median repeat {drop * 100:+.0f}% vs first)"
    )


def build_messages(nonce: str, filler_count: int) -> list[dict[str, Any]]:
    """System prompt (with a per-run nonce first, so the first send is cold) + a long fixed user prefix."""
    p = probes()
    lines = [p["prefix_filler"][i % len(p["prefix_filler"])].format(i=i) for i in range(filler_count)]
    return [
        {"role": "system", "content": f"[acceptance run {nonce}] {p['prefix_system']}"},
        {"role": "user", "content": "\n".join(lines) + "\n" + p["prefix_question"]},
    ]


async def _sized_messages(ctx: RunContext, target_tokens: int) -> tuple[list[dict[str, Any]], int | None]:
    """The fewest filler lines whose templated prompt reaches ``target_tokens`` (measured with /tokenize:
    two probes give tokens per line, then at most a few single-line steps), so the prompt never
    overshoots ``max_model_len``. Without /tokenize, ~4 characters per token."""
    from vllm_medic.serve.client import EndpointError

    tools = [probes()["tool"]]

    async def count(lines: int) -> int | None:
        try:
            tok = await ctx.client.tokenize(messages=build_messages(ctx.run_nonce, lines), tools=tools)
        except EndpointError:
            return None
        return None if tok is None else tok.count

    c8 = await count(8)
    c16 = await count(16) if c8 is not None else None
    if c8 is None or c16 is None or c16 <= c8:
        lines = 1
        while sum(len(m["content"]) for m in build_messages(ctx.run_nonce, lines)) < target_tokens * 4:
            lines += 1
        return build_messages(ctx.run_nonce, lines), None
    per_line = (c16 - c8) / 8.0
    lines = max(1, math.ceil(8 + (target_tokens - c8) / per_line))
    measured = await count(lines)
    for _ in range(16):
        if measured is None or measured >= target_tokens:
            break
        lines += 1
        measured = await count(lines)
    return build_messages(ctx.run_nonce, lines), measured


async def run_prefix_reuse(ctx: RunContext) -> StepOutcome:
    from vllm_medic.serve.client import EndpointError
    from vllm_medic.serve.metrics import PREFIX_CACHE_HITS, PREFIX_CACHE_QUERIES, diff

    out = StepOutcome("prefix_reuse")
    try:
        before = await ctx.client.metrics()
    except EndpointError as exc:
        before = None
        out.data["metrics_error"] = str(exc)
    info = before.cache_config_info() if before is not None else []
    block_size = _int(info[0].get("block_size")) if info else None
    ctx.block_size = block_size
    enable = info[0].get("enable_prefix_caching") if info else None
    bs = block_size or DEFAULT_BLOCK_SIZE
    max_tokens = 4
    target = PREFIX_BLOCKS * bs + bs // 2
    if ctx.max_model_len:
        target = min(target, int(ctx.max_model_len) - max_tokens - 8)
    messages, counted = await _sized_messages(ctx, target)
    sends = 3 if ctx.opts.quick else 4
    obs = ReuseObservation(
        sends=sends, block_size=block_size, prompt_tokens=counted, enable_prefix_caching=enable,
        hits_delta=None, queries_delta=None, hits_metric=None,
    )  # fmt: skip
    body = {
        "messages": messages, "tools": [probes()["tool"]], "tool_choice": "none", "max_tokens": max_tokens,
        "temperature": 0, "stream_options": {"include_usage": True},
    }  # fmt: skip
    for i in range(sends):
        res = await ctx.client.chat_stream(body, timeout_s=ctx.opts.request_timeout_s)
        if not res.ok:
            obs.errors.append(f"send {i + 1}: {res.error_kind}: {res.error}")
            break
        obs.ttft_s.append(res.ttft_s)
        obs.cached_tokens.append(res.cached_tokens)
        if res.prompt_tokens:
            obs.prompt_tokens = res.prompt_tokens
        ctx.progress("prefix_reuse", obs.to_dict())
    if before is not None and not obs.errors:
        try:
            after = await ctx.client.metrics()
        except EndpointError as exc:
            out.data["metrics_error"] = str(exc)
        else:
            delta = diff(before, after)
            obs.hits_delta = delta.counter(PREFIX_CACHE_HITS)
            obs.queries_delta = delta.counter(PREFIX_CACHE_QUERIES)
            obs.hits_metric = after.first_present(PREFIX_CACHE_HITS)
    out.data.update(obs.to_dict())
    out.data["block_size_source"] = (
        "vllm:cache_config_info" if block_size else f"unknown (assumed {DEFAULT_BLOCK_SIZE})"
    )
    for f in judge_reuse(obs):
        out.add(f)
    return out.settle()


def _int(value: Any) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None
