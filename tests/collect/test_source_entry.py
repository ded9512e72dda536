"""manifest.json's source entries are typed records (collect/source_entry.py); the bytes stay as they were.

The golden manifests in tests/data/collect/manifests/ were written by the dict-based code this record
replaced (commit 7b90c67), from the example node and from a node's answer as the remote probe gives it
(tests/data/collect/manifests/remote-node.input.json: a Kubernetes fan-out's node, its keys in the
probe's own order). Only the bundle path and the tool version are put in placeholders.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from vllm_medic import __version__
from vllm_medic.collect.api import load_captured, write_bundle
from vllm_medic.collect.source_entry import SourceEntry, entries_by_name
from vllm_medic.report.jsonout import dumps

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "captured-h200-node"
MANIFESTS = ROOT / "tests" / "data" / "collect" / "manifests"


def _manifest_text(src: Path, dest: Path) -> str:
    write_bundle(load_captured(src), dest)
    text = (dest / "manifest.json").read_text(encoding="utf-8")
    return text.replace(json.dumps(str(src)), '"<FROM>"').replace(f'"{__version__}"', '"<VERSION>"')


def _golden(name: str) -> str:
    return (MANIFESTS / name).read_text(encoding="utf-8")


def test_a_bundle_from_captured_outputs_writes_the_same_manifest_bytes(tmp_path: Path) -> None:
    assert _manifest_text(EXAMPLE, tmp_path / "b1") == _golden("captured-h200-node.manifest.json")


def test_reading_a_bundle_back_writes_its_manifest_unchanged(tmp_path: Path) -> None:
    _manifest_text(EXAMPLE, tmp_path / "b1")
    assert _manifest_text(tmp_path / "b1", tmp_path / "b2") == _golden("captured-h200-node.manifest.json")


def test_a_node_answer_keeps_the_remote_probes_key_order(tmp_path: Path) -> None:
    node = tmp_path / "node"
    shutil.copytree(EXAMPLE, node)
    shutil.copy(MANIFESTS / "remote-node.input.json", node / "manifest.json")
    assert _manifest_text(node, tmp_path / "out") == _golden("remote-node.manifest.json")


@pytest.mark.parametrize(
    "entry",
    [
        {"name": "dmesg", "command": "dmesg", "file": "dmesg.txt", "exit_code": 0, "status": "ok",
         "message": "", "duration_s": 0.139},
        {"name": "lsmod", "command": None, "started": None, "duration_s": 0, "exit_code": None,
         "status": "ok", "file": "lsmod.txt", "message": "", "stderr": "", "partial": "a grep", "notes": ["x"]},
        {"name": "launch", "future_key": {"kept": [1, 2]}, "status": "ok", "origin": "argv"},
        {"name": 7, "status": 5, "duration_s": True, "notes": "not a list", "exit_code": "1"},
        {"name": "bare"},
    ],
    ids=["remote-order", "int-duration-and-optionals", "unknown-key", "mistyped", "bare"],
)  # fmt: skip
def test_from_json_then_to_json_gives_the_same_bytes(entry: dict) -> None:
    assert dumps(SourceEntry.from_json(entry).to_json()) == dumps(entry)


def test_an_entry_built_with_values_writes_them_in_field_order() -> None:
    assert list(SourceEntry("x", origin="argv", status="ok").to_json()) == ["name", "status", "origin"]


def test_a_mistyped_value_reads_as_not_recorded() -> None:
    e = SourceEntry.from_json({"name": "x", "status": 5, "duration_s": True, "notes": "n"})
    assert (e.status, e.duration_s, e.notes) == (None, None, None)


def test_an_entry_of_this_version_writes_the_core_keys_then_what_is_set() -> None:
    e = SourceEntry.of("launch", "launch.txt", command="(--launch text)", origin="argv")
    e.notes = ["no vLLM command found"]
    assert list(e.to_json()) == [
        "name", "command", "started", "duration_s", "exit_code", "status", "file", "message", "origin", "notes",
    ]  # fmt: skip
    assert e.to_json()["duration_s"] == 0.0 and e.to_json()["status"] == "ok"


def test_a_bare_entry_writes_what_the_readers_set_in_the_order_they_set_it() -> None:
    e = SourceEntry("nvcc-version")
    e.partial = "an excerpt"
    e.status, e.message = "unparsable", "no release line"
    assert list(e.to_json().items()) == [
        ("name", "nvcc-version"), ("partial", "an excerpt"), ("status", "unparsable"), ("message", "no release line"),
    ]  # fmt: skip


def test_forget_drops_a_re_derived_key_until_it_is_set_again() -> None:
    e = SourceEntry.from_json({"name": "lsmod", "partial": "old", "notes": ["old"], "status": "ok"})
    e.forget("partial")
    e.forget("notes")
    assert list(e.to_json()) == ["name", "status"]
    e.notes = ["new"]
    assert list(e.to_json().items()) == [("name", "lsmod"), ("status", "ok"), ("notes", ["new"])]


def test_entries_by_name_skips_what_is_not_an_entry() -> None:
    got = entries_by_name([{"name": "a"}, {"status": "ok"}, "junk", {"name": ""}])
    assert list(got) == ["a"]
    assert entries_by_name({"b": {"name": "b"}}).keys() == {"b"}
    assert entries_by_name(None) == {} and entries_by_name("x") == {}
