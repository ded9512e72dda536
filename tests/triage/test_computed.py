"""Computed checks (triage/computed.py, data/computed_checks.yaml): numbers compared on one line.

Each check's real examples must fire (or, marked `fires: false`, must not) through `triage --json`;
the blind cases the checks were written for get their labelled line; a bad check file is refused."""

from __future__ import annotations

import pytest
from triage_json import blind_case, found_root, root_cause

from vllm_medic.errors import UsageError
from vllm_medic.triage.computed import evaluate, load_checks, parse_checks, parse_side
from vllm_medic.triage.normalize import normalize_line

EXAMPLES = [(c.id, line, src, fires) for c in load_checks() for line, src, fires in c.examples]


@pytest.mark.parametrize(
    ("check_id", "line", "source", "fires"), EXAMPLES, ids=[f"{c}:{s}" for c, _, s, _ in EXAMPLES]
)
def test_each_example_fires_as_its_data_says(tmp_path, check_id, line, source, fires):
    """The check holds on each firing example (after the line's prefix is peeled) and `triage`
    reports that line in the check's category: as `computed`, or by a signature that claimed the
    line first (slime-1326 quotes the `invalid device ordinal` error on the same line)."""
    check = next(c for c in load_checks() if c.id == check_id)
    assert (evaluate(check, normalize_line(line).message) is not None) == fires, source
    rc = root_cause(tmp_path, line + "\n")
    if not fires:
        assert rc is None or rc["signature"] != f"computed-{check_id}", (source, rc)
        return
    assert rc is not None, f"{source}: no root"
    assert (rc["line"], rc["category"]) == (1, check.category), rc
    if rc["layer"] == "computed":
        assert rc["signature"] == f"computed-{check_id}" and f"`{check_id}`" in rc["why"], rc
    else:
        assert rc["layer"] == "signature", rc


@pytest.mark.parametrize(
    ("round_file", "case_id", "category", "quoted"),
    [
        ("round15.jsonl", "llama-cpp-18497", "prefix_cache", "117564 > 105330"),
        ("round15.jsonl", "llama-cpp-23013", "prefix_cache", "89583 > 85490"),
        ("round15.jsonl", "gpustack-2501", "parallel_layout", "visible = '0,1' (2 items): 2 >= 2"),
    ],
)
def test_blind_cases_get_their_line_with_the_values_quoted(tmp_path, round_file, case_id, category, quoted):
    case = blind_case(round_file, case_id)
    rc = found_root(tmp_path, case["log"])
    assert (rc["category"], rc["line"], rc["layer"]) == (category, case["first_anomaly_line"], "computed")
    assert quoted in rc["why"]


def test_the_line_stating_the_consequence_just_below_is_reported(tmp_path):
    """llama.cpp prints `forcing full prompt re-processing` right under the pos_min line: round 11
    labels that line (llama-cpp-20153), so the check's `stated_by` reports it, the check quoted."""
    case = blind_case("round11.jsonl", "llama-cpp-20153")
    rc = found_root(tmp_path, case["log"])
    assert (rc["layer"], rc["category"], rc["line"]) == (
        "computed",
        "prefix_cache",
        case["first_anomaly_line"],
    )
    assert "2774 > 69) on line 7; reported on line 8" in rc["why"]
    cut = "\n".join(case["log"].splitlines()[:7]) + "\n"  # the same log cut before that line
    assert found_root(tmp_path, cut)["line"] == 7


def test_the_comparison_decides_not_the_pattern():
    """The same shapes with numbers that are in order do not fire (gpustack-2501's line with a GPU
    index inside the two visible devices; llama-cpp-23269's with the cache reaching back to n_past)."""
    by_id = {c.id: c for c in load_checks()}
    gpu = by_id["gpu-id-outside-visible-devices"]
    line = "Context: self.device='cuda' self.gpu_id={} os.environ.get('CUDA_VISIBLE_DEVICES')='0,1' self.tp_rank=0"
    assert evaluate(gpu, line.format(2)) is not None
    assert evaluate(gpu, line.format(1)) is None
    pos = by_id["pos-min-beyond-n-past"]
    w = "slot update_slots: id  0 | task 533 | n_past = {}, slot.prompt.tokens.size() = 212, seq_id = 0, pos_min = 211, n_swa = {}"
    assert evaluate(pos, w.format(3, 0)) is not None
    assert evaluate(pos, w.format(211, 0)) is None  # pos_min == n_past: the prefix is there
    assert evaluate(pos, w.format(400, 128)) is None  # the kept state reaches back to n_past - n_swa
    assert evaluate(pos, w.format(300, 128)) is not None  # it does not: 211 > 172


def test_a_signature_still_claims_its_line_first(tmp_path):
    """A line a signature claims stays the signature's even when a check would hold on it."""
    text = (
        "torch.AcceleratorError: CUDA error: invalid device ordinal self.gpu_id=6 "
        "os.environ.get('CUDA_VISIBLE_DEVICES')='4,5,6,7'\n"
    )
    rc = found_root(tmp_path, text)
    assert rc["layer"] == "signature", rc


def test_expression_sides_and_bad_checks():
    assert [t.sign for t in parse_side("n_past - n_swa + 2")] == [1, -1, 1]
    with pytest.raises(ValueError):
        parse_side("n_past n_swa")
    good = {"id": "x", "category": "other", "pattern": "a=(?P<a>\\d+)", "compare": "a > 1"}
    assert parse_checks({"checks": [good]}, "t")[0].op == ">"
    for bad in (
        {**good, "compare": "a >> 1"},
        {**good, "compare": "b > 1"},  # a group the pattern lacks
        {**good, "category": "nope"},
        {**good, "pattern": "("},
    ):
        with pytest.raises(UsageError):
            parse_checks({"checks": [bad]}, "t")
