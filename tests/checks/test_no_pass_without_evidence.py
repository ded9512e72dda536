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
from vllm_medic.snapshot import Snapshot, SourceError

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
