"""The cascade and signal entries of a verdict are typed records (triage/cascade_entry.py) whose
``to_json`` is the entry `triage --json` has always printed: the same keys in the same order, the
quoted line redacted; the root's repeat is the root's own entry with its count less one."""

from __future__ import annotations

import json

from vllm_medic.triage.api import scan_text
from vllm_medic.triage.cascade_entry import CascadeEntry, FirstSeen

ENTRY_KEYS = ["signature", "role", "category", "title", "count", "ranks", "sources", "summary", "first"]
FIRST_KEYS = ["source", "line", "text", "rank", "timestamp"]
TOKEN = "hf_abcdefghijklmnopqrstuvwxyz0123"

DMABUF = "[2026-11-30 02:01:5{r}] node-a:201:300 [0] transport/net_ib.cc:520 NCCL WARN NET/IB : mlx5dv_reg_dmabuf_mr failed errno 524"
DIED = (
    "(Worker_TP{r} pid=20{r}) ERROR 11-30 02:02:0{r} [multiproc_executor.py:700] "
    "Worker proc VllmWorker-{r} died unexpectedly, shutting down executor. HF_TOKEN=" + TOKEN
)


def _log() -> str:
    lines = [DMABUF.format(r=r) for r in (0, 1)] + [DIED.format(r=r) for r in range(3)]
    return "\n".join(lines) + "\n"


def test_cascade_entries_print_as_before_with_the_line_redacted() -> None:
    result = scan_text(_log(), source="ranks.log")
    out = result.to_dict()
    assert out["root_cause"]["signature"] == "nccl-dmabuf-524"
    repeat, died = out["cascade"][:2]
    for entry in out["cascade"]:
        assert list(entry) == ENTRY_KEYS and list(entry["first"]) == FIRST_KEYS
    assert died["signature"] == "worker-died" and died["count"] == 3
    assert TOKEN not in json.dumps(out["cascade"])
    assert TOKEN in result.verdict.cascade[1].first.text  # the verdict keeps the line as read
    assert repeat["role"] == "repeat" and repeat["count"] == 1
    assert repeat["title"] == "same signature as the root cause"
    assert repeat["first"]["line"] == out["root_cause"]["line"] == 1


def test_to_json_is_the_entry_as_a_dict() -> None:
    entry = CascadeEntry(
        "worker-died", "cascade", "other", "A worker died", 2, [0, 1], ["a.log"], "x2 similar on ranks 0–1",
        FirstSeen("a.log", 7, f"died token={TOKEN}", 0, None),
    )  # fmt: skip
    got = entry.to_json()
    assert list(got) == ENTRY_KEYS and got["ranks"] == [0, 1] and got["first"]["line"] == 7
    assert TOKEN not in got["first"]["text"] and got["first"]["text"].startswith("died token=")
