"""Ray is an optional extra: without it the cluster commands say how to get it (exit 2)."""

import sys

from typer.testing import CliRunner

from vllm_medic.cli import app


def test_collect_ray_without_ray_says_how_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    res = CliRunner().invoke(app, ["collect", "--ray", "auto", "-o", str(tmp_path / "b")])
    assert res.exit_code == 2
    assert "pip install 'vllm-medic[ray]'" in res.output


def test_distributed_load_without_ray_says_how_to_install(monkeypatch):
    import pytest

    from vllm_medic.cluster.distload import ClientSpec, DistributedLoad
    from vllm_medic.errors import UsageError

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(UsageError, match=r"vllm-medic\[ray\]"):
        DistributedLoad(ClientSpec("http://127.0.0.1:9"), workers=2)
