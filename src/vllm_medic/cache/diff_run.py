"""`cache diff` orchestration: tokenize (server or local tokenizer), compare, and turn results into findings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vllm_medic.cache.diff import (
    common_prefix_len,
    diff_requests,
    fix_for,
    is_avoidable,
    render_for_local_tokenizer,
)
from vllm_medic.errors import UsageError
from vllm_medic.model import Category, Finding, Severity


def _load_local_tokenizer(path: Path) -> Any:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise UsageError(
            "--tokenizer needs the 'tokenizers' package: pip install 'vllm-medic[tokenizer]' (or use --server URL)"
        ) from exc
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        raise UsageError(f"--tokenizer {path}: no tokenizer.json there")
    try:
        return Tokenizer.from_file(str(file))
    except Exception as exc:  # noqa: BLE001 - the library raises bare Exceptions on bad files
        raise UsageError(f"--tokenizer {file}: cannot load it: {exc}") from exc


async def _server_tokenize(
    url: str, api_key: str | None, reqs: list[dict[str, Any]]
) -> tuple[list[list[int] | None], int | None, str]:
    from vllm_medic.serve.client import EndpointError, ServerClient

    out: list[list[int] | None] = []
    block: int | None = None
    note = ""
    async with ServerClient(url, api_key=api_key, timeout_s=120.0) as client:
        try:
            rows = (await client.metrics()).cache_config_info()
            if rows and rows[0].get("block_size", "").isdecimal():
                block = int(rows[0]["block_size"])
        except EndpointError as exc:
            note = f"block size not read from {url}/metrics: {exc}"
        for req in reqs:
            try:
                if "messages" in req:
                    res = await client.tokenize(messages=req["messages"], tools=req.get("tools"))
                else:
                    res = await client.tokenize(prompt=req["prompt"])
            except EndpointError as exc:
                return [None] * len(reqs), block, f"token counts unknown: {exc}"
            if res is None:
                return (
                    [None] * len(reqs),
                    block,
                    f"token counts unknown: {url} has no /tokenize endpoint (HTTP 404/405)",
                )
            out.append(res.tokens)
    return out, block, note


def _tokenize_all(
    reqs: list[dict[str, Any]], server: str | None, api_key: str | None, tokenizer: Path | None
) -> tuple[list[list[int] | None], int | None, str, str]:
    """Token ids per request, the server's block size, the token source and a note."""
    if server:
        import asyncio

        toks, block, note = asyncio.run(_server_tokenize(server, api_key, reqs))
        return toks, block, f"{server}/tokenize (chat template applied)", note
    if tokenizer:
        tok = _load_local_tokenizer(tokenizer)
        toks = [tok.encode(render_for_local_tokenizer(r), add_special_tokens=False).ids for r in reqs]
        return (
            toks,
            None,
            f"local tokenizer {tokenizer} (plain rendering, not the model's chat template: counts are approximate)",
            "",
        )
    return (
        [None] * len(reqs),
        None,
        "none",
        "token counts unknown: neither a server URL nor a local tokenizer file was given (structural diff only)",
    )


def compare_pairs(
    pairs: list[tuple[dict[str, Any], dict[str, Any]]],
    labels: list[str],
    *,
    server: str | None,
    api_key: str | None,
    tokenizer: Path | None,
    block_size: int | None,
) -> tuple[dict[str, Any], list[Finding]]:
    flat: list[dict[str, Any]] = []
    for x, y in pairs:
        flat.extend([x, y])
    toks, server_block, source, note = _tokenize_all(flat, server, api_key, tokenizer)
    block = block_size or server_block
    results: list[dict[str, Any]] = []
    findings: list[Finding] = []
    for n, ((a, b), label) in enumerate(zip(pairs, labels, strict=True)):
        ta, tb = toks[2 * n], toks[2 * n + 1]
        res = diff_requests(a, b)
        common = reusable = None
        first_tok: dict[str, Any] | None = None
        if ta is not None and tb is not None:
            common = common_prefix_len(ta, tb)
            if block:
                reusable = max(0, min(common, len(tb) - 1)) // block
            if common < min(len(ta), len(tb)):
                first_tok = {"index": common, "a": ta[common], "b": tb[common]}
        row = {
            "pair": label,
            "identical": res.identical and (ta == tb if ta is not None and tb is not None else True),
            "tokens_a": None if ta is None else len(ta),
            "tokens_b": None if tb is None else len(tb),
            "common_prefix_tokens": common,
            "block_size": block,
            "reusable_blocks": reusable,
            "first_differing_token": first_tok,
            "first_divergence": res.divergence.to_dict() if res.divergence else None,
            "likely_causes": res.likely_causes,
            "common_prefix_chars": res.common_prefix_chars,
        }
        results.append(row)
        findings.append(_finding(row, label))
    report: dict[str, Any] = {}
    headline = next((r for r in results if not r["identical"]), results[0])
    report.update({k: v for k, v in headline.items() if k != "pair"})
    report["tokens_from"] = source
    if note:
        report["note"] = note
        findings.append(
            Finding(
                "CACHE-DIFF004",
                Severity.WARN if server and note.startswith("token counts unknown") else Severity.INFO,
                Category.PREFIX_CACHE,
                note,
                [f"tokens from: {source}"],
            )
        )
    if len(results) > 1:
        report["pairs"] = results
    return report, findings


def _tok_text(row: dict[str, Any]) -> str:
    if row["common_prefix_tokens"] is None:
        return "token counts unknown"
    blocks = (
        ""
        if row["reusable_blocks"] is None
        else f", {row['reusable_blocks']} whole block(s) of {row['block_size']}"
    )
    return f"common prefix {row['common_prefix_tokens']:,} tokens of {row['tokens_a']:,} / {row['tokens_b']:,}{blocks}"


def _finding(row: dict[str, Any], label: str) -> Finding:
    if row["identical"]:
        return Finding(
            "CACHE-DIFF001",
            Severity.PASS,
            Category.PREFIX_CACHE,
            f"Identical prefixes: {label}",
            [_tok_text(row)],
        )
    d = row["first_divergence"] or {}
    where = f"{d.get('field')} (message {d.get('message_index')}, role {d.get('role')}) at character {d.get('char_offset')}"
    evidence = [
        f"first divergence: {where}",
        f"A: …{d.get('a', '')!r}…",
        f"B: …{d.get('b', '')!r}…",
        _tok_text(row),
    ]
    if row["first_differing_token"]:
        t = row["first_differing_token"]
        evidence.append(f"first differing token #{t['index']}: {t['a']} vs {t['b']}")
    causes = row["likely_causes"]
    if is_avoidable(causes) or "tool definitions changed" in causes:
        return Finding(
            "CACHE-DIFF002",
            Severity.FAIL,
            Category.PREFIX_CACHE,
            f"Prefix breaks early ({', '.join(causes)}): {label}",
            evidence,
            fix_for(causes)
            + [
                "Re-run `vllm-medic cache diff` on two captured requests until the shared part is token-identical."
            ],
        )
    return Finding(
        "CACHE-DIFF003",
        Severity.INFO,
        Category.PREFIX_CACHE,
        f"Prefixes diverge where the content changes ({where}): {label}",
        evidence,
        [
            "Only the part before this point can be reused; that is expected when the conversation itself differs."
        ],
    )
