"""Repetition as the anomaly (triage/repetition.py, data/repetition.yaml): a log that ends in one
wait/retry line printed over and over, when no other layer found a root. Healthy logs whose periodic
lines repeat (vLLM's throughput statistics, the bench's rank-file noise) never trigger it."""

from __future__ import annotations

import sys
from pathlib import Path

from triage_json import blind_case, found_root, root_cause

from vllm_medic.triage.repetition import rules, shape, trailing_run

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests/data/triage"
WAIT = "waiting for nvidia container stack to be setup"


def _bench():
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import gen_triage_noise
    finally:
        sys.path.pop(0)
    return gen_triage_noise


def test_gpu_operator_378_endless_validator_wait_is_the_root(tmp_path):
    case = blind_case("round15.jsonl", "gpu-operator-378")
    rc = found_root(tmp_path, case["log"])
    assert (rc["layer"], rc["line"], rc["category"]) == (
        "repetition",
        case["first_anomaly_line"],
        case["category"],
    )
    assert "7 times in a row" in rc["why"] and "88%" in rc["why"]


def test_a_wait_printed_a_few_times_then_done_is_healthy(tmp_path):
    assert root_cause(tmp_path, f"{WAIT}\n{WAIT}\n{WAIT}\nValidation completed successfully\n") is None
    assert root_cause(tmp_path, f"{WAIT}\n" * 3) is None  # below min_repeats


def test_the_run_must_end_the_log_and_be_most_of_it():
    r = rules()
    assert trailing_run([WAIT] * 6 + ["......"], r) is not None
    assert trailing_run([WAIT] * 6 + ["toolkit ready"], r) is None
    assert trailing_run(["other line"] * 7 + [WAIT] * 6, r) is None  # 46 % of the log
    assert shape("retrying in 5 s (attempt 3/10)") == shape("retrying in 10 s (attempt 4/10)")


def test_an_idle_vllm_printing_its_statistics_is_not_a_wait_loop(tmp_path):
    """vLLM V1's statistics (the bench's `_STATS`, `Waiting: N reqs`) and V0's real ones
    (`Pending: 0 reqs`, from tests/data/triage/healthy) repeated to the end of the log."""
    noise = _bench()
    stats = [
        noise._STATS.format(
            pid=7, ts=f"11-30 00:{i // 6:02d}:{i % 6}0", p=0.0, g=0.0, run=0, wait=0, kv=0.0, hit=41.5
        )
        for i in range(60)
    ]
    assert root_cause(tmp_path, "\n".join(stats) + "\n") is None
    v0 = [
        line
        for line in (DATA / "healthy/public-healthy-excerpts.log").read_text(encoding="utf-8").splitlines()
        if "Pending: 0 reqs" in line
    ]
    assert v0
    assert root_cause(tmp_path, "\n".join([v0[-1]] * 40) + "\n") is None


def test_bench_rank_file_noise_ending_in_statistics_stays_null(tmp_path):
    noise = _bench()
    out = tmp_path / "noise"
    noise.write_bench_set(out, total_bytes=2 << 20, ranks=2, root_cause="", seed=5, candidate_every=50)
    for f in sorted(out.glob("*.log")):
        with f.open("a", encoding="utf-8") as fh:
            for i in range(300):
                fh.write(
                    noise._STATS.format(
                        pid=1, ts="11-30 09:00:00", p=0.0, g=0.0, run=0, wait=i % 3, kv=0.0, hit=0.0
                    )
                    + "\n"
                )
    from typer.testing import CliRunner

    from vllm_medic.cli import app

    r = CliRunner().invoke(app, ["triage", str(out), "--json"])
    assert r.exit_code == 0, r.stdout


def test_a_stronger_root_wins_over_the_repetition(tmp_path):
    text = "RuntimeError: CUDA error: no CUDA-capable device is detected\n" + f"{WAIT}\n" * 20
    rc = found_root(tmp_path, text)
    assert rc["layer"] != "repetition" and rc["line"] == 1
