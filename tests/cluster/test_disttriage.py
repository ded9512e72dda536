"""Triage across nodes: per-node verdicts merged on one corrected timeline."""

from __future__ import annotations

import pytest

from vllm_medic.cluster.disttriage import merge, parse_timestamp


def _node(sig, ts, text="x", offset=0.0):
    return {
        "result": {
            "root_cause": {
                "signature": sig,
                "timestamp": ts,
                "text": text,
                "confidence": 0.9,
                "category": "oom_runtime",
                "source": "vllm.log",
                "line": 2,
            },
            "cascade": [],
            "fix": [f"fix {sig}"],
            "docs": [],
            "sources": [{}],
        },
        "error": None,
        "clock_offset_s": offset,
    }


def test_timestamps_of_both_forms_parse():
    assert parse_timestamp("05-01 14:39:06").strftime("%m-%d %H:%M:%S") == "05-01 14:39:06"
    assert parse_timestamp("2026-11-30T02:01:46.123000+00:00").microsecond == 123000
    assert parse_timestamp("garbage") is None and parse_timestamp(None) is None


def test_earliest_corrected_root_wins_and_others_become_cascade():
    nodes = {"a": _node("CUDA_OOM", "05-01 14:39:06"), "b": _node("NCCL_WATCHDOG", "05-01 14:49:07")}
    merged = merge(nodes)
    assert merged["root_cause"]["node"] == "a" and merged["root_cause"]["signature"] == "CUDA_OOM"
    assert merged["fix"] == ["fix CUDA_OOM"]
    assert [c["node"] for c in merged["cascade"]] == ["b"]


def test_clock_offset_reorders_nodes():
    # b's clock runs 15 minutes behind ours: its 14:35 is really 14:50, after a's 14:39
    nodes = {
        "a": _node("CUDA_OOM", "05-01 14:39:06"),
        "b": _node("NCCL_WATCHDOG", "05-01 14:35:00", offset=-900.0),
    }
    assert merge(nodes)["root_cause"]["node"] == "a"
    nodes["b"]["clock_offset_s"] = 0.0
    assert merge(nodes)["root_cause"]["node"] == "b"


def test_nothing_found_and_failed_nodes_are_reported():
    merged = merge({"a": {"result": None, "error": "no log files", "clock_offset_s": None}})
    assert merged["root_cause"] is None and merged["nodes"][0]["error"] == "no log files"


@pytest.mark.slow
def test_triage_over_ray_names_the_root_on_the_right_node(ray_cluster):
    from vllm_medic.cluster.disttriage import triage_ray

    merged = triage_ray(ray_cluster.address, ["$VLLM_LOG_DIR/*.log"])
    assert len(merged["nodes"]) == 3
    root = merged["root_cause"]
    assert root is not None and root["category"] in ("oom_runtime", "oom_startup"), merged
    assert "OutOfMemoryError" in root["text"]
    assert any("Watchdog" in (c["first"]["text"] or "") for c in merged["cascade"]), merged["cascade"]


@pytest.mark.slow
def test_triage_cli_with_ray(ray_cluster):
    import json

    from typer.testing import CliRunner

    from vllm_medic.cli import app

    res = CliRunner().invoke(app, ["triage", "--ray", ray_cluster.address, "$VLLM_LOG_DIR/*.log", "--json"])
    assert res.exit_code == 1, res.output
    payload = json.loads(res.stdout)
    assert "OutOfMemoryError" in payload["root_cause"]["text"]
    assert payload["findings"][0]["severity"] == "fail"
    res = CliRunner().invoke(app, ["triage", "--ray", ray_cluster.address, "$VLLM_LOG_DIR/*.log"])
    assert res.exit_code == 1 and "Root cause" in res.output and "then on" in res.output
