from vllm_medic.model import Category, ExitCode, Finding, Severity, exit_code_for, sort_by_method


def _f(sev: str, cat: str = "other", fid: str = "X001") -> Finding:
    return Finding(id=fid, severity=Severity(sev), category=Category(cat), title="t")


def test_exit_codes_follow_policy():
    assert exit_code_for([]) is ExitCode.OK
    assert exit_code_for([_f("pass"), _f("info")]) is ExitCode.OK
    assert exit_code_for([_f("warn")]) is ExitCode.OK
    assert exit_code_for([_f("warn")], strict=True) is ExitCode.FINDINGS
    assert exit_code_for([_f("fail")]) is ExitCode.FINDINGS


def test_round_trip_and_method_order():
    f = Finding(
        "DRV001", "fail", "driver_cuda", "old driver", ["driver 575.57.08"], ["upgrade"], ["https://x"]
    )
    assert Finding.from_dict(f.to_dict()) == f
    ordered = sort_by_method(
        [_f("warn", "prefix_cache", "C"), _f("fail", "nccl_network", "B"), _f("info", "driver_cuda", "A")]
    )
    assert [x.id for x in ordered] == ["A", "B", "C"]


def test_category_vocabulary_is_fixed():
    assert [c.value for c in Category] == [
        "driver_cuda",
        "image_dependency",
        "oom_startup",
        "oom_runtime",
        "parallel_layout",
        "nccl_network",
        "prefix_cache",
        "other",
    ]
