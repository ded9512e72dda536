"""`check`, `rules` through the public CLI, on real captured bundles and on snapshot files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from vllm_medic.checks.api import load_rules
from vllm_medic.cli import app

BUNDLES = Path(__file__).parents[1] / "data" / "checks" / "bundles"
runner = CliRunner()

K3_LAUNCH = "vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code"


def run(*args: str):
    return runner.invoke(app, list(args))


def findings(res) -> dict[str, dict]:
    data = json.loads(res.stdout)
    return {f["id"]: f for f in data["findings"]}


def good_b300_snapshot(tmp_path: Path) -> Path:
    """SYNTHETIC snapshot: 8x B300 on r580, the K3 launch without --enable-prefix-caching."""
    snap = {
        "driver": {"version": "580.65.06", "cuda_version": "13.0", "status": "ok"},
        "gpus": [
            {"index": i, "name": "NVIDIA B300 SXM6 AC", "memory_total_mib": 275040, "memory_used_mib": 0}
            for i in range(8)
        ],
        "launch": {
            "source": "argv",
            "argv": K3_LAUNCH.split(),
            "args": {"tensor_parallel_size": 8, "trust_remote_code": True, "model": "moonshotai/Kimi-K3"},
        },
        "vllm": {"version": "0.29.0", "raw": "0.29.0"},
    }
    p = tmp_path / "snapshot.json"
    p.write_text(json.dumps(snap))
    return p


def test_k3_on_an_r575_b200_bundle(tmp_path):
    junit = tmp_path / "check.xml"
    res = run(
        "check",
        "--from",
        str(BUNDLES / "b200-r575-k3"),
        "--recipe",
        "kimi-k3",
        "--json",
        "--junit",
        str(junit),
    )
    assert res.exit_code == 1, res.output
    fs = findings(res)
    drv = fs["DRV002"]
    assert drv["severity"] == "fail" and len(drv["fix"]) == 2
    assert "nvidia-smi.txt:2 Driver Version: 575.57.08" in drv["evidence"]
    assert fs["LAY001"]["severity"] == "fail" and fs["LAY002"]["severity"] == "fail"  # 8x B200 < 16
    assert fs["NET004"]["severity"] == "fail"  # NCCL_DMABUF_ENABLE=0 in the launch, lsmod without peermem
    assert fs["PFX001"]["severity"] == "warn"
    assert fs["IMG001"]["severity"] == "pass"  # vllm/vllm-openai:kimi-k3 from the docker run line
    assert "launch.txt:2 launch image vllm/vllm-openai:kimi-k3" in fs["IMG001"]["evidence"]
    assert "launch.txt:2 launch env NCCL_DMABUF_ENABLE=0" in fs["NET004"]["evidence"]
    assert fs["LAY003"]["evidence"][0].startswith("launch.txt:3: TP 8")
    xml = junit.read_text()
    assert "<testsuite" in xml and 'failures="4"' in xml and "DRV002" in xml


@pytest.mark.parametrize(
    ("bundle", "needle"),
    [("no-driver", "dkms"), ("nvml-mismatch", "reboot")],
)
def test_driver_failure_bundles_make_drv001_the_first_finding(bundle, needle):
    res = run("check", "--from", str(BUNDLES / bundle), "--json")
    assert res.exit_code == 1
    first = json.loads(res.stdout)["findings"][0]
    assert first["id"] == "DRV001" and first["severity"] == "fail"
    assert any(needle in step.lower() for step in first["fix"])


def test_mismatch_evidence_names_both_versions():
    res = run("check", "--from", str(BUNDLES / "nvml-mismatch"), "--json")
    ev = " ".join(findings(res)["DRV001"]["evidence"])
    assert "NVML library version 570.124" in ev
    res = run("check", "--from", str(BUNDLES / "nvml-mismatch-580"), "--json")
    ev = " ".join(findings(res)["DRV001"]["evidence"])
    assert "NVML library version 580.178; kernel module 580.173.02" in ev


def test_strict_turns_warnings_into_exit_1(tmp_path):
    snap = good_b300_snapshot(tmp_path)
    res = run("check", "--snapshot", str(snap), "--recipe", "kimi-k3", "--json")
    assert res.exit_code == 0, res.output
    assert findings(res)["PFX001"]["severity"] == "warn"
    res = run("check", "--snapshot", str(snap), "--recipe", "kimi-k3", "--strict")
    assert res.exit_code == 1
    assert "[!]" in res.stdout and "--enable-prefix-caching" in res.stdout


def test_launch_option_overrides_the_snapshot(tmp_path):
    snap = good_b300_snapshot(tmp_path)
    res = run(
        "check",
        "--snapshot",
        str(snap),
        "--recipe",
        "kimi-k3",
        "--json",
        "--launch",
        K3_LAUNCH + " --enable-prefix-caching",
    )
    assert findings(res)["PFX001"]["severity"] == "pass"
    script = tmp_path / "serve.sh"
    script.write_text("#!/bin/sh\nexec vllm serve moonshotai/Kimi-K3 -tp 16\n")
    res = run("check", "--snapshot", str(snap), "--recipe", "kimi-k3", "--json", "--launch", str(script))
    fs = findings(res)
    assert fs["IMG006"]["severity"] == "fail"  # the script lacks --trust-remote-code
    assert fs["LAY003"]["severity"] == "fail"  # TP 16 on 8 GPUs, single node


def test_model_config_decides_the_architecture(tmp_path):
    snap = good_b300_snapshot(tmp_path)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["KimiK3ForConditionalGeneration"]}))
    res = run("check", "--snapshot", str(snap), "--recipe", "kimi-k3", "--model", str(model), "--json")
    assert findings(res)["IMG004"]["severity"] == "pass"
    (model / "config.json").write_text("{not json")
    res = run("check", "--snapshot", str(snap), "--model", str(model))
    assert res.exit_code == 2


def test_official_recipe_path_works_with_check(tmp_path):
    official = (
        Path(__file__).parents[1]
        / "data"
        / "checks"
        / "official-recipes"
        / "models"
        / "moonshotai"
        / "Kimi-K3.yaml"
    )
    res = run("check", "--snapshot", str(good_b300_snapshot(tmp_path)), "--recipe", str(official), "--json")
    data = json.loads(res.stdout)
    assert data["recipe"]["origin"] == "official"
    floors = {f["id"]: f for f in data["findings"]}["IMG003"]["evidence"]
    assert any("Kimi-K3.yaml: model.min_vllm_version" in e for e in floors)


@pytest.mark.parametrize(
    "args",
    [
        ["check", "--from", "/nonexistent/bundle"],
        ["check", "--snapshot", "/nonexistent/snapshot.json"],
        ["check", "--from", ".", "--snapshot", "x.json"],
        ["check", "--snapshot", "README.md"],
        ["check", "--snapshot", "pyproject.toml", "--recipe", "no-such-recipe"],
    ],
)
def test_bad_input_is_a_usage_error(args):
    res = run(*args)
    assert res.exit_code == 2, res.output


def test_secrets_in_the_launch_never_reach_the_output(tmp_path):
    snap = good_b300_snapshot(tmp_path)
    secret = "sk-proj-abcdefghijklmnop1234567890"
    res = run("check", "--snapshot", str(snap), "--json", "--launch", f"{K3_LAUNCH} --api-key {secret}")
    assert res.exit_code in (0, 1)
    assert secret not in res.stdout


def test_rules_catalogue():
    res = run("rules", "--json")
    assert res.exit_code == 0
    rules = json.loads(res.stdout)["rules"]
    assert [r["id"] for r in rules] == [r.id for r in load_rules()]
    assert all(r["why"] and r["fix"] and r["category"] for r in rules)
    text = run("rules").stdout
    assert all(r["id"] in text for r in rules) and "why:" in text


def test_minor_version_compatibility_on_a_real_a100_r555_table():
    res = run("check", "--from", str(BUNDLES / "a100-555-cu128"), "--json")
    assert res.exit_code == 0  # a warning, not a failure
    drv = findings(res)["DRV002"]
    assert drv["severity"] == "warn"
    ev = " ".join(drv["evidence"])
    assert "nvidia-smi.txt:2 Driver Version: 555.42.02" in ev
    assert "docker-image-inspect.json:8" in ev and "CUDA_VERSION=12.8.1" in ev
    assert ">= 570.26" in ev and "PTX" in ev


# ---------------------------------------------------------------- no ✓ without evidence


def test_check_from_an_empty_directory_prints_no_pass(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    res = run("check", "--from", str(empty))
    assert res.exit_code == 2 and "✓" not in res.output and "no captured outputs" in res.output


def test_check_from_empty_captures_prints_no_pass_and_counts_not_checked_apart(tmp_path):
    """Every core capture present but empty (a collection that produced nothing): no ✓ anywhere."""
    d = tmp_path / "captured"
    d.mkdir()
    for name in ("nvidia-smi.txt", "nvidia-smi-topo-m.txt", "lsmod.txt", "ibdev2netdev.txt", "env.txt"):
        (d / name).write_text("")
    (d / "docker-image-inspect.json").write_text("[]\n")
    for recipe in ("generic", "kimi-k3"):
        res = run("check", "--from", str(d), "--recipe", recipe)
        assert res.exit_code == 0, res.output
        assert "✓" not in res.output, res.output
        assert "[?]" in res.output and "not checked (missing evidence" in res.output
        res = run("check", "--from", str(d), "--recipe", recipe, "--json")
        data = json.loads(res.stdout)
        counts = data["counts"]
        assert set(counts) == {"pass", "not_checked", "info", "warn", "fail"}
        assert counts["pass"] == 0 and counts["not_checked"] >= 20
        assert sum(counts.values()) == len(data["findings"]) == len(load_rules())
        assert counts["not_checked"] == sum(f["severity"] == "not_checked" for f in data["findings"])


def test_not_checked_findings_say_what_was_missing_and_how_to_capture_it(tmp_path):
    d = tmp_path / "captured"
    d.mkdir()
    (d / "nvidia-smi.txt").write_text((BUNDLES / "b200-r575-k3" / "nvidia-smi.txt").read_text())
    res = run("check", "--from", str(d), "--json")
    by_id = findings(res)
    net5 = by_id["NET005"]
    assert net5["severity"] == "not_checked"
    assert any("lsmod" in e for e in net5["evidence"]) and "Capture it:" in net5["fix"][-1]
    rule_by_id = {r.id: r for r in load_rules()}
    for f in by_id.values():
        if f["severity"] == "not_checked":
            assert f["evidence"], f
            assert rule_by_id[f["id"]].by_hand in f["fix"][-1], f


def test_every_rule_names_the_command_that_captures_its_evidence():
    assert all(r.by_hand for r in load_rules())
