"""The canonical file names are one list (collect/files.py): the probe table and the rules agree with it."""

from __future__ import annotations

from vllm_medic.checks.facts import Facts
from vllm_medic.collect.api import source_table
from vllm_medic.collect.build import source_for_file
from vllm_medic.collect.files import CANONICAL_FILES
from vllm_medic.snapshot import Snapshot


def test_every_probe_writes_its_sources_canonical_file() -> None:
    table = source_table()
    for probe in [*table["probes"], *(table.get("files") or [])]:
        assert probe["file"] == CANONICAL_FILES[probe["name"]][0], probe


def test_the_rules_quote_the_names_the_collector_reads() -> None:
    facts = Facts(Snapshot(), raw={"nvidia-smi-q.txt": b"GPU 00000000:01:00.0\n"})
    assert facts._files_of("ip-link") == CANONICAL_FILES["ip-link"]
    assert facts._file_of("nvidia-smi-q") == "nvidia-smi-q.txt"  # an accepted alternative, as captured
    assert facts._file_of("ibstat") == "ibstat.txt"
    assert facts._file_of("processes") == "processes"  # not a collected source: its own name
    assert all(source_for_file(name) == source for source, names in CANONICAL_FILES.items() for name in names)
