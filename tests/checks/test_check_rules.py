"""Each rule with a passing and a failing fixture, through the public API (`run_checks`).

Fixtures are SYNTHETIC `Snapshot`s whose values follow real outputs (tests/data/checks/SOURCES.md).
"""

from __future__ import annotations

import pytest

from vllm_medic.checks.api import RULES, load_rules, run_checks
from vllm_medic.collect.launch import parse_launch
from vllm_medic.model import Category, Finding
from vllm_medic.recipes import load_recipe
from vllm_medic.snapshot import (
    Driver,
    Gpu,
    GpuProcess,
    GpuVisibility,
    Image,
    RdmaPort,
    Snapshot,
    SourceError,
    Toolkit,
    Topology,
    Torch,
    Vllm,
)

K3 = load_recipe("kimi-k3")
GENERIC = load_recipe("generic")


def snap(
    *,
    driver: str | None = "580.65.06",
    cuda: str | None = "13.0",
    gpu: str = "NVIDIA B300 SXM6 AC",
    n: int = 8,
    mem: int = 275040,
    used: int = 0,
    launch: str | None = None,
    env: dict[str, str] | None = None,
    **kw,
) -> Snapshot:
    s = Snapshot(
        driver=Driver(version=driver, cuda_version=cuda, status="ok" if driver else "unknown"),
        gpus=[Gpu(index=i, name=gpu, memory_total_mib=mem, memory_used_mib=used) for i in range(n)],
        env=dict(env or {}),
    )
    if launch is not None:
        s.launch = parse_launch(launch)
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def one(findings: list[Finding], rule_id: str) -> Finding:
    hits = [f for f in findings if f.id == rule_id]
    assert len(hits) == 1, [f.id for f in findings]
    return hits[0]


def check(s: Snapshot, recipe=K3, **kw) -> list[Finding]:
    return run_checks(s, recipe, **kw)


K3_GOOD = "vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code --enable-prefix-caching"


# ---------------------------------------------------------------- registry


def test_registry_orders_rules_by_method_and_ids_are_unique():
    rules = load_rules()
    ids = [r.id for r in rules]
    assert len(ids) == len(set(ids)) >= 20
    orders = [r.category.order for r in rules]
    assert orders == sorted(orders)
    assert rules[0].category is Category.DRIVER_CUDA and rules[-1].category is Category.OTHER
    assert [r.category for r in rules if r.category is not Category.OTHER][-1] is Category.PREFIX_CACHE
    assert all(r.title and r.why and r.fix for r in RULES)


def test_every_rule_reports_exactly_once_even_on_an_empty_snapshot():
    findings = check(Snapshot())
    assert sorted(f.id for f in findings) == sorted(r.id for r in load_rules())
    # nothing known: nothing passes; a rule says what it could not check, or that it does not apply
    assert {f.severity.value for f in findings} <= {"not_checked", "info"}


def test_a_crashing_rule_becomes_a_warning_not_a_crash(monkeypatch):
    from vllm_medic.checks import registry

    def boom(facts, recipe, rule):
        raise RuntimeError("kaput")

    registry.rule("TST999", "other", "test rule", "why", ["fix"])(boom)
    try:
        f = one(check(Snapshot()), "TST999")
        assert f.severity.value == "warn" and "kaput" in f.evidence[0]
    finally:
        registry.RULES[:] = [r for r in registry.RULES if r.id != "TST999"]


# ---------------------------------------------------------------- driver_cuda


@pytest.mark.parametrize(
    ("status", "detail", "err", "needle"),
    [
        ("not_found", "nvidia-smi is not on PATH", SourceError("nvidia-smi", "missing"), "--gpus all"),
        ("no_driver", "couldn't communicate with the NVIDIA driver", None, "dkms"),
        ("version_mismatch", "Driver/library version mismatch", None, "reboot"),
        ("hung", "timed out after 10s", SourceError("nvidia-smi", "timeout"), "xid"),
    ],
)
def test_drv001_failure_modes(status, detail, err, needle):
    s = Snapshot(driver=Driver(status=status, status_detail=detail), errors=[err] if err else [])
    f = one(check(s), "DRV001")
    assert f.severity.value == "fail"
    assert any(needle in step.lower() for step in f.fix), f.fix


def test_drv001_pass():
    f = one(check(snap()), "DRV001")
    assert f.severity.value == "pass" and "580.65.06" in f.title


def test_drv002_r575_host_with_cu130_k3_image_gives_exactly_the_two_compliant_paths():
    s = snap(
        driver="575.57.08",
        cuda="12.9",
        launch="docker run --gpus all vllm/vllm-openai:kimi-k3 " + K3_GOOD[11:],
    )
    f = one(check(s), "DRV002")
    assert f.severity.value == "fail"
    assert len(f.fix) == 2
    assert "580.65.06" in f.fix[0] and "cu129 PyTorch" in f.fix[1]
    assert any("575.57.08" in e for e in f.evidence)


def test_drv002_uses_nvidias_table_for_the_image_cuda():
    # generic recipe: CUDA 12.8 image on 550 (12.4) driver: within 12.x minor compatibility -> warn
    s = snap(
        driver="550.54.15", cuda="12.4", image=Image(tag="vllm/vllm-openai:v0.9.0", cuda_version="12.8.1")
    )
    f = one(check(s, GENERIC), "DRV002")
    assert f.severity.value == "warn" and "570.26" in " ".join(f.evidence)
    # CUDA 13.0 image on a 12.x driver -> below the 13.x family floor -> fail with the forward-compat path
    s = snap(
        driver="570.124.06", cuda="12.8", image=Image(tag="vllm/vllm-openai:v0.29.0", cuda_version="13.0.2")
    )
    f = one(check(s, GENERIC), "DRV002")
    assert f.severity.value == "fail"
    assert any("cuda-compat" in step for step in f.fix)
    # new enough -> pass
    s = snap(
        driver="580.82.07", cuda="13.0", image=Image(tag="vllm/vllm-openai:v0.29.0", cuda_version="13.0.1")
    )
    assert one(check(s, GENERIC), "DRV002").severity.value == "pass"


def test_drv003_toolkit_is_not_the_driver():
    s = snap(driver="575.57.08", cuda="12.9", toolkit=Toolkit(nvcc_version="13.0.48"))
    f = one(check(s), "DRV003")
    assert f.severity.value == "warn" and "13.0" in f.title
    s = snap(driver="580.65.06", cuda="13.0", toolkit=Toolkit(nvcc_version="12.8.93"))
    assert one(check(s), "DRV003").severity.value == "pass"


def test_drv004_mixed_cuda_wheels():
    s = snap()
    s.python.packages = {"torch": "2.9.0"}
    s.python.cuda_userspace = {
        "12": ["nvidia-cublas-cu12==12.8.4.1"],
        "13": ["nvidia-cublas-cu13==13.0.0.19"],
    }
    f = one(check(s), "DRV004")
    assert f.severity.value == "fail" and "nvidia-cublas" in " ".join(f.evidence)
    s.python.cuda_userspace = {"13": ["nvidia-cublas-cu13==13.0.0.19", "nvidia-nccl-cu13==2.28.3"]}
    assert one(check(s), "DRV004").severity.value == "pass"


def test_drv005_torch_cuda_newer_than_driver():
    s = snap(driver="535.104.05", cuda="12.2")
    s.python.torch = Torch(version="2.9.0+cu130", cuda="13.0")
    assert one(check(s), "DRV005").severity.value == "fail"
    s.python.torch = Torch(version="2.5.1+cu121", cuda="12.1")
    assert one(check(s), "DRV005").severity.value == "pass"


# ---------------------------------------------------------------- image_dependency


@pytest.mark.parametrize(
    ("image", "needle"),
    [
        ("vllm/vllm-openai:kimi-k3-cu129", "does not exist"),
        ("vllm/vllm-openai_rocm:kimi-k3", "vllm-openai-rocm"),
    ],
)
def test_img001_known_bad_tags(image, needle):
    f = one(check(snap(image=Image(tag=image))), "IMG001")
    assert f.severity.value == "fail"
    assert needle in " ".join([f.title, *f.evidence, *f.fix])


def test_img001_recipe_image_passes():
    assert one(check(snap(image=Image(tag="vllm/vllm-openai:kimi-k3"))), "IMG001").severity.value == "pass"


@pytest.mark.parametrize("image", ["vllm/vllm-openai:latest", "vllm/vllm-openai:nightly", "vllm/vllm-openai"])
def test_img002_floating_tags_are_unverified(image):
    f = one(check(snap(image=Image(tag=image)), GENERIC), "IMG002")
    assert f.severity.value == "warn"


def test_img002_cu129_build_for_cu130_recipe_and_pinned_pass():
    s = snap(vllm=Vllm(version="0.27.1", raw="0.27.1+cu129", variant="cu129"))
    assert one(check(s), "IMG002").severity.value == "warn"
    s = snap(image=Image(tag="vllm/vllm-openai:v0.29.0", digest="sha256:c2914767605584b6d8f4"))
    f = one(check(s, GENERIC), "IMG002")
    assert f.severity.value == "pass" and any("sha256:" in e for e in f.evidence)


def test_img003_both_floors_with_sources():
    f = one(check(snap(vllm=Vllm(version="0.26.0", raw="0.26.0"))), "IMG003")
    assert f.severity.value == "fail"
    text = " ".join(f.evidence)
    assert "0.27.1" in text and "0.27.0" in text and "blog" in text and "recipe" in text
    f = one(check(snap(vllm=Vllm(version="0.27.0", raw="0.27.0"))), "IMG003")
    assert f.severity.value == "warn"  # meets the article's floor, not the recipe's
    assert one(check(snap(vllm=Vllm(version="0.29.0", raw="0.29.0"))), "IMG003").severity.value == "pass"
    dev = one(check(snap(vllm=Vllm(version="0.1", raw="0.1.dev19262+gb6bbf29dd.d20260727"))), "IMG003")
    assert dev.severity.value == "not_checked"


def test_img004_architecture_from_config():
    cfg = {"architectures": ["KimiK3ForConditionalGeneration"]}
    old = one(check(snap(vllm=Vllm(version="0.26.0")), model_config=cfg), "IMG004")
    assert old.severity.value == "fail"
    new = one(check(snap(vllm=Vllm(version="0.29.0")), model_config=cfg), "IMG004")
    assert new.severity.value == "pass"
    unknown = one(
        check(snap(vllm=Vllm(version="0.29.0")), model_config={"architectures": ["FooForCausalLM"]}), "IMG004"
    )
    assert unknown.severity.value == "not_checked"  # only decides when it really knows the registry


def test_img005_torch_cuda_vs_image():
    s = snap(image=Image(tag="vllm/vllm-openai:kimi-k3", cuda_version="13.0.1"))
    s.python.torch = Torch(version="2.8.0+cu128", cuda="12.8")
    assert one(check(s), "IMG005").severity.value == "fail"
    s.python.torch = Torch(version="2.9.0+cu130", cuda="13.0")
    assert one(check(s), "IMG005").severity.value == "pass"


def test_img006_trust_remote_code():
    f = one(check(snap(launch="vllm serve moonshotai/Kimi-K3 -tp 8")), "IMG006")
    assert f.severity.value == "fail" and "--trust-remote-code" in f.title
    assert one(check(snap(launch=K3_GOOD)), "IMG006").severity.value == "pass"


# ---------------------------------------------------------------- layout / startup memory


def test_lay001_gpu_baselines():
    f = one(check(snap(gpu="NVIDIA B200", mem=183359, launch=K3_GOOD)), "LAY001")
    assert f.severity.value == "fail" and "16" in f.title
    f = one(check(snap(gpu="NVIDIA H200", mem=143771, launch=K3_GOOD + " --nnodes 2")), "LAY001")
    assert f.severity.value == "pass"
    f = one(check(snap(gpu="NVIDIA H100 80GB HBM3", mem=81559, launch=K3_GOOD + " --nnodes 2")), "LAY001")
    assert f.severity.value == "fail" and "32" in f.title
    assert one(check(snap(launch=K3_GOOD)), "LAY001").severity.value == "pass"  # 8x B300
    f = one(check(snap(gpu="NVIDIA A10G", mem=23028, launch=K3_GOOD)), "LAY001")
    assert f.severity.value == "warn"  # not in the recipe's hardware


def test_lay002_weights_vs_memory():
    f = one(check(snap(gpu="NVIDIA H200", mem=143771, launch=K3_GOOD)), "LAY002")
    assert f.severity.value == "fail" and "1680" in f.title
    assert one(check(snap(launch=K3_GOOD)), "LAY002").severity.value == "pass"  # 8 x 268 GB


def test_lay003_parallel_layout():
    f = one(check(snap(n=8, launch="vllm serve m -tp 8 -pp 2")), "LAY003")
    assert f.severity.value == "fail"
    f = one(check(snap(n=8, launch="vllm serve m -tp 8 -pp 2 --nnodes 2")), "LAY003")
    assert f.severity.value == "pass"
    f = one(check(snap(n=8, launch="vllm serve m -tp 1 -dp 16 -dpl 8 --enable-expert-parallel")), "LAY003")
    assert f.severity.value == "pass" and any("EP size" in e for e in f.evidence)
    f = one(check(snap(n=8, launch="vllm serve m -tp 16 --distributed-executor-backend ray")), "LAY003")
    assert f.severity.value == "warn" and "multi-node executor" in f.title  # Ray may span nodes: not a fail
    f = one(check(snap(n=8, launch="vllm serve m -tp 8", env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})), "LAY003")
    assert f.severity.value == "fail" and "4 are visible" in f.title


def test_lay004_other_processes_hold_memory():
    s = snap(gpu="NVIDIA H200", mem=143771, used=84474)
    s.gpu_processes = [
        GpuProcess(gpu_index=0, pid=915920, name="...niconda3/envs/vllm/bin/python", used_mib=84464)
    ]
    f = one(check(s), "LAY004")
    assert f.severity.value == "fail" and any("915920" in e for e in f.evidence)
    assert one(check(snap()), "LAY004").severity.value == "pass"


def test_lay005_server_sees_fewer_gpus():
    s = snap(n=8, launch="docker run --gpus '\"device=0,1\"' vllm/vllm-openai:kimi-k3 m -tp 8")
    f = one(check(s), "LAY005")
    assert f.severity.value == "warn" and "2 of 8" in f.title
    s = snap(n=8, launch="docker run --gpus '\"device=0,1\"' vllm/vllm-openai:kimi-k3 m -tp 2")
    assert one(check(s), "LAY005").severity.value == "info"  # the layout fits: a deliberate partition
    assert (
        one(check(snap(n=8, gpu_visibility=GpuVisibility(host_gpu_count=8))), "LAY005").severity.value
        == "pass"
    )
    assert (
        one(check(snap(n=4, gpu_visibility=GpuVisibility(host_gpu_count=8))), "LAY005").severity.value
        == "warn"
    )


# ---------------------------------------------------------------- nccl_network

RDMA_PORTS = [RdmaPort(ib_dev=f"mlx5_{i}", port=1, netdev=f"ib{i}", state="Up") for i in range(4)]
DEP_RDMA = "vllm serve moonshotai/Kimi-K3 -tp 1 -dp 16 -dpl 8 --enable-expert-parallel --trust-remote-code"


def test_net001_all2all_backend_vs_interconnect():
    s = snap(launch=DEP_RDMA + " --all2all-backend flashinfer_nvlink_one_sided", rdma=RDMA_PORTS)
    assert one(check(s), "NET001").severity.value == "fail"
    s = snap(launch=DEP_RDMA + " --all2all-backend naive", rdma=RDMA_PORTS)
    f = one(check(s), "NET001")
    assert f.severity.value == "warn" and "deepep_v2" in f.title
    s = snap(launch=DEP_RDMA + " --all2all-backend deepep_v2", rdma=RDMA_PORTS)
    assert one(check(s), "NET001").severity.value == "pass"
    s = snap(gpu="NVIDIA GB300", launch=DEP_RDMA + " --all2all-backend flashinfer_nvlink_one_sided")
    assert one(check(s), "NET001").severity.value == "pass"
    # TP8 x PP2 + EP over two nodes: the EP group (8 ranks) stays in a node, only PP crosses
    tp_pp_ep = (
        "vllm serve moonshotai/Kimi-K3 -tp 8 -pp 2 --nnodes 2 --enable-expert-parallel --trust-remote-code"
    )
    s = snap(launch=tp_pp_ep + " --all2all-backend flashinfer_nvlink_one_sided", rdma=RDMA_PORTS)
    f = one(check(s), "NET001")
    assert f.severity.value == "pass" and "fits one node of 8" in " ".join(f.evidence)
    # TP8 x DP2 + EP: the EP group of 16 crosses the nodes
    tp_dp_ep = "vllm serve moonshotai/Kimi-K3 -tp 8 -dp 2 -dpl 1 --enable-expert-parallel --trust-remote-code"
    s = snap(launch=tp_dp_ep + " --all2all-backend flashinfer_nvlink_one_sided", rdma=RDMA_PORTS)
    assert one(check(s), "NET001").severity.value == "fail"


def test_net002_mega_moe_misplaced():
    s = snap(launch=DEP_RDMA + " --all2all-backend deep_gemm_mega_moe", rdma=RDMA_PORTS)
    f = one(check(s), "NET002")
    assert f.severity.value == "fail" and "--moe-backend" in f.title
    s = snap(launch=DEP_RDMA + " --moe-backend deep_gemm_mega_moe", rdma=RDMA_PORTS)
    assert one(check(s), "NET002").severity.value == "fail"
    s = snap(gpu="NVIDIA GB300", launch=DEP_RDMA + " --moe-backend deep_gemm_mega_moe")
    assert one(check(s), "NET002").severity.value == "pass"


PD_PREFILL = (
    "vllm serve moonshotai/Kimi-K3 -tp 8 --enable-expert-parallel --trust-remote-code "
    '--kv-transfer-config \'{"kv_connector":"NixlConnector","kv_role":"kv_producer"}\''
)


def test_net003_ucx_tls_on_rdma_only_for_pd_disaggregation():
    s = snap(launch=PD_PREFILL, rdma=RDMA_PORTS)
    assert one(check(s), "NET003").severity.value == "warn"
    s = snap(launch=PD_PREFILL, rdma=RDMA_PORTS, env={"UCX_TLS": "tcp,cuda_copy"})
    assert one(check(s), "NET003").severity.value == "warn"
    s = snap(launch="UCX_TLS=rc,cuda_copy " + PD_PREFILL, rdma=RDMA_PORTS)
    assert one(check(s), "NET003").severity.value == "pass"
    # the recipe sets UCX_TLS only in the pd_cluster profile: an aggregated DEP launch does not need it
    f = one(check(snap(launch=DEP_RDMA, rdma=RDMA_PORTS)), "NET003")
    assert f.severity.value == "info" and "pd_cluster only" in f.title  # does not apply: nothing was checked
    assert "strategy multi_node_dep" in " ".join(f.evidence)


def test_net004_dmabuf_off_needs_peermem():
    s = snap(env={"NCCL_DMABUF_ENABLE": "0"}, kernel_modules=["nvidia", "mlx5_core", "mlx5_ib"])
    f = one(check(s), "NET004")
    assert f.severity.value == "fail" and "nvidia_peermem" in f.title
    s.kernel_modules.append("nvidia_peermem")
    assert one(check(s), "NET004").severity.value == "pass"
    s = snap(
        env={"NCCL_DMABUF_ENABLE": "0"}, errors=[SourceError("lsmod", "missing", "lsmod: command not found")]
    )
    assert one(check(s), "NET004").severity.value == "not_checked"


def test_net005_mlx5_modules():
    s = snap(rdma=RDMA_PORTS, kernel_modules=["nvidia", "mlx5_core"])
    f = one(check(s), "NET005")
    assert f.severity.value == "fail" and "mlx5_ib" in f.title
    s = snap(rdma=RDMA_PORTS, kernel_modules=["nvidia", "mlx5_core", "mlx5_ib"])
    assert one(check(s), "NET005").severity.value == "pass"


def test_net006_rdma_ports_down():
    ports = RDMA_PORTS[:2] + [RdmaPort(ib_dev="mlx5_2", port=1, netdev="ens12f1np1", state="Down")]
    f = one(check(snap(rdma=ports)), "NET006")
    assert f.severity.value == "warn" and "mlx5_2" in " ".join(f.evidence)
    down = [RdmaPort(ib_dev="mlx5_0", port=1, netdev="ens1np0", state="Down")]
    assert one(check(snap(rdma=down, launch=DEP_RDMA)), "NET006").severity.value == "fail"
    # an IPoIB netdev (Down) says nothing about the InfiniBand link: not checked, not a warning
    ipoib = [RdmaPort(ib_dev="mlx5_0", port=1, netdev="ib0", state="Down")]
    assert one(check(snap(rdma=ipoib, launch=DEP_RDMA)), "NET006").severity.value == "not_checked"
    assert one(check(snap(rdma=RDMA_PORTS)), "NET006").severity.value == "pass"


def test_net007_nvlink_and_rdma_settings_mixed():
    s = snap(
        launch="UCX_TLS=rc,cuda_copy " + DEP_RDMA + " --all2all-backend flashinfer_nvlink_one_sided",
        rdma=RDMA_PORTS,
    )
    assert one(check(s), "NET007").severity.value == "warn"
    s = snap(launch="UCX_TLS=rc,cuda_copy " + DEP_RDMA + " --all2all-backend deepep_v2", rdma=RDMA_PORTS)
    assert one(check(s), "NET007").severity.value == "pass"


def test_topology_nvlink_and_nic_legend_are_read():
    topo = Topology(
        devices=["GPU0", "GPU1", "NIC0"],
        matrix={"GPU0": {"GPU0": "X", "GPU1": "NV18", "NIC0": "PIX"}, "GPU1": {"GPU0": "NV18", "GPU1": "X"}},
        nic_legend={"NIC0": "mlx5_0"},
    )
    s = snap(topology=topo, kernel_modules=["nvidia"])
    f = one(check(s), "NET005")  # the NIC legend alone reveals an mlx5 device
    assert f.severity.value == "fail"


# ---------------------------------------------------------------- prefix_cache


def test_pfx001_k3_needs_explicit_flag():
    f = one(check(snap(launch="vllm serve moonshotai/Kimi-K3 -tp 8 --trust-remote-code")), "PFX001")
    assert f.severity.value == "warn" and "OFF" in f.title
    assert one(check(snap(launch=K3_GOOD)), "PFX001").severity.value == "pass"
    f = one(check(snap(launch=K3_GOOD.replace("--enable", "--no-enable"))), "PFX001")
    assert f.severity.value == "info"


def test_pfx001_generic_hybrid_from_config_and_plain_models():
    cfg = {"architectures": ["Qwen3NextForCausalLM"], "layer_types": ["linear_attention", "full_attention"]}
    f = one(
        check(snap(launch="vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct -tp 4"), GENERIC, model_config=cfg),
        "PFX001",
    )
    assert f.severity.value == "warn"
    f = one(check(snap(launch="vllm serve meta-llama/Llama-3.3-70B-Instruct -tp 4"), GENERIC), "PFX001")
    assert f.severity.value == "not_checked"  # no config.json: the model's default is not known
    cfg = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 80}
    f = one(
        check(snap(launch="vllm serve meta-llama/Llama-3.3-70B-Instruct -tp 4"), GENERIC, model_config=cfg),
        "PFX001",
    )
    assert f.severity.value == "pass"


# ---------------------------------------------------------------- official recipe profile

OFFICIAL_K3 = load_recipe(
    str(
        __import__("pathlib").Path(__file__).parents[1]
        / "data/checks/official-recipes/models/moonshotai/Kimi-K3.yaml"
    )
)
BLACKWELL_PROFILE = (
    "VLLM_ENGINE_READY_TIMEOUT_S=3600 VLLM_USE_V2_MODEL_RUNNER=1 VLLM_USE_RUST_FRONTEND=1 "
    "VLLM_ALLREDUCE_USE_FLASHINFER=1 vllm serve moonshotai/Kimi-K3 -tp 8 --trust-remote-code "
    "--gpu-memory-utilization 0.95 --load-format fastsafetensors --no-enable-flashinfer-autotune "
    "--max-model-len 1048576 --kv-cache-dtype fp8 "
    '--attention-config \'{"use_prefill_query_quantization":true,"mla_prefill_backend":"flashinfer"}\' '
    "--enable-prefix-caching"
)


def test_rec001_launch_vs_official_profile():
    f = one(check(snap(launch=BLACKWELL_PROFILE), OFFICIAL_K3), "REC001")
    assert f.severity.value == "pass", f.evidence
    f = one(check(snap(launch=K3_GOOD), OFFICIAL_K3), "REC001")
    assert f.severity.value == "info"
    text = " ".join(f.evidence)
    assert (
        "missing --load-format fastsafetensors" in text
        and "missing env VLLM_ENGINE_READY_TIMEOUT_S=3600" in text
    )
    assert "--no-enable-flashinfer-autotune" in text
    # hopper profile on H200: different layer, different expectations
    f = one(check(snap(gpu="NVIDIA H200", mem=143771, launch=BLACKWELL_PROFILE), OFFICIAL_K3), "REC001")
    assert "hardware_overrides.hopper" in " ".join(f.evidence) and "--moe-backend" in " ".join(f.evidence)


def test_rec001_strategy_not_supported_on_hardware():
    f = one(check(snap(launch=K3_GOOD), OFFICIAL_K3, strategy="multi_node_tp_dp"), "REC001")
    assert f.severity.value == "warn"
    f = one(
        check(snap(gpu="NVIDIA H200", mem=143771, launch=K3_GOOD), OFFICIAL_K3, strategy="multi_node_tp_dp"),
        "REC001",
    )
    assert f.severity.value != "warn"  # strategy_hardware grants it on h200
    assert one(check(snap(launch=K3_GOOD)), "REC001").severity.value == "info"  # shipped recipe: no profile


def test_net008_mnnvl_env_on_gb300():
    launch = DEP_RDMA.replace("-dpl 8", "-dpl 4")
    f = one(check(snap(gpu="NVIDIA GB300", n=4, launch=launch)), "NET008")
    assert f.severity.value == "warn" and "NCCL_MNNVL_ENABLE=1" in f.title
    env = "NCCL_MNNVL_ENABLE=1 NCCL_CUMEM_ENABLE=1 NCCL_NVLS_ENABLE=1 "
    assert one(check(snap(gpu="NVIDIA GB300", n=4, launch=env + launch)), "NET008").severity.value == "pass"
    assert (
        one(check(snap(launch=DEP_RDMA, rdma=RDMA_PORTS)), "NET008").severity.value == "pass"
    )  # B300 + RDMA


def test_amd_hardware_skips_nvidia_driver_checks():
    fs = check(Snapshot(), hardware="mi355x")
    assert one(fs, "DRV001").severity.value == "info" and "AMD" in one(fs, "DRV001").title
    assert one(fs, "DRV002").severity.value == "info"  # does not apply: nothing passed


def test_drv002_without_an_image_uses_torchs_cuda():
    s = snap(driver="550.54.15", cuda="12.4")
    s.python.torch = Torch(version="2.9.0+cu130", cuda="13.0")
    f = one(check(s, GENERIC), "DRV002")
    assert f.severity.value == "fail" and any("torch 2.9.0+cu130" in e for e in f.evidence)


def test_pfx001_known_hybrid_by_model_id_and_real_kimi_linear_config():
    import json
    from pathlib import Path

    f = one(check(snap(launch="vllm serve Qwen/Qwen3-Next-80B-A3B-Instruct -tp 4"), GENERIC), "PFX001")
    assert f.severity.value == "warn" and any("*Qwen3-Next*" in e for e in f.evidence)
    cfg = json.loads((Path(__file__).parents[1] / "data/checks/models/kimi-linear/config.json").read_text())
    f = one(check(snap(launch="vllm serve /models/kl -tp 4"), GENERIC, model_config=cfg), "PFX001")
    assert f.severity.value == "warn" and any("linear_attn_config" in e for e in f.evidence)


# ---------------------------------------------------------------- strategy from the launch's topology

K3_TP8_PP2_2NODES = "vllm serve moonshotai/Kimi-K3 -tp 8 -pp 2 --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --trust-remote-code"


def test_rec001_two_node_tp8_pp2_is_multi_node_tp_pp_not_the_default_strategy():
    s = snap(gpu="NVIDIA H200", mem=143771, launch=K3_TP8_PP2_2NODES)
    f = one(check(s, OFFICIAL_K3), "REC001")
    text = " ".join(f.evidence)
    assert "strategy multi_node_tp_pp: detected from the launch" in text and "single_node_tp" not in text
    assert "strategy_overrides.multi_node_tp_pp" in text
    # the world size alone says it spans nodes: no --nnodes, 8 GPUs per node, TP 8 x PP 2 = 16
    s = snap(
        gpu="NVIDIA H200", mem=143771, launch="vllm serve moonshotai/Kimi-K3 -tp 8 -pp 2 --trust-remote-code"
    )
    assert "strategy multi_node_tp_pp" in " ".join(one(check(s, OFFICIAL_K3), "REC001").evidence)


def test_rec001_shows_the_resolved_value_not_the_layered_list():
    # base 0.95, multi_node_tp_pp 0.90, hopper 0.97: on H200 the value that applies is 0.97 (last layer wins)
    f = one(check(snap(gpu="NVIDIA H200", mem=143771, launch=K3_TP8_PP2_2NODES), OFFICIAL_K3), "REC001")
    line = next(e for e in f.evidence if "--gpu-memory-utilization" in e)
    assert line.startswith("missing --gpu-memory-utilization 0.97 (hardware_overrides.hopper;")
    assert "[0.95" not in " ".join(f.evidence)
    # on Blackwell the strategy's 0.90 wins over the base 0.95 (the blackwell block sets none)
    f = one(check(snap(gpu="NVIDIA B200", mem=183359, launch=K3_TP8_PP2_2NODES), OFFICIAL_K3), "REC001")
    line = next(e for e in f.evidence if "--gpu-memory-utilization" in e)
    assert line.startswith("missing --gpu-memory-utilization 0.9 (strategy_overrides.multi_node_tp_pp;")
    # a launch that repeats the flag is read as vLLM reads it: the last value
    launch = K3_TP8_PP2_2NODES + " --gpu-memory-utilization 0.5 --gpu-memory-utilization 0.97"
    f = one(check(snap(gpu="NVIDIA H200", mem=143771, launch=launch), OFFICIAL_K3), "REC001")
    assert not any("--gpu-memory-utilization" in e for e in f.evidence[4:])


def test_rec001_pd_decode_role_gets_the_decode_profile():
    launch = (
        "vllm serve moonshotai/Kimi-K3 -tp 1 -dp 8 --enable-expert-parallel --trust-remote-code "
        '--kv-transfer-config \'{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}\''
    )
    f = one(check(snap(launch=launch), OFFICIAL_K3), "REC001")
    text = " ".join(f.evidence)
    assert "strategy pd_cluster" in text and "strategy_overrides.pd_cluster.decode" in text
    assert "missing --no-enable-prefix-caching" in text and "missing env UCX_TLS=rc,cuda_copy" in text


def test_rec002_max_model_len_vs_the_hardware_profiles_kv_budget():
    # Hopper profile: --max-model-len 32768; without the flag vLLM takes K3's 1,048,576-token context
    h200 = {"gpu": "NVIDIA H200", "mem": 143771}
    f = one(check(snap(**h200, launch=K3_TP8_PP2_2NODES), OFFICIAL_K3), "REC002")
    assert f.severity.value == "fail" and f.category is Category.OOM_STARTUP
    assert "1,048,576" in f.title and "32,768" in f.title and "hopper" in f.title
    assert f.fix[0].startswith("Pass --max-model-len 32768")
    f = one(check(snap(**h200, launch=K3_TP8_PP2_2NODES + " --max-model-len 32768"), OFFICIAL_K3), "REC002")
    assert f.severity.value == "pass"
    # Blackwell profile: 1M with fp8 KV is what the recipe verified
    b200 = {"gpu": "NVIDIA B200", "mem": 183359}
    f = one(check(snap(**b200, launch=K3_TP8_PP2_2NODES + " --max-model-len 1048576"), OFFICIAL_K3), "REC002")
    assert f.severity.value == "pass"
    # shipped recipe, no profile and no config.json: not checked, with what to supply
    f = one(check(snap(**h200, launch=K3_TP8_PP2_2NODES)), "REC002")
    assert f.severity.value == "not_checked" and "--model" in f.fix[0]


def test_rec002_computes_the_limit_from_a_config():
    import json
    from pathlib import Path

    cfg = json.loads((Path(__file__).parents[1] / "data/plan/llama-3.1-8b.config.json").read_text())
    h100 = {"gpu": "NVIDIA H100 80GB HBM3", "mem": 81559, "n": 1}
    launch = "vllm serve meta-llama/Llama-3.1-8B -tp 1 --max-model-len 1000000"
    f = one(check(snap(**h100, launch=launch), GENERIC, model_config=cfg), "REC002")
    assert f.severity.value == "fail" and "131,072 KV bytes per token" in " ".join(f.evidence)
    limit = int(f.title.rsplit("at most ", 1)[1].split()[0].replace(",", ""))
    assert f.fix[0] == f"Pass --max-model-len {limit} (what this KV cache holds)."
    f = one(
        check(snap(**h100, launch="vllm serve meta-llama/Llama-3.1-8B"), GENERIC, model_config=cfg), "REC002"
    )
    assert f.severity.value == "pass" and "131,072-token" in f.title  # max_position_embeddings
