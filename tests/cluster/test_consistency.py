from vllm_medic.cluster.consistency import compare
from vllm_medic.snapshot import Driver, Gpu, RdmaPort, Snapshot, Vllm


def _node(driver="580.65.06", peermem=True, hca_up=("mlx5_0", "mlx5_1"), env=None) -> Snapshot:
    mods = ["nvidia", "mlx5_core", "mlx5_ib"] + (["nvidia_peermem"] if peermem else [])
    return Snapshot(
        driver=Driver(version=driver, cuda_version="13.0"),
        gpus=[Gpu(index=i, name="NVIDIA B300") for i in range(8)],
        vllm=Vllm(version="0.27.1", raw="0.27.1"),
        kernel_modules=mods,
        rdma=[
            RdmaPort(ib_dev=d, port=1, netdev=f"ib{i}", state="Up" if d in hca_up else "Down")
            for i, d in enumerate(("mlx5_0", "mlx5_1"))
        ],
        env=env or {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "UCX_TLS": "rc,cuda_copy"},
    )


def test_identical_nodes_have_no_findings_and_a_full_table():
    report = compare({"node-a": _node(), "node-b": _node()})
    assert report.findings == []
    assert any(r["fact"] == "driver version" and not r["differs"] for r in report.rows)


def test_differences_are_named_by_node():
    report = compare(
        {
            "node-a": _node(),
            "node-b": _node(),
            "node-c": _node(
                driver="575.57.08",
                peermem=False,
                hca_up=("mlx5_0",),
                env={"NCCL_IB_HCA": "mlx5_9", "UCX_TLS": "rc,cuda_copy"},
            ),
        }
    )
    ids = {f.id: f for f in report.findings}
    assert {"CLU001", "CLU010", "CLU011", "CLU012"} <= set(ids)
    assert ids["CLU001"].severity.value == "fail"
    assert any("575.57.08: node-c" in e for e in ids["CLU001"].evidence)
    assert any("580.65.06: node-a, node-b" in e for e in ids["CLU001"].evidence)
    assert any("NCCL_IB_HCA" in e and "node-c" in e for e in ids["CLU012"].evidence)
    row = next(r for r in report.rows if r["fact"] == "GPU/RDMA kernel modules")
    assert row["differs"] and "nvidia_peermem" not in row["values"]["node-c"]


def test_single_node_and_missing_facts_do_not_invent_differences():
    assert compare({"only": _node()}).findings == []
    missing = Snapshot()
    report = compare({"a": _node(), "b": missing})
    assert not any(f.id == "CLU001" for f in report.findings)
