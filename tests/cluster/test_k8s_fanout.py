"""--k8s transport through a fake kubectl that really runs the shipped probe program per "pod"."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.cluster.conftest import B200_R575, BAD_LSMOD, FAKEBIN, GB300, GOOD_LSMOD, recordings
from typer.testing import CliRunner

from vllm_medic.cli import app

KUBECTL_DIR = Path(__file__).parent / "fakebin"


def test_collect_k8s_then_check_names_the_odd_pod(tmp_path, monkeypatch):
    good = recordings(tmp_path, "good", GB300, GOOD_LSMOD)
    bad = recordings(tmp_path, "bad", B200_R575, BAD_LSMOD)
    path = f"{FAKEBIN}{os.pathsep}{os.environ['PATH']}"
    pods = {
        "vllm-0": {"node": "gpu-a", "env": {"PATH": path, "FAKEBIN_DIR": str(good), "NCCL_IB_HCA": "mlx5_0"}},
        "vllm-1": {"node": "gpu-b", "env": {"PATH": path, "FAKEBIN_DIR": str(bad), "NCCL_IB_HCA": "mlx5_0"}},
        "vllm-2": {"node": "gpu-c", "env": {}, "phase": "Pending"},
    }
    (tmp_path / "pods.json").write_text(json.dumps(pods))
    monkeypatch.setenv("FAKE_K8S_PODS", str(tmp_path / "pods.json"))
    monkeypatch.setenv("PATH", f"{KUBECTL_DIR}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "bundle"
    runner = CliRunner()
    res = runner.invoke(app, ["collect", "--k8s", "app=vllm", "-o", str(out), "--timeout", "10"])
    assert res.exit_code == 0, res.output
    assert "vllm-0" in res.output and "vllm-1" in res.output and "vllm-2" not in res.output
    summary = json.loads((out / "cluster.json").read_text())
    assert [n["details"]["k8s_node"] for n in summary["nodes"]] == ["gpu-a", "gpu-b"]

    res = runner.invoke(app, ["check", "--from", str(out)])
    assert res.exit_code == 1
    assert "What differs between nodes" in res.output and "575.57.08" in res.output


def test_k8s_without_matching_pods_is_a_usage_error(tmp_path, monkeypatch):
    (tmp_path / "pods.json").write_text("{}")
    monkeypatch.setenv("FAKE_K8S_PODS", str(tmp_path / "pods.json"))
    monkeypatch.setenv("PATH", f"{KUBECTL_DIR}{os.pathsep}{os.environ['PATH']}")
    res = CliRunner().invoke(app, ["collect", "--k8s", "app=none", "-o", str(tmp_path / "b")])
    assert res.exit_code == 2 and "no Running pods" in res.output
