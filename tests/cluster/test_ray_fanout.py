"""Real Ray fan-out: several raylets on this machine (ray.cluster_utils.Cluster), one per simulated
node, each with its own environment; one node deliberately differs and `check` must catch it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pty_run import run_on_tty
from vllm_medic.cli import app

ray = pytest.importorskip("ray", reason="Ray is an optional extra (pip install 'vllm-medic[ray]')")
pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_collect_ray_gathers_every_node_and_check_names_the_odd_one(ray_cluster, tmp_path):
    out = tmp_path / "cluster-bundle"
    runner = CliRunner()
    # On a terminal, as a user runs it: the live line counts the nodes as they answer.
    exe = str(Path(sys.executable).with_name("vllm-medic"))
    code, text = run_on_tty(
        [exe, "collect", "--ray", ray_cluster.address, "-o", str(out), "--timeout", "10"], timeout_s=300
    )
    assert code == 0, text[-3000:]
    drawn = re.findall(
        r"collect via ray: (?:finding the nodes|nodes answered (\d+)/(\d+), failures (\d+))", text
    )
    assert drawn, text[-3000:]
    assert {p for _a, p, _f in drawn if p} <= {"3"}
    assert "(3/3 nodes collected)" in text
    summary = json.loads((out / "cluster.json").read_text())
    assert len(summary["nodes"]) == 3 and all(n["status"] == "ok" for n in summary["nodes"])
    for n in summary["nodes"]:
        assert (out / n["dir"] / "snapshot.json").is_file()

    res = runner.invoke(app, ["check", "--from", str(out), "--json"])
    assert res.exit_code == 1, res.output
    import traceback

    assert res.stdout.lstrip().startswith("{"), (
        "".join(traceback.format_exception(*res.exc_info)) if res.exc_info else res.output
    )
    payload = json.loads(res.stdout)
    ids = {f["id"]: f for f in payload["findings"]}
    assert "CLU001" in ids and "575.57.08" in " ".join(ids["CLU001"]["evidence"])
    assert "CLU011" in ids, [
        r for r in payload["cluster"]["rows"] if r["id"] == "CLU011"
    ]  # nvidia_peermem / mlx5 missing on one node
    assert "CLU012" in ids and "mlx5_9" in " ".join(ids["CLU012"]["evidence"])
    odd = [r for r in payload["cluster"]["rows"] if r["differs"]]
    assert odd, "the table of what differs must be present"
