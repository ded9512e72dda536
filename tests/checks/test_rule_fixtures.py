"""Every rule id has a passing and a failing fixture, found by id (FIXTURES below).

A new rule without an entry fails `test_every_rule_has_fixtures`; each entry builds the evidence the rule
reads (SYNTHETIC snapshots whose values follow real outputs, and real captures from tests/data where the
rule quotes file lines) and the test runs the whole registry over it through `run_checks`. The passing
fixture must pass with evidence quoted; the failing one must give a warn or fail.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from vllm_medic.checks.api import load_rules, run_checks
from vllm_medic.collect.launch import parse_launch
from vllm_medic.model import Severity
from vllm_medic.recipes import load_recipe
from vllm_medic.snapshot import (
    Driver,
    Gpu,
    Image,
    PackageOrigin,
    RdmaPort,
    Snapshot,
    Toolkit,
    Topology,
    Torch,
    Vllm,
)

DATA = Path(__file__).parents[1] / "data"
K3 = load_recipe("kimi-k3")
GENERIC = load_recipe("generic")
OFFICIAL_K3 = load_recipe(str(DATA / "checks/official-recipes/models/moonshotai/Kimi-K3.yaml"))
K3_LAUNCH = "vllm serve moonshotai/Kimi-K3 -tp 8 --trust-remote-code --enable-prefix-caching"
DEP_RDMA = "vllm serve moonshotai/Kimi-K3 -tp 1 -dp 16 -dpl 8 --enable-expert-parallel --trust-remote-code"
PD_PREFILL = (  # P/D disaggregation: the strategy the recipe sets UCX_TLS for
    "vllm serve moonshotai/Kimi-K3 -tp 8 --enable-expert-parallel --trust-remote-code "
    '--kv-transfer-config \'{"kv_connector":"NixlConnector","kv_role":"kv_producer"}\''
)
K3_TP8_PP2_2NODES = "vllm serve moonshotai/Kimi-K3 -tp 8 -pp 2 --nnodes 2 --node-rank 0 --trust-remote-code"
B300 = "NVIDIA B300 SXM6 AC"
RDMA_UP = [RdmaPort(ib_dev=f"mlx5_{i}", port=1, netdev=f"ens{i}np0", state="Up") for i in range(4)]
BLACKWELL_PROFILE = (
    "VLLM_ENGINE_READY_TIMEOUT_S=3600 VLLM_USE_V2_MODEL_RUNNER=1 VLLM_USE_RUST_FRONTEND=1 "
    "VLLM_ALLREDUCE_USE_FLASHINFER=1 vllm serve moonshotai/Kimi-K3 -tp 8 --trust-remote-code "
    "--gpu-memory-utilization 0.95 --load-format fastsafetensors --no-enable-flashinfer-autotune "
    "--max-model-len 1048576 --kv-cache-dtype fp8 "
    '--attention-config \'{"use_prefill_query_quantization":true,"mla_prefill_backend":"flashinfer"}\' '
    "--enable-prefix-caching"
)


def _text(rel: str) -> bytes:
    return (DATA / rel).read_bytes()


@dataclass
class Case:
    snapshot: Snapshot
    recipe: Any = field(default_factory=lambda: K3)
    kw: dict[str, Any] = field(default_factory=dict)


def snap(
    *, gpu: str = B300, n: int = 8, launch: str | None = None, env: dict | None = None, **kw
) -> Snapshot:
    s = Snapshot(
        driver=Driver(version="580.65.06", cuda_version="13.0", status="ok"),
        gpus=[
            Gpu(index=i, name=gpu, memory_total_mib=275040, memory_used_mib=0, mig_mode="Disabled")
            for i in range(n)
        ],
        env=dict(env or {}),
    )
    if launch is not None:
        s.launch = parse_launch(launch)
    for k, v in kw.items():
        setattr(s, k, v)
    return s


def _served(s: Snapshot) -> Snapshot:
    """The package list is the server's own environment (vLLM installed there)."""
    s.python.origin = SERVER_ORIGIN
    return s


def _python(
    packages: dict[str, str], cuda_userspace: dict[str, list[str]], torch: Torch | None = None
) -> Any:
    from vllm_medic.snapshot import PythonEnv

    return PythonEnv(packages=packages, cuda_userspace=cuda_userspace, torch=torch or Torch())


SERVER_ORIGIN = PackageOrigin(
    interpreter="/opt/venv/bin/python", vllm_installed=True, vllm_distribution="vllm"
)


def _matrix(n: int, link: str, nic: str | None = "PIX", cut: tuple[int, int] | None = None) -> Topology:
    gpus = [f"GPU{i}" for i in range(n)]
    nics = [f"NIC{i}" for i in range(n)] if nic else []
    m: dict[str, dict[str, str]] = {}
    for i, g in enumerate(gpus):
        row = {o: ("X" if o == g else link) for o in gpus}
        for j, x in enumerate(nics):
            row[x] = nic if i == j else "SYS"
        m[g] = row
    if cut:
        a, b = f"GPU{cut[0]}", f"GPU{cut[1]}"
        m[a][b] = m[b][a] = "SYS"
    return Topology(devices=gpus + nics, matrix=m, nic_legend={x: f"mlx5_{i}" for i, x in enumerate(nics)})


def _img(tag: str, cuda: str = "13.0.1", digest: str | None = None) -> Image:
    return Image(tag=tag, cuda_version=cuda, digest=digest, id="sha256:" + "ab" * 32)


SMI_TABLE = {"nvidia-smi.txt": _text("checks/bundles/b200-r575-k3/nvidia-smi.txt")}

FIXTURES: dict[str, dict[str, Callable[[], Case]]] = {
    "DRV001": {
        "pass": lambda: Case(snap()),
        "fail": lambda: Case(
            Snapshot(driver=Driver(status="no_driver", status_detail="couldn't communicate"))
        ),
    },
    "DRV002": {
        "pass": lambda: Case(snap(image=_img("vllm/vllm-openai:kimi-k3"))),
        "fail": lambda: Case(
            snap(
                image=_img("vllm/vllm-openai:kimi-k3"),
                driver=Driver(version="575.57.08", cuda_version="12.9", status="ok"),
            )
        ),
    },
    "DRV003": {
        "pass": lambda: Case(snap(toolkit=Toolkit(nvcc_version="13.0"))),
        "fail": lambda: Case(
            snap(
                driver=Driver(version="575.57.08", cuda_version="12.9", status="ok"),
                toolkit=Toolkit(nvcc_version="13.0"),
            )
        ),
    },
    "DRV004": {
        "pass": lambda: Case(
            _served(snap(python=_python({"vllm": "0.29.0"}, {"13": ["nvidia-cublas-cu13==13.0.0.19"]})))
        ),
        "fail": lambda: Case(
            _served(
                snap(
                    python=_python(
                        {"vllm": "0.29.0"},
                        {"12": ["nvidia-cublas-cu12==12.8.4.1"], "13": ["nvidia-cublas-cu13==13.0.0.19"]},
                    )
                )
            )
        ),
    },
    "DRV005": {
        "pass": lambda: Case(snap(python=_python({"vllm": "0.29.0"}, {}, Torch("2.9.0+cu130", "13.0")))),
        "fail": lambda: Case(
            snap(
                driver=Driver(version="575.57.08", cuda_version="12.9", status="ok"),
                python=_python({"vllm": "0.29.0"}, {}, Torch("2.9.0+cu130", "13.0")),
            )
        ),
    },
    "DRV006": {
        "pass": lambda: Case(snap(gpu="NVIDIA B200"), kw={"raw": SMI_TABLE}),
        "fail": lambda: Case(snap(gpu="NVIDIA B200", gpus_showing_err=[3]), kw={"raw": SMI_TABLE}),
    },
    "DRV007": {
        "pass": lambda: Case(
            snap(
                driver=Driver(version="580.65.06", cuda_version="13.0", status="ok", open_kernel_module=True)
            )
        ),
        "fail": lambda: Case(
            snap(
                driver=Driver(version="580.65.06", cuda_version="13.0", status="ok", open_kernel_module=False)
            )
        ),
    },
    "DRV008": {
        "pass": lambda: Case(
            snap(
                gpus=[
                    Gpu(index=i, name=B300, remapped_rows_pending=False, remapped_rows_failure=False)
                    for i in range(8)
                ]
            )
        ),
        "fail": lambda: Case(snap(gpus=[Gpu(index=0, name=B300, remapped_rows_pending=True)])),
    },
    "HLT-XID": {
        "pass": lambda: Case(
            snap(),
            kw={
                "raw": {
                    "dmesg.txt": b"[    0.000000] Linux version 6.8.0\n[    5.1] nvidia: loading out-of-tree module\n"
                }
            },
        ),
        "fail": lambda: Case(
            snap(),
            kw={
                "raw": {
                    "dmesg.txt": _text("health/kernel/journal-xid-79-fallen-off-bus-rtx5080-ogkm-1151.txt")
                }
            },
        ),
    },
    "HLT-FAB": {
        # 8 H200 registered (State Completed / Status Success, as the real -q sample shows per GPU)
        "pass": lambda: Case(
            snap(
                gpu="NVIDIA H200",
                gpus=[
                    Gpu(index=i, name="NVIDIA H200", fabric_state="Completed", fabric_status="Success")
                    for i in range(8)
                ],
            ),
            kw={"raw": {"systemctl-fabricmanager.txt": b"active\n"}},
        ),
        "fail": lambda: Case(
            snap(gpu="NVIDIA H200"),
            kw={
                "raw": {
                    "nvidia-smi-q.txt": _text("health/fabric/nvidia-smi-q-h200-in-progress-SYNTHETIC.txt")
                }
            },
        ),
    },
    "HLT-LIM": {
        # the real-format df output, with /dev/shm at 16 GiB (SYNTHETIC size) for the pass
        "pass": lambda: Case(
            snap(launch=K3_LAUNCH),
            kw={
                "raw": {
                    "shm.txt": _text("health/limits/df-k-dev-shm-docker-default-64m-SYNTHETIC.txt").replace(
                        b"65536", b"16777216"
                    )
                }
            },
        ),
        "fail": lambda: Case(
            snap(launch=K3_LAUNCH),
            kw={"raw": {"shm.txt": _text("health/limits/df-k-dev-shm-docker-default-64m-SYNTHETIC.txt")}},
        ),
    },
    "HLT-IMG": {
        "pass": lambda: Case(
            snap(gpu="NVIDIA B200"),
            kw={
                "raw": {
                    "in-image-nvidia-smi.txt": _text("checks/bundles/b200-r575-k3/nvidia-smi.txt")
                    .replace(b"575.57.08", b"580.65.06")
                    .replace(b"12.9", b"13.0"),
                    "in-image-versions.txt": _text("health/docker/versions-probe-cu130-SYNTHETIC.txt"),
                }
            },
        ),
        "fail": lambda: Case(
            snap(gpu="NVIDIA B200", driver=Driver(version="575.57.08", cuda_version="12.9", status="ok")),
            kw={
                "raw": {
                    "in-image-nvidia-smi.txt": _text("checks/bundles/b200-r575-k3/nvidia-smi.txt"),
                    "in-image-versions.txt": _text("health/docker/versions-probe-cu130-SYNTHETIC.txt"),
                }
            },
        ),
    },
    "IMG001": {
        "pass": lambda: Case(
            snap(launch="docker run --gpus all vllm/vllm-openai:kimi-k3 " + K3_LAUNCH[len("vllm serve ") :])
        ),
        "fail": lambda: Case(snap(image=_img("vllm/vllm-openai:kimi-k3-cu129"))),
    },
    "IMG002": {
        "pass": lambda: Case(snap(image=_img("vllm/vllm-openai:kimi-k3", digest="sha256:" + "cd" * 32))),
        "fail": lambda: Case(snap(image=_img("vllm/vllm-openai:latest"))),
    },
    "IMG003": {
        "pass": lambda: Case(snap(vllm=Vllm(version="0.29.0", raw="0.29.0"))),
        "fail": lambda: Case(snap(vllm=Vllm(version="0.26.0", raw="0.26.0"))),
    },
    "IMG004": {
        "pass": lambda: Case(
            snap(vllm=Vllm(version="0.29.0")),
            kw={"model_config": {"architectures": ["KimiK3ForConditionalGeneration"]}},
        ),
        "fail": lambda: Case(
            snap(vllm=Vllm(version="0.26.0")),
            kw={"model_config": {"architectures": ["KimiK3ForConditionalGeneration"]}},
        ),
    },
    "IMG005": {
        "pass": lambda: Case(
            snap(
                image=_img("vllm/vllm-openai:kimi-k3"),
                python=_python({"vllm": "0.29.0"}, {}, Torch("2.9.0", "13.0")),
            )
        ),
        "fail": lambda: Case(
            snap(
                image=_img("vllm/vllm-openai:kimi-k3"),
                python=_python({"vllm": "0.29.0"}, {}, Torch("2.8.0", "12.8")),
            )
        ),
    },
    "IMG006": {
        "pass": lambda: Case(snap(launch=K3_LAUNCH)),
        "fail": lambda: Case(snap(launch="vllm serve moonshotai/Kimi-K3 -tp 8")),
    },
    "LAY001": {
        "pass": lambda: Case(snap()),
        "fail": lambda: Case(snap(gpu="NVIDIA B200", launch=K3_LAUNCH)),
    },
    "LAY002": {
        "pass": lambda: Case(snap()),
        "fail": lambda: Case(
            snap(
                gpu="NVIDIA B200",
                n=8,
                launch=K3_LAUNCH,
                gpus=[Gpu(index=i, name="NVIDIA B200", memory_total_mib=183359) for i in range(8)],
            )
        ),
    },
    "LAY003": {
        "pass": lambda: Case(snap(launch=K3_LAUNCH)),
        "fail": lambda: Case(snap(launch=K3_LAUNCH.replace("-tp 8", "-tp 16"))),
    },
    "LAY004": {
        "pass": lambda: Case(snap()),
        "fail": lambda: Case(
            snap(
                gpus=[
                    Gpu(index=i, name=B300, memory_total_mib=275040, memory_used_mib=200000) for i in range(8)
                ]
            )
        ),
    },
    "LAY005": {
        "pass": lambda: Case(snap()),
        "fail": lambda: Case(snap(n=7)),
    },
    "LAY006": {
        "pass": lambda: Case(snap()),
        "fail": lambda: Case(
            snap(launch=K3_LAUNCH, gpus=[Gpu(index=i, name=B300, mig_mode="Enabled") for i in range(8)])
        ),
    },
    "NET001": {
        "pass": lambda: Case(snap(launch=K3_LAUNCH)),
        "fail": lambda: Case(
            snap(launch=DEP_RDMA + " --all2all-backend flashinfer_nvlink_one_sided", rdma=RDMA_UP)
        ),
    },
    "NET002": {
        "pass": lambda: Case(snap(launch=K3_LAUNCH)),
        "fail": lambda: Case(snap(launch=K3_LAUNCH + " --all2all-backend deep_gemm_mega_moe")),
    },
    "NET003": {
        "pass": lambda: Case(snap(launch='UCX_TLS="rc,cuda_copy" ' + PD_PREFILL, rdma=RDMA_UP)),
        "fail": lambda: Case(snap(launch=PD_PREFILL, rdma=RDMA_UP)),
    },
    "NET004": {
        "pass": lambda: Case(snap(kernel_modules=["nvidia", "mlx5_core", "mlx5_ib", "nvidia_peermem"])),
        "fail": lambda: Case(
            snap(env={"NCCL_DMABUF_ENABLE": "0"}, kernel_modules=["nvidia", "mlx5_core", "mlx5_ib"])
        ),
    },
    "NET005": {
        "pass": lambda: Case(snap(rdma=RDMA_UP, kernel_modules=["nvidia", "mlx5_core", "mlx5_ib"])),
        "fail": lambda: Case(snap(rdma=RDMA_UP, kernel_modules=["nvidia", "mlx5_core"])),
    },
    "NET006": {
        "pass": lambda: Case(snap(rdma=RDMA_UP)),
        "fail": lambda: Case(
            snap(rdma=[*RDMA_UP[:3], RdmaPort(ib_dev="mlx5_3", port=1, netdev="ens3np0", state="Down")])
        ),
    },
    "NET007": {
        "pass": lambda: Case(snap(launch=DEP_RDMA + " --all2all-backend deepep_v2")),
        "fail": lambda: Case(snap(launch="NCCL_MNNVL_ENABLE=1 " + DEP_RDMA + " --all2all-backend deepep_v2")),
    },
    "NET008": {
        "pass": lambda: Case(
            snap(
                gpu="NVIDIA GB300",
                n=4,
                launch="NCCL_MNNVL_ENABLE=1 NCCL_CUMEM_ENABLE=1 NCCL_NVLS_ENABLE=1 "
                + DEP_RDMA.replace("-dpl 8", "-dpl 4"),
            )
        ),
        "fail": lambda: Case(snap(gpu="NVIDIA GB300", n=4, launch=DEP_RDMA.replace("-dpl 8", "-dpl 4"))),
    },
    "NET009": {
        "pass": lambda: Case(snap(topology=_matrix(8, "NV18"))),
        "fail": lambda: Case(snap(topology=_matrix(8, "NV18", cut=(2, 5)))),
    },
    "NET010": {
        "pass": lambda: Case(snap(topology=_matrix(8, "NV18"))),
        "fail": lambda: Case(snap(launch=DEP_RDMA, topology=_matrix(8, "NV18", nic="NODE"))),
    },
    "PFX001": {
        "pass": lambda: Case(snap(launch=K3_LAUNCH)),
        "fail": lambda: Case(snap(launch=K3_LAUNCH.replace(" --enable-prefix-caching", ""))),
    },
    "REC002": {  # official K3 recipe, 2 x 8 H200: the Hopper profile sets --max-model-len 32768
        "pass": lambda: Case(
            snap(gpu="NVIDIA H200", launch=K3_TP8_PP2_2NODES + " --max-model-len 32768"), recipe=OFFICIAL_K3
        ),
        "fail": lambda: Case(snap(gpu="NVIDIA H200", launch=K3_TP8_PP2_2NODES), recipe=OFFICIAL_K3),
    },
    "REC001": {
        "pass": lambda: Case(snap(launch=BLACKWELL_PROFILE), recipe=OFFICIAL_K3),
        "fail": lambda: Case(snap(launch=K3_LAUNCH), recipe=OFFICIAL_K3, kw={"strategy": "multi_node_tp_dp"}),
    },
}


def test_every_rule_has_fixtures():
    ids = {r.id for r in load_rules()}
    assert set(FIXTURES) == ids, {
        "no fixture": sorted(ids - set(FIXTURES)),
        "no rule": sorted(set(FIXTURES) - ids),
    }


def _verdict(rule_id: str, kind: str):
    case = FIXTURES[rule_id][kind]()
    findings = run_checks(case.snapshot, case.recipe, **case.kw)
    hits = [f for f in findings if f.id == rule_id]
    assert len(hits) == 1
    return hits[0]


@pytest.mark.parametrize("rule_id", sorted(FIXTURES))
def test_the_passing_fixture_passes_with_evidence(rule_id):
    f = _verdict(rule_id, "pass")
    assert f.severity is Severity.PASS, (f.title, f.evidence)
    assert f.evidence and all(e.strip() for e in f.evidence)


@pytest.mark.parametrize("rule_id", sorted(FIXTURES))
def test_the_failing_fixture_fails_or_warns(rule_id):
    f = _verdict(rule_id, "fail")
    assert f.severity in (Severity.FAIL, Severity.WARN), (f.severity, f.title, f.evidence)
    assert f.evidence and f.fix
