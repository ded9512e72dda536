"""`cache probe`: send a fixed request and variants to a live server; record and judge each reuse.

For every request it keeps what the troubleshooting method asks for: the full request JSON, its
token count, which engine (DP rank) answered (the ``engine`` label of the metric deltas), hit or
miss (``vllm:prefix_cache_hits`` delta and ``usage.prompt_tokens_details.cached_tokens``), TTFT,
the retention model's expected hit, and with ``--logs`` the log lines the server wrote meanwhile.
Requests are sent one at a time so that metric deltas belong to one request; after each, the
metrics are re-read until the request is counted (bounded), never after a fixed sleep.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_medic.cache.diff import common_prefix_len
from vllm_medic.cache.retention import Expectation, RetentionPolicy, expected_hit, policy_from
from vllm_medic.model import Category, Finding, Severity
from vllm_medic.serve.metrics import (
    PREFIX_CACHE_HITS,
    PREFIX_CACHE_QUERIES,
    PROMPT_TOKENS,
    REQUEST_SUCCESS,
    Metrics,
    diff,
)

FILLER = (
    "Station log: the northern sensor array reports steady pressure, light westerly wind, "
    "clear skies and a humidity reading within the seasonal band. "
)
DEFAULT_TIMEOUT_S = 300.0  # per request; `cache probe --timeout`
QUESTIONS = ("Summarise the station log in one sentence.", "List two risks mentioned in the station log.")


@dataclass
class ProbeRecord:
    name: str
    request: dict[str, Any]
    prompt_tokens: int | None = None
    token_ids: list[int] | None = None
    cached_tokens: int | None = None
    hit_tokens: float | None = None  # vllm:prefix_cache_hits delta
    query_tokens: float | None = None
    engine: str | None = None
    ttft_s: float | None = None
    ok: bool = False
    error: str | None = None
    expected: Expectation | None = None
    outcome: str = ""  # hit | miss | miss-expected | error
    log_lines: list[str] = field(default_factory=list)

    @property
    def observed_hit(self) -> float | None:
        if self.hit_tokens is not None:
            return self.hit_tokens
        return self.cached_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "request": self.request,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "hit_tokens": self.hit_tokens,
            "query_tokens": self.query_tokens,
            "engine": self.engine,
            "ttft_s": None if self.ttft_s is None else round(self.ttft_s, 4),
            "ok": self.ok,
            "error": self.error,
            "expected_hit_tokens": None if self.expected is None else self.expected.tokens,
            "expected_reason": None if self.expected is None else self.expected.reason,
            "outcome": self.outcome,
            "log_lines": self.log_lines,
        }


@dataclass
class ProbeReport:
    url: str
    cache_config: list[dict[str, str]]
    policy: RetentionPolicy | None
    flag_on: bool | None
    records: list[ProbeRecord]
    verdict: str  # effective | flag off | prefixes differ | miss expected by the retention policy | unexplained miss
    engines: int
    notes: list[str] = field(default_factory=list)


def build_requests(
    filler_repeats: int, block_hint: int, model: str | None
) -> list[tuple[str, dict[str, Any]]]:
    """The fixed request, its repeats and variants (same prefix + new suffix; shorter / longer prefixes)."""

    def body(system: str, question: str) -> dict[str, Any]:
        b: dict[str, Any] = {
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": question}],
            "max_tokens": 4,
            "temperature": 0,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if model:
            b["model"] = model
        return b

    system = "You are the station assistant. " + FILLER * filler_repeats
    shorter = "You are the station assistant. " + FILLER * max(1, filler_repeats // 2)
    longer = system + FILLER
    del block_hint
    return [
        ("fixed#1", body(system, QUESTIONS[0])),
        ("fixed#2 (repeat)", body(system, QUESTIONS[0])),
        ("fixed#3 (repeat)", body(system, QUESTIONS[0])),
        ("same prefix, new suffix", body(system, QUESTIONS[1])),
        ("shorter prefix", body(shorter, QUESTIONS[0])),
        ("longer prefix", body(longer, QUESTIONS[0])),
    ]


class _LogTail:
    """Lines appended to a log file between two marks (the file is only read, never followed)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.pos = self._size()

    def _size(self) -> int:
        try:
            return self.path.stat().st_size if self.path else 0
        except OSError:
            return 0

    def take(self, limit: int = 50) -> list[str]:
        if self.path is None:
            return []
        try:
            with self.path.open("rb") as f:
                f.seek(self.pos)
                data = f.read(1 << 20)
                self.pos = f.tell()
        except OSError:
            return []
        lines = data.decode("utf-8", errors="replace").splitlines()
        return lines[-limit:]


async def _settled_metrics(client: Any, before: Metrics, deadline_s: float = 15.0) -> Metrics:
    """Re-read /metrics until the finished request is counted (request_success or prompt tokens moved)."""
    want = (before.counter(REQUEST_SUCCESS) or 0.0) + 1
    want_prompt = before.counter(PROMPT_TOKENS) or 0.0
    end = time.monotonic() + deadline_s
    after = await client.metrics()
    while time.monotonic() < end:
        done = after.counter(REQUEST_SUCCESS)
        if done is not None and done >= want:
            return after
        if done is None and (after.counter(PROMPT_TOKENS) or 0.0) > want_prompt:
            return after
        await asyncio.sleep(0.05)
        after = await client.metrics()
    return after


async def run_probe(
    url: str,
    *,
    api_key: str | None = None,
    filler_repeats: int = 12,
    log_path: Path | None = None,
    env: dict[str, str] | None = None,
    extra_requests: list[tuple[str, dict[str, Any]]] | None = None,
    on_record: Any = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    live: Any = None,
) -> ProbeReport:
    """``timeout_s`` bounds each request; ``live`` (a ``vllm_medic.progress.LiveLine``) draws the
    progress line while the requests are sent."""
    from vllm_medic.progress import QUIET
    from vllm_medic.serve.client import ServerClient

    notes: list[str] = []
    async with ServerClient(url, api_key=api_key, timeout_s=timeout_s) as client:
        models = await client.models()
        model = models[0].get("id") if models else None
        client.model = model
        before_all = await client.metrics()
        rows = before_all.cache_config_info()
        flag_values = {r.get("enable_prefix_caching") for r in rows}
        flag_on = None if not rows else ("True" in flag_values and "False" not in flag_values)
        policy = policy_from(rows[0] if rows else None, env=env) if rows else None
        if not rows:
            notes.append("the server exposes no vllm:cache_config_info: flag state and block size unknown")
        engines = max(1, len(rows))
        block = policy.block_size if policy else 16
        requests = list(extra_requests or []) + build_requests(filler_repeats, block, model)
        records: list[ProbeRecord] = []
        tail = _LogTail(log_path)
        t0 = time.perf_counter()
        async with (live or QUIET).watching(
            lambda: progress_line(records, len(requests), time.perf_counter() - t0)
        ):
            await _send_all(client, requests, records, notes, tail, on_record)
    _judge_records(records, policy)
    verdict = _overall(records, flag_on)
    return ProbeReport(url, rows, policy, flag_on, records, verdict, engines, notes)


def progress_line(records: list[ProbeRecord], planned: int, elapsed_s: float) -> str:
    """The terminal's progress line (pure): requests done/planned, hits so far, errors, time left."""
    from vllm_medic.progress import time_left

    done = len(records)
    hits = sum(1 for r in records if r.ok and (r.observed_hit or 0) > 0)
    errors = sum(1 for r in records if not r.ok)
    return (
        f"cache probe: requests {done}/{planned} done, hits {hits}, errors {errors}, "
        f"{time_left(done, planned, elapsed_s)}"
    )


async def _send_all(
    client: Any,
    requests: list[tuple[str, dict[str, Any]]],
    records: list[ProbeRecord],
    notes: list[str],
    tail: _LogTail,
    on_record: Any,
) -> None:
    """One request at a time (so each metric delta belongs to one request), appended to ``records``."""
    from vllm_medic.serve.client import EndpointError

    for name, body in requests:
        rec = ProbeRecord(name=name, request=body)
        try:
            tok = await client.tokenize(messages=body["messages"], tools=body.get("tools"))
            rec.token_ids = tok.tokens if tok else None
        except EndpointError as exc:
            notes.append(f"/tokenize failed for {name}: {exc}")
        try:
            before = await client.metrics()
            res = await client.chat_stream(body)
            rec.ok, rec.ttft_s = res.ok, res.ttft_s
            rec.error = res.error
            rec.prompt_tokens = res.prompt_tokens or (len(rec.token_ids) if rec.token_ids else None)
            rec.cached_tokens = res.cached_tokens
            if res.ok:
                after = await _settled_metrics(client, before)
                delta = diff(before, after)
                rec.hit_tokens = delta.counter(PREFIX_CACHE_HITS)
                rec.query_tokens = delta.counter(PREFIX_CACHE_QUERIES)
                per_engine = delta.per_engine(PREFIX_CACHE_QUERIES)
                moved = [e for e, v in per_engine.items() if v > 0]
                rec.engine = moved[0] if len(moved) == 1 else (",".join(moved) if moved else None)
        except EndpointError as exc:
            rec.ok, rec.error = False, str(exc)
            notes.append(f"stopped after {name}: {exc}")
        rec.log_lines = tail.take()
        records.append(rec)
        if on_record is not None:
            on_record(rec)
        if rec.error and not rec.ok and notes and notes[-1].startswith("stopped"):
            break


def _judge_records(records: list[ProbeRecord], policy: RetentionPolicy | None) -> None:
    """Expected hit per request (vs earlier requests on the same engine) and the outcome."""
    seen: list[ProbeRecord] = []
    for rec in records:
        if not rec.ok:
            rec.outcome = "error"
            continue
        same_engine = [r for r in seen if rec.engine is None or r.engine is None or r.engine == rec.engine]
        if policy is not None and rec.token_ids and rec.prompt_tokens:
            common = max(
                (common_prefix_len(rec.token_ids, r.token_ids) for r in same_engine if r.token_ids), default=0
            )
            ends = [r.prompt_tokens for r in same_engine if r.prompt_tokens]
            rec.expected = expected_hit(policy, rec.prompt_tokens, common, ends)
            if seen and not same_engine:
                rec.expected.reason += "; no earlier request reached this engine (per-engine caches)"
        observed = rec.observed_hit or 0
        if observed > 0:
            rec.outcome = "hit"
        elif rec.expected is not None and rec.expected.tokens == 0:
            rec.outcome = "miss-expected"
        else:
            rec.outcome = "miss"
        seen.append(rec)


def _overall(records: list[ProbeRecord], flag_on: bool | None) -> str:
    if flag_on is False:
        return "flag off"
    fixed = [r for r in records if r.name.startswith("fixed#") and r.ok]
    if len(fixed) < 2:  # without a first send and one repeat answered there is no miss to explain
        return "no answers"
    ids = [tuple(r.token_ids) for r in fixed if r.token_ids]
    lens = {r.prompt_tokens for r in fixed if r.prompt_tokens}
    if (ids and len(set(ids)) > 1) or len(lens) > 1:
        return "prefixes differ"
    repeats = fixed[1:]
    if any(r.outcome == "hit" for r in repeats):
        return "effective"
    if repeats and all(r.outcome == "miss-expected" for r in repeats):
        return "miss expected by the retention policy"
    return "unexplained miss"


def records_jsonl(report: ProbeReport) -> str:
    return "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in report.records)


def _line(r: ProbeRecord) -> str:
    exp = "" if r.expected is None else f", expected {r.expected.tokens}"
    ttft = "" if r.ttft_s is None else f", TTFT {r.ttft_s * 1000:.0f} ms"
    hit = "unknown" if r.observed_hit is None else f"{r.observed_hit:.0f}"
    return (
        f"{r.name}: {r.prompt_tokens} prompt tokens, engine {r.engine}, hit {hit} "
        f"(cached_tokens {r.cached_tokens}){exp}{ttft} -> {r.outcome}" + (f" [{r.error}]" if r.error else "")
    )


def _evidence(report: ProbeReport) -> list[str]:
    evidence = [_line(r) for r in report.records]
    if report.policy is not None:
        p = report.policy
        evidence.append(
            f"cache: block_size {p.block_size}, mamba_cache_mode {p.mamba_cache_mode}, retention interval {p.interval}"
            + (f" ({'; '.join(p.sources)})" if p.sources else "")
        )
    evidence.extend(report.notes)
    return evidence


def _effective(report: ProbeReport, evidence: list[str]) -> Finding:
    rep = next(r for r in report.records if r.name.startswith("fixed#") and r.outcome == "hit")
    return Finding(
        "CACHE-PROBE001",
        Severity.PASS,
        Category.PREFIX_CACHE,
        f"Prefix caching is effective: a repeat hit {rep.observed_hit:.0f} of {rep.prompt_tokens} prompt tokens",
        evidence,
    )


def _flag_off(report: ProbeReport, evidence: list[str]) -> Finding:
    return Finding(
        "CACHE-PROBE002",
        Severity.FAIL,
        Category.PREFIX_CACHE,
        "Prefix caching is off on the server (vllm:cache_config_info enable_prefix_caching=False)",
        evidence,
        [
            "Run `vllm-medic cache flag --launch ... --log ... --server URL` to find the layer that dropped the flag."
        ],
    )


def _prefixes_differ(report: ProbeReport, evidence: list[str]) -> Finding:
    return Finding(
        "CACHE-PROBE003",
        Severity.FAIL,
        Category.PREFIX_CACHE,
        "The same request does not tokenize the same way twice: the prefix changes between sends",
        evidence,
        ["Capture two of these requests and run `vllm-medic cache diff A.json B.json --server URL`."],
    )


def _miss_expected(report: ProbeReport, evidence: list[str]) -> Finding:
    return Finding(
        "CACHE-PROBE004",
        Severity.INFO,
        Category.PREFIX_CACHE,
        "Misses are expected here by the retention policy (hybrid checkpoints or per-engine caches)",
        evidence,
        [
            "Hybrid models reuse only checkpointed prefixes: keep prompt ends stable (multi-turn), or set "
            "VLLM_PREFIX_CACHE_RETENTION_INTERVAL to a smaller interval to add periodic checkpoints.",
            "With several DP engines, route requests of one conversation to the same engine (prefix-aware routing).",
        ],
    )


def _no_answers(report: ProbeReport, evidence: list[str]) -> Finding:
    failed = [r for r in report.records if r.name.startswith("fixed#") and not r.ok]
    first = next((r.error for r in failed if r.error), None) or "no error text"
    return Finding(
        "CACHE-PROBE007",
        Severity.FAIL,
        Category.PREFIX_CACHE,
        f"Cannot judge prefix caching: {len(failed)} of the fixed request's sends got no usable answer "
        f"(first: {first})",
        evidence,
        [
            "Send one chat request by hand (`curl -N URL/v1/chat/completions -d @req.json`) and check it "
            "streams `data:` events ending in `data: [DONE]`.",
            "If a proxy or gateway sits in front of vLLM, point the probe at vLLM itself.",
            "Run `vllm-medic accept URL --steps start,basic` to see what the server answers.",
        ],
    )


def _unexplained_miss(report: ProbeReport, evidence: list[str]) -> Finding:
    return Finding(
        "CACHE-PROBE005",
        Severity.FAIL,
        Category.PREFIX_CACHE,
        "Unexplained miss: identical requests did not hit the prefix cache",
        evidence,
        [
            "Capture next: the engine log of these requests (--logs), `vllm:kv_cache_usage_perc` and "
            "`vllm:num_preemptions` (eviction under memory pressure), and `vllm:cache_config_info`.",
            "Check every request reached the same engine (DP rank) and that nothing (a proxy, a gateway) rewrites it.",
            "If the prompt length sits exactly on a block boundary on a hybrid model, compare with vLLM issue #50235.",
        ],
    )


def _engines_finding(report: ProbeReport) -> Finding | None:
    engines = {r.engine for r in report.records if r.name.startswith("fixed#") and r.engine}
    if len(engines) <= 1:
        return None
    return Finding(
        "CACHE-PROBE006",
        Severity.WARN,
        Category.PREFIX_CACHE,
        f"Repeats of the fixed request reached {len(engines)} different engines: each engine has its own cache",
        [f"engines: {', '.join(sorted(engines))}"],
        ["Use prefix-aware routing (or session affinity) so a conversation stays on one engine."],
    )


# the overall verdict (``_overall``) -> its finding; any other verdict is an unexplained miss
_VERDICT_FINDINGS: dict[str, Callable[[ProbeReport, list[str]], Finding]] = {
    "effective": _effective,
    "flag off": _flag_off,
    "prefixes differ": _prefixes_differ,
    "miss expected by the retention policy": _miss_expected,
    "no answers": _no_answers,
}


def probe_findings(report: ProbeReport) -> list[Finding]:
    judge = _VERDICT_FINDINGS.get(report.verdict, _unexplained_miss)
    findings = [judge(report, _evidence(report))]
    engines = _engines_finding(report)
    return findings + ([engines] if engines else [])
