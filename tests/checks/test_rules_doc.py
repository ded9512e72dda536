"""docs/checks.md's rule table is `vllm-medic rules` (scripts/gen_rules_table.py): the two never differ."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_medic.checks.api import load_rules

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gen_rules_table.py"


def _gen():  # noqa: ANN202 - the script module
    spec = importlib.util.spec_from_file_location("gen_rules_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_table_is_the_one_the_cli_prints() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr


def test_every_registered_rule_is_documented_in_registry_order() -> None:
    gen = _gen()
    doc = gen.DOC.read_text(encoding="utf-8")
    generated = doc.split(gen.BEGIN, 1)[1].split(gen.END, 1)[0]
    registry = [r.id for r in load_rules()]
    assert re.findall(r"^\| (\S+) \|", generated, flags=re.MULTILINE)[1:] == registry  # [0]: the header
    assert {"HLT-XID", "HLT-FAB", "HLT-IMG", "HLT-LIM"} <= set(registry)
    notes = re.findall(r"^- \*\*(\S+)\*\* — ", doc.split(gen.END, 1)[1], flags=re.MULTILINE)
    assert notes == registry, "the per-rule notes under the table follow the registry too"


def test_the_check_sees_a_rule_added_changed_or_dropped() -> None:
    gen = _gen()
    doc = gen.DOC.read_text(encoding="utf-8")
    rules = [r.catalogue_entry() for r in load_rules()]
    assert gen.splice(doc, gen.table(rules)) == doc
    renamed = [{**rules[0], "title": rules[0]["title"] + " (renamed)"}, *rules[1:]]
    added = [*rules, {**rules[0], "id": "NEW001"}]
    for variant in (rules[1:], renamed, added):
        assert gen.splice(doc, gen.table(variant)) != doc
    with pytest.raises(ValueError, match="markers"):
        gen.splice(doc.replace(gen.END, ""), gen.table(rules))


def test_a_pipe_in_a_cell_does_not_open_a_column() -> None:
    row = _gen().table([{"id": "X1", "category": "other", "title": "a | b", "by_hand": "`ls | wc`"}])
    assert row.splitlines()[-1] == "| X1 | other | a \\| b | `ls \\| wc` |"
