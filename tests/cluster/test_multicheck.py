from vllm_medic.cluster.multicheck import fold
from vllm_medic.model import Finding


def test_identical_findings_fold_with_their_nodes():
    f = lambda ev: Finding("DRV001", "fail", "driver_cuda", "driver too old", [ev], ["upgrade"])  # noqa: E731
    out = fold({"a": [f("575.57.08")], "b": [f("575.57.08")], "c": []})
    assert len(out) == 1
    assert out[0].evidence[0] == "on a, b"
    assert out[0].evidence[1:] == ["[a] 575.57.08", "[b] 575.57.08"]
    everywhere = fold({"a": [f("x")], "b": [f("x")]})
    assert everywhere[0].evidence[0] == "on every node"
