"""The environment verdict's cross-checks: archive vs live server, one mismatch per fact (pure judgement)."""

from __future__ import annotations

from vllm_medic.accept.environment import cross_check, summarise
from vllm_medic.collect.launch import parse_launch
from vllm_medic.snapshot import Gpu, Snapshot, Vllm

LAUNCH = (
    "vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 8 --max-model-len 32768 --no-enable-prefix-caching"
)


def _snapshot(gpus: int = 8) -> Snapshot:
    snap = Snapshot(vllm=Vllm(version="0.23.0", raw="0.23.0+cu129"))
    snap.launch = parse_launch(LAUNCH, source="argv")
    snap.gpus = [Gpu(index=i, name="NVIDIA H200") for i in range(gpus)]
    return snap


def _server(**over: object) -> dict:
    server = {
        "vllm_version": "0.23.0",
        "models": [{"id": "moonshotai/Kimi-K3", "max_model_len": 32768}],
        "cache_config_info": [{"engine": "0", "enable_prefix_caching": "False", "block_size": "16"}],
    }
    server.update(over)
    return server


def test_an_archive_that_matches_the_server_has_no_mismatch():
    assert cross_check(_snapshot(), _server()) == []


def test_each_mismatch_is_a_fail_with_both_sides_quoted():
    found = cross_check(
        _snapshot(gpus=4),
        _server(
            vllm_version="0.32.0",
            models=[{"id": "sim-model", "max_model_len": 4096}],
            cache_config_info=[{"engine": "0", "enable_prefix_caching": "True"}],
        ),
    )
    by_id = {f.id: f for f in found}
    assert sorted(by_id) == ["ACC-ENV-010", "ACC-ENV-011", "ACC-ENV-012", "ACC-ENV-013", "ACC-ENV-014"]
    assert all(f.severity.value == "fail" and f.fix for f in found)
    assert by_id["ACC-ENV-010"].evidence == ["snapshot vllm.version: 0.23.0", "GET /version: 0.32.0"]
    assert "enable_prefix_caching=True" in by_id["ACC-ENV-011"].evidence[1]
    assert "--no-enable-prefix-caching" in by_id["ACC-ENV-011"].title
    assert "4096" in by_id["ACC-ENV-013"].title and "32768" in by_id["ACC-ENV-013"].title
    assert "needs 8 GPUs" in by_id["ACC-ENV-014"].title and "shows 4" in by_id["ACC-ENV-014"].title
    env = summarise([], found, "generic", "bundle x")
    assert env["status"] == "fail" and env["counts"]["fail"] == 5


def test_a_launch_silent_on_prefix_caching_is_not_a_mismatch():
    snap = _snapshot()
    snap.launch = parse_launch(LAUNCH.replace(" --no-enable-prefix-caching", ""), source="argv")
    server = _server(cache_config_info=[{"engine": "0", "enable_prefix_caching": "True"}])
    assert cross_check(snap, server) == []  # vLLM V1 turns it on by default: no contradiction
