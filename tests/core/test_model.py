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


def test_not_checked_never_fails_and_never_reads_as_all_good():
    from vllm_medic.model import worst_severity

    assert exit_code_for([_f("not_checked")], strict=True) is ExitCode.OK
    assert worst_severity([_f("pass"), _f("info"), _f("not_checked")]) is Severity.NOT_CHECKED
    assert worst_severity([_f("not_checked"), _f("warn")]) is Severity.WARN


def test_summary_counts_not_checked_apart():
    from vllm_medic.report.terminal import summary_line

    assert summary_line([_f("pass")]) == "• No issues found."
    line = summary_line([_f("pass"), _f("not_checked"), _f("not_checked")])
    assert "2 not checked" in line and "No issues found in what was checked" in line
    assert "1 failure(s)" in summary_line([_f("fail"), _f("not_checked")])


def test_junit_reports_not_checked_as_skipped():
    import xml.etree.ElementTree as ET

    from vllm_medic.report.junit import findings_to_junit

    root = ET.fromstring(
        findings_to_junit([_f("not_checked"), _f("fail", fid="Y")], "check").split("\n", 1)[1]
    )
    suite = root.find("testsuite")
    assert suite is not None and suite.get("skipped") == "1" and suite.get("failures") == "1"
    skipped = suite.find("testcase/skipped")
    assert skipped is not None and skipped.get("message", "").startswith("not checked:")


def test_partial_source_is_not_complete_and_round_trips():
    from vllm_medic.checks.facts import Facts
    from vllm_medic.snapshot import Snapshot, SourceError

    snap = Snapshot(partial={"lsmod": "filtered with grep"}, errors=[SourceError("ibdev2netdev", "missing")])
    assert (
        not snap.is_complete("lsmod") and not snap.is_complete("ibdev2netdev") and snap.is_complete("ip-link")
    )
    again = Snapshot.from_dict(snap.to_dict())
    assert again.partial == {"lsmod": "filtered with grep"}
    facts = Facts(snapshot=again)
    assert facts.incomplete("lsmod") == "lsmod: partial: filtered with grep"
    assert facts.incomplete("ibdev2netdev") == "ibdev2netdev: missing"
    assert facts.incomplete("ip-link") is None


def test_gpu_health_fields_round_trip_and_default_to_unknown():
    """ECC / remapped-row facts are None when not captured (never 0 / False by default)."""
    from vllm_medic.snapshot import Gpu, Snapshot

    assert Gpu(index=0).remapped_rows_pending is None and Gpu(index=0).ecc_volatile_uncorrectable is None
    snap = Snapshot(
        gpus=[
            Gpu(
                index=0,
                ecc_mode="Enabled",
                ecc_volatile_uncorrectable=2,
                ecc_aggregate_uncorrectable=5,
                remapped_rows_pending=True,
                remapped_rows_failure=False,
                retired_pages_pending=None,
            )
        ]
    )
    again = Snapshot.from_dict(snap.to_dict())
    g = again.gpus[0]
    assert (g.ecc_volatile_uncorrectable, g.ecc_aggregate_uncorrectable) == (2, 5)
    assert (g.remapped_rows_pending, g.remapped_rows_failure, g.retired_pages_pending) == (True, False, None)


def test_ib_ports_round_trip():
    from vllm_medic.snapshot import IbPort, Snapshot

    snap = Snapshot(
        ib_ports=[
            IbPort(
                device="mlx5_0",
                port=1,
                state="Active",
                physical_state="LinkUp",
                rate_gbps=400.0,
                link_layer="InfiniBand",
                netdev="ibp12s0",
            )
        ]
    )
    again = Snapshot.from_dict(snap.to_dict())
    assert again.ib_ports == snap.ib_ports
