"""No ✓ without evidence: a property of the whole catalogue, walked rule by rule.

Every registered rule (driver, image, layout, network, cache, recipe, and health's HLT-* families) runs
over snapshots where nothing was read whole: empty, and with each source collect knows marked missing,
unparsable, timed out, refused, or only partly captured. None of them may pass. The cross-node CLU-*
rules compare snapshots: two such nodes must give no finding at all (nothing known differs).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_medic.checks.api import load_rules, run_checks
from vllm_medic.cluster.consistency import compare
from vllm_medic.collect.build import CANONICAL_FILES
from vllm_medic.model import Severity
from vllm_medic.recipes import load_recipe
from vllm_medic.snapshot import LsmodGrep, PackageOrigin, Snapshot, SourceError

OFFICIAL_K3 = (
    Path(__file__).parents[1]
    / "data"
    / "checks"
    / "official-recipes"
    / "models"
    / "moonshotai"
    / "Kimi-K3.yaml"
)
RECIPES = {
    "generic": load_recipe("generic"),
    "kimi-k3": load_recipe("kimi-k3"),
    "official-k3": load_recipe(str(OFFICIAL_K3)),
}
SOURCES = sorted(CANONICAL_FILES)
KINDS = ("missing", "timeout", "nonzero", "unparsable", "permission", "error", "not_applicable", "partial")


def _marked(source: str, kind: str) -> Snapshot:
    s = Snapshot()
    if kind == "partial":
        s.partial[source] = "a grepped paste (SYNTHETIC)"
    else:
        s.errors.append(SourceError(source, kind, f"{source}: {kind} (SYNTHETIC)"))
    return s


def _passes(snapshot: Snapshot, recipe_name: str, **kw) -> list[str]:
    findings = run_checks(snapshot, RECIPES[recipe_name], **kw)
    assert sorted(f.id for f in findings) == sorted(r.id for r in load_rules())  # every rule answered
    return [f"{f.id}: {f.title} {f.evidence}" for f in findings if f.severity is Severity.PASS]


def test_the_walk_covers_every_rule_family():
    ids = {r.id for r in load_rules()}
    assert {"HLT-XID", "HLT-FAB", "HLT-LIM", "HLT-IMG"} <= ids
    assert {p for r in ids for p in ("DRV", "IMG", "LAY", "NET", "PFX", "REC") if r.startswith(p)} == {
        "DRV", "IMG", "LAY", "NET", "PFX", "REC",
    }  # fmt: skip
    assert len(SOURCES) >= 30 and {"nvidia-smi", "lsmod", "ibdev2netdev", "nvidia-smi-topo-m"} <= set(SOURCES)


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_an_empty_snapshot_passes_nothing(recipe):
    assert _passes(Snapshot(), recipe) == []


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_an_empty_snapshot_with_a_known_launch_env_and_hardware_passes_only_on_them(recipe):
    """--hardware and an empty raw dict are user input, not evidence of the machine: still no pass."""
    assert _passes(Snapshot(), recipe, hardware="b300", raw={}, sources={}) == []


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("source", SOURCES)
def test_a_source_not_read_whole_passes_nothing(source, kind):
    for recipe in ("generic", "kimi-k3"):
        assert _passes(_marked(source, kind), recipe) == [], (source, kind, recipe)


@pytest.mark.parametrize("kind", KINDS)
def test_every_source_unread_at_once_passes_nothing(kind):
    s = Snapshot()
    for source in SOURCES:
        if kind == "partial":
            s.partial[source] = "EXCERPT (SYNTHETIC)"
        else:
            s.errors.append(SourceError(source, kind, "SYNTHETIC"))
    for recipe in sorted(RECIPES):
        assert _passes(s, recipe) == []


@pytest.mark.parametrize("kind", KINDS)
def test_cluster_rules_find_nothing_between_nodes_that_read_nothing(kind):
    nodes = {"node-a": _marked("lsmod", kind), "node-b": Snapshot()}
    report = compare(nodes)
    assert report.findings == []
    assert all(not row["differs"] for row in report.rows)


def test_a_grepped_lsmod_on_one_node_is_not_a_difference_between_nodes():
    """`lsmod | grep peermem` on node-a lists one module; node-b's whole lsmod lists five: not a difference."""
    a = Snapshot(kernel_modules=["nvidia_peermem"], partial={"lsmod": "lsmod | grep peermem"})
    b = Snapshot(kernel_modules=["nvidia", "nvidia_uvm", "nvidia_peermem", "mlx5_core", "mlx5_ib"])
    report = compare({"node-a": a, "node-b": b})
    assert [f.id for f in report.findings] == []
    row = next(r for r in report.rows if r["id"] == "CLU011")
    assert row["values"]["node-a"].startswith("(partial") and not row["differs"]
    # a whole lsmod without mlx5_ib on node-a is a difference
    a = Snapshot(kernel_modules=["nvidia", "nvidia_uvm", "nvidia_peermem", "mlx5_core"])
    assert [f.id for f in compare({"node-a": a, "node-b": b}).findings] == ["CLU011"]


def test_a_grep_that_would_have_shown_a_module_proves_it_absent_on_that_node():
    """`lsmod | grep nvidia` without nvidia_peermem: peermem differs, mlx5 (which it hides) is not compared."""
    a = Snapshot(
        kernel_modules=["nvidia_drm", "nvidia"],
        partial={"lsmod": "captured through `grep nvidia`"},
        lsmod_grep=LsmodGrep(["nvidia"], ["lsmod | grep nvidia"]),
    )
    b = Snapshot(kernel_modules=["nvidia", "nvidia_peermem", "mlx5_core", "mlx5_ib"])
    report = compare({"node-a": a, "node-b": b})
    (f,) = report.findings
    assert f.id == "CLU011" and f.severity.value == "fail"
    assert f.evidence == [
        "nvidia_peermem: loaded on node-b; not loaded on node-a (node-a's `lsmod | grep nvidia` would have listed it)"
    ]
    row = next(r for r in report.rows if r["id"] == "CLU011")
    assert "not shown whether loaded: " in row["values"]["node-a"] and "mlx5_ib" in row["values"]["node-a"]
    # a grep for something else shows nothing about peermem
    a.lsmod_grep = LsmodGrep(["drm"], ["lsmod | grep drm"])
    assert compare({"node-a": a, "node-b": b}).findings == []


# ---------------------------------------------------------------- a good node, one source taken away at a time

TOPO_FILE = (
    Path(__file__).parents[1]
    / "data"
    / "collect"
    / "nvidia-smi-topo-m"
    / ("hgx-8gpu-nv18-12nic-pix-single-numa-aihub0007.txt")
)
K3_LAUNCH = "vllm serve moonshotai/Kimi-K3 -tp 8 --trust-remote-code --enable-prefix-caching"


def _good() -> tuple[Snapshot, dict[str, bytes]]:
    """SYNTHETIC healthy 8x H200 node (values as real outputs print them), every source captured."""
    from vllm_medic.collect.launch import parse_launch
    from vllm_medic.collect.parsers.topology import parse_topology
    from vllm_medic.snapshot import Driver, Gpu, Image, PythonEnv, RdmaPort, Torch, Vllm

    topology = parse_topology(TOPO_FILE.read_text()).topology  # the real HGX matrix: NV18, a PIX NIC per GPU
    assert len(topology.devices) == 20
    s = Snapshot(
        driver=Driver(version="580.65.06", cuda_version="13.0", status="ok"),
        gpus=[
            Gpu(
                index=i,
                name="NVIDIA H200",
                memory_total_mib=143771,
                memory_used_mib=0,
                mig_mode="Disabled",
                remapped_rows_pending=False,
                remapped_rows_failure=False,
                ecc_volatile_uncorrectable=0,
            )
            for i in range(8)
        ],  # fmt: skip
        topology=topology,
        rdma=[RdmaPort(ib_dev=f"mlx5_{i}", port=1, netdev=f"ens{i}np0", state="Up") for i in range(12)],
        kernel_modules=["nvidia", "nvidia_uvm", "nvidia_peermem", "mlx5_core", "mlx5_ib", "ib_core"],
        image=Image(tag="vllm/vllm-openai:kimi-k3", cuda_version="13.0.1", digest="sha256:" + "ab" * 32),
        vllm=Vllm(version="0.29.0", raw="0.29.0"),
        python=PythonEnv(
            packages={"vllm": "0.29.0", "torch": "2.9.0+cu130", "nvidia-cublas-cu13": "13.0.0.19"},
            cuda_userspace={"13": ["nvidia-cublas-cu13==13.0.0.19"]},
            torch=Torch("2.9.0+cu130", "13.0"),
        ),
        launch=parse_launch(K3_LAUNCH),
    )
    s.driver.open_kernel_module = True
    s.python.origin = PackageOrigin(
        interpreter="/opt/venv/bin/python", vllm_installed=True, vllm_distribution="vllm"
    )
    raw = {
        "nvidia-smi.txt": b"| NVIDIA-SMI 580.65.06   Driver Version: 580.65.06   CUDA Version: 13.0 |\n"
        + b"".join(f"|   {i}  NVIDIA H200   On | 0MiB / 143771MiB | Disabled |\n".encode() for i in range(8)),
        "nvidia-smi-topo-m.txt": TOPO_FILE.read_bytes(),
        "lsmod.txt": b"Module Size Used by\n" + b"".join(f"{m} 16384 0\n".encode() for m in s.kernel_modules),
        "ibdev2netdev.txt": b"".join(f"mlx5_{i} port 1 ==> ens{i}np0 (Up)\n".encode() for i in range(12)),
        "pip-freeze.txt": b"vllm==0.29.0\ntorch==2.9.0+cu130\nnvidia-cublas-cu13==13.0.0.19\n",
        "vllm-version.txt": b"0.29.0\n",
        "launch.txt": K3_LAUNCH.encode() + b"\n",
        "docker-image-inspect.json": b'[{"RepoTags": ["vllm/vllm-openai:kimi-k3"]}]\n',
        "proc-driver-nvidia-version.txt": b"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06\n",
    }
    return s, raw


# source -> (snapshot fields it fills, the rules that cannot pass without it)
DEGRADE = {
    "nvidia-smi": (
        ("driver", "gpus"),
        {"DRV001", "DRV006", "DRV008", "LAY004", "LAY005", "LAY006", "NET009"},
    ),
    "lsmod": (("kernel_modules",), {"NET004", "NET005"}),
    "ibdev2netdev": (("rdma",), {"NET006"}),
    "nvidia-smi-topo-m": (("topology",), {"NET009", "NET010"}),
    "pip-freeze": (("python",), {"DRV004", "DRV005", "IMG005"}),
    "vllm-version": (("vllm",), {"IMG003"}),
    "launch": (("launch",), {"IMG006", "LAY003", "NET001", "NET002", "NET007", "PFX001"}),
    "proc-driver-nvidia-version": ((), set()),  # Hopper runs on either flavour: DRV007 passes on the GPU name
    "docker-image-inspect": (("image",), set()),
}
# a partial capture keeps what it shows: rules that read absence from it cannot pass
ABSENCE_RULES = {
    "nvidia-smi": {"DRV006", "LAY004", "LAY005"},
    "lsmod": set(),
    "ibdev2netdev": {"NET006"},
    "nvidia-smi-topo-m": {"NET009", "NET010"},
    "pip-freeze": {"DRV004"},
}


def _run(s: Snapshot, raw: dict[str, bytes]) -> dict[str, object]:
    return {f.id: f for f in run_checks(s, RECIPES["kimi-k3"], raw=raw)}


def test_the_good_node_passes_what_it_shows():
    s, raw = _good()
    passed = {i for i, f in _run(s, raw).items() if f.severity is Severity.PASS}
    assert len(passed) >= 25 and set().union(*(d for _, d in DEGRADE.values())) <= passed


@pytest.mark.parametrize("kind", ["missing", "unparsable", "timeout"])
@pytest.mark.parametrize("source", sorted(DEGRADE))
def test_taking_a_source_away_never_adds_a_pass_nor_keeps_one_that_needed_it(source, kind):
    s, raw = _good()
    good = {i for i, f in _run(s, raw).items() if f.severity is Severity.PASS}
    fields, needs = DEGRADE[source]
    fresh = Snapshot()
    for name in fields:
        setattr(s, name, getattr(fresh, name))
    if source == "proc-driver-nvidia-version":
        s.driver.open_kernel_module = None
    raw.pop(CANONICAL_FILES[source][0], None)
    s.errors.append(SourceError(source, kind, "SYNTHETIC"))
    after = _run(s, raw)
    passed = {i for i, f in after.items() if f.severity is Severity.PASS}
    assert passed <= good, passed - good
    assert not (passed & needs), {i: after[i].title for i in passed & needs}
    for i in passed:  # a pass never quotes the file that was not read
        assert not any(CANONICAL_FILES[source][0] in e for e in after[i].evidence), (i, after[i].evidence)


@pytest.mark.parametrize("source", sorted(ABSENCE_RULES))
def test_a_partial_source_keeps_its_presences_but_proves_no_absence(source):
    s, raw = _good()
    good = {i for i, f in _run(s, raw).items() if f.severity is Severity.PASS}
    s.partial[source] = "EXCERPT (SYNTHETIC)"
    after = _run(s, raw)
    passed = {i for i, f in after.items() if f.severity is Severity.PASS}
    assert passed <= good
    assert not (passed & ABSENCE_RULES[source]), {i: after[i].title for i in passed & ABSENCE_RULES[source]}
    for i in ABSENCE_RULES[source]:
        assert after[i].severity is Severity.NOT_CHECKED, (i, after[i].severity, after[i].title)


# ---------------------------------------------------------------- one real capture alone: every ✓ quotes it

COLLECT = Path(__file__).parents[1] / "data" / "collect"
ALONE = {
    "nvidia-smi": "nvidia-smi.txt",
    "nvidia-smi-q": "nvidia-smi-q.txt",
    "nvidia-smi-q-x": "nvidia-smi-q.xml",
    "nvidia-smi-query-gpu": "nvidia-smi-query-gpu.csv",
    "nvidia-smi-topo-m": "nvidia-smi-topo-m.txt",
    "ibdev2netdev": "ibdev2netdev.txt",
    "lsmod": "lsmod.txt",
    "docker-image-inspect": "docker-image-inspect.json",
    "vllm-version": "vllm-version.txt",
    "vllm-collect-env": "vllm-collect-env.txt",
}
CAPTURES = [(kind, f) for kind in sorted(ALONE) for f in sorted((COLLECT / kind).glob("*")) if f.is_file()]


@pytest.mark.parametrize(("kind", "capture"), CAPTURES, ids=[f"{k}/{f.name[:40]}" for k, f in CAPTURES])
def test_a_real_capture_alone_gives_passes_that_quote_it(tmp_path, kind, capture):
    """With one file in the directory, a pass whose evidence does not name that file rests on nothing read."""
    import json

    from typer.testing import CliRunner

    from vllm_medic.cli import app

    name = ALONE[kind]
    (tmp_path / name).write_bytes(capture.read_bytes())
    res = CliRunner().invoke(app, ["check", "--from", str(tmp_path), "--json"])
    if res.exit_code == 2:  # not readable as that command at all: a usage error, no verdicts
        assert "✓" not in res.output
        return
    assert res.exit_code in (0, 1), res.output
    for f in json.loads(res.stdout)["findings"]:
        if f["severity"] == "pass":
            assert any(name in e for e in f["evidence"]), (f["id"], f["title"], f["evidence"])
