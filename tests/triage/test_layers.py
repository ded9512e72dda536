"""Layered classification through the public CLI (`triage --json`): signature -> family -> novelty ->
generic, phase from evidence, restart banners, lone 4xx runs. Lines are real ones from the public
reports named in data/families.yaml and SOURCES.md ("family growth")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vllm_medic.cli import app
from vllm_medic.triage.api import scan_text
from vllm_medic.triage.normalize import normalize_line
from vllm_medic.triage.novelty import load_healthy_model

ROOT = Path(__file__).resolve().parents[2]
NOISE = ROOT / "tests/data/triage/noise"
runner = CliRunner()


def _json(tmp_path: Path, text: str) -> dict:
    log = tmp_path / "x.log"
    log.write_text(text, encoding="utf-8")
    r = runner.invoke(app, ["triage", str(log), "--json"])
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)


SGLANG_DECODE_OOM = (
    "[2025-03-07 21:49:30 TP0] Decode batch, #running-req: 6, #token: 1920, token usage: 0.94, cuda graph: True, "
    "gen throughput (token/s): 446.45, #queue-req: 5,\n"
    "[2025-03-07 21:49:33 TP13] Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.1474 -> 0.1845\n"
)
LMCACHE_ALLOC = (
    "[2025-07-03 12:45:22,497] LMCache INFO: Storing KV cache for 3135 out of 3135 tokens (skip_leading_tokens=0) "
    "for request 11 (vllm_v1_adapter.py:761:lmcache.integration.vllm.vllm_v1_adapter)\n"
    "[2025-07-03 12:45:22,498] LMCache WARNING: Failed to allocate memory for the KV cache.\n"
    "The KV cache will not be stored. (cache_engine.py:200:lmcache.v1.cache_engine)\n"
)


def test_engine_decode_oom_without_error_marker_is_a_memory_family_root_at_runtime(tmp_path):
    d = _json(tmp_path, SGLANG_DECODE_OOM)
    rc = d["root_cause"]
    assert rc["line"] == 2 and rc["layer"] == "family" and rc["family"] == "memory"
    assert rc["category"] == "oom_runtime"
    assert "out of memory" in rc["why"]
    # SGLang's decode log with running requests above it is served-traffic evidence (blind round 7).
    assert rc["phase"]["value"] == "runtime" and rc["phase"]["evidenced"] is True
    assert "Decode batch" in rc["phase"]["evidence"][0]
    assert rc["confidence"] == 0.6  # a family root whose phase is evidenced keeps its confidence
    assert d["fix"] and any("max-num-seqs" in step for step in d["fix"])  # the category's ordered fix


def test_connector_warning_that_could_not_allocate_is_reached_and_classified(tmp_path):
    """A KV-offload connector that could not allocate is the cache machinery's failure (issue 10:
    "prefix-cache pool and KV-connector failures"), not GPU memory: its own word (`LMCache`) on the
    line outranks the memory words, and `why` says so."""
    rc = _json(tmp_path, LMCACHE_ALLOC)["root_cause"]
    assert rc["line"] == 2 and rc["layer"] == "family" and rc["family"] == "cache-machinery"
    assert rc["category"] == "prefix_cache"
    assert "outranks `memory`" in rc["why"] and "LMCache" in rc["why"]


@pytest.mark.parametrize(
    ("line", "category", "family"),
    [
        (
            "ValueError: The input size is not aligned with the quantized weight shape. This can be caused by too large tensor parallel size.",
            "parallel_layout",
            "parallel-layout",
        ),
        (
            "ValueError: token_to_kv_pool_allocator memory leak detected! full_available_size=6016, full_evictable_size=390685",
            "prefix_cache",
            "cache-machinery",
        ),
        (
            "RuntimeError: Aborted due to the lack of CPU swap space. Please increase the swap space to avoid this error.",
            "oom_runtime",
            "memory",
        ),
        (
            "RuntimeError: This flash attention build does not support headdim not being a multiple of 32.",
            "image_dependency",
            "kernel-arch",
        ),
        ("nixl._bindings.nixlBackendError: NIXL_ERR_BACKEND", "nccl_network", "collective-fabric"),
    ],
)
def test_family_layer_gives_the_category_and_the_words_that_decided(tmp_path, line, category, family):
    rc = _json(tmp_path, line + "\n")["root_cause"]
    assert (rc["layer"], rc["category"], rc["family"]) == ("family", category, family)
    assert "decided by" in rc["why"]


def test_lone_raise_line_of_a_cut_traceback_is_a_root(tmp_path):
    text = (
        "INFO 01-01 00:00:00 [core.py:1] Waiting for the engine\n"
        '    raise RuntimeError(f"NCCL error: {error_str}")\n'
    )
    rc = _json(tmp_path, text)["root_cause"]
    assert rc is not None and rc["line"] == 2 and rc["layer"] == "novelty"


def test_novel_failure_line_without_marker_is_reached(tmp_path):
    text = (
        "(APIServer pid=1) INFO 11-30 02:36:13 [api_utils.py:286] non-default args: {'model': 'm'}\n"
        "(EngineCore pid=2) WARNING 11-30 02:36:20 [frob.py:9] The frobnicator could not be initialised; continuing without it\n"
    )
    rc = _json(tmp_path, text)["root_cause"]
    assert rc["line"] == 2 and rc["layer"] == "novelty" and rc["category"] == "other"


def test_access_log_refusing_every_request_is_one_finding_with_the_count(tmp_path):
    lines = [
        f'INFO:     10.0.0.{i}:5{i:03d} - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request'
        for i in range(7)
    ]
    d = _json(tmp_path, "\n".join(lines) + "\n")
    rc = d["root_cause"]
    assert rc["signature"] == "access-4xx" and rc["line"] == 1 and "x7" in rc["title"]
    assert rc["confidence"] <= 0.3
    ok = _json(
        tmp_path,
        "\n".join([*lines, 'INFO:     10.0.0.9:5999 - "POST /v1/chat/completions HTTP/1.1" 200 OK']) + "\n",
    )
    assert ok["root_cause"] is None  # some requests succeeded: a signal, not the root
    assert [s["signature"] for s in ok["signals"]] == ["access-4xx"]


def test_phase_is_evidenced_by_frames_and_by_served_traffic(tmp_path):
    startup = (
        "Traceback (most recent call last):\n"
        '  File "/v/worker.py", line 1, in determine_available_memory\n'
        "    self.model_runner.profile_run()\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    rc = _json(tmp_path, startup)["root_cause"]
    assert rc["category"] == "oom_startup" and rc["phase"] == {
        "value": "startup",
        "evidence": [rc["phase"]["evidence"][0]],
        "evidenced": True,
    }
    assert "determine_available_memory" in rc["phase"]["evidence"][0]
    runtime = (
        'INFO:     127.0.0.1:5000 - "POST /v1/completions HTTP/1.1" 200 OK\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    rc = _json(tmp_path, runtime)["root_cause"]
    assert rc["category"] == "oom_runtime" and rc["phase"]["evidenced"] is True


def test_two_line_oom_excerpt_says_phase_not_evidenced(tmp_path):
    text = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 50.00 MiB.\nRuntimeError: engine died\n"
    d = _json(tmp_path, text)
    rc = d["root_cause"]
    assert rc["phase"]["evidenced"] is False and "phase not evidenced" in rc["phase_evidence"]
    assert rc["confidence"] < 0.9
    r = runner.invoke(app, ["triage", str(tmp_path / "x.log")])
    assert "phase not evidenced" in r.output and "layer signature" in r.output


def test_appended_log_judges_the_last_run_and_says_so(tmp_path):
    run = "(APIServer pid={p}) INFO 11-30 0{h}:00:00 [api_utils.py:286] non-default args: {{'model': 'm'}}\n"
    text = (
        run.format(p=1, h=1)
        + "(EngineCore pid=2) ERROR 11-30 01:00:05 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB\n"
        + run.format(p=3, h=2)
        + "(Worker_TP0 pid=4) ERROR 11-30 02:00:05 [x.py:1] RuntimeError: NCCL error: unhandled system error\n"
    )
    rc = _json(tmp_path, text)["root_cause"]
    assert rc["line"] == 4 and rc["category"] == "nccl_network"
    assert "judged the last run, from line 3" in rc["runs"]
    healthy_last = text.rsplit("(Worker_TP0", 1)[0]  # the second run shows no failure: the first one's stands
    rc = _json(tmp_path, healthy_last)["root_cause"]
    assert rc["line"] == 2 and rc["category"].startswith("oom_")


def test_terminal_output_shows_layer_and_why(tmp_path):
    log = tmp_path / "x.log"
    log.write_text(SGLANG_DECODE_OOM, encoding="utf-8")
    r = runner.invoke(app, ["triage", str(log)])
    assert r.exit_code == 1
    assert "layer family" in r.output and "why (family layer)" in r.output and "decided by" in r.output


@pytest.mark.parametrize("name", sorted(p.name for p in NOISE.glob("*.log")))
def test_real_healthy_logs_stay_healthy(name):
    """The real vLLM logs captured here: no root, and every line is a healthy template (the model
    was mined from them, so this checks the shipped matcher reproduces the miner)."""
    text = (NOISE / name).read_text(encoding="utf-8")
    assert scan_text(text, name).to_dict()["root_cause"] is None
    model = load_healthy_model()
    unmatched = [
        line
        for i, line in enumerate(text.splitlines(), 1)
        if not model.is_healthy(normalize_line(line, name, i).message)
    ]
    assert len(unmatched) <= len(text.splitlines()) // 50, unmatched[:5]


def test_shipped_templates_are_what_the_script_builds():
    pytest.importorskip("drain3")
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts/build_healthy_templates.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
