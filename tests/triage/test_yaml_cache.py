"""The shipped YAML is parsed once per content and loaded from the user's cache after (yaml_cache.py):
the same documents, and never a truncated or foreign file."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from vllm_medic.triage.catalogue import safe_yaml

DOC = (
    "signatures:\n  - id: x\n    patterns: ['a\\d+', \"b\"]\n    weight: 0.5\n    on: true\n    none: null\n"
)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VLLM_MEDIC_CACHE_DIR", str(tmp_path))
    return tmp_path / "triage-yaml"


def _no_parse(monkeypatch):
    def refuse(*_a, **_k):
        raise AssertionError("parsed again")

    monkeypatch.setattr(yaml, "load", refuse)


def test_a_second_load_comes_from_the_cache_and_equals_the_parse(cache, monkeypatch):
    first = safe_yaml(DOC)
    assert first == yaml.safe_load(DOC) and len(list(cache.glob("*.marshal"))) == 1
    with monkeypatch.context() as m:
        _no_parse(m)
        assert safe_yaml(DOC) == first
    assert safe_yaml(DOC + "extra: 1\n")["extra"] == 1  # other text, other key


@pytest.mark.parametrize("damage", ["truncate", "flip", "foreign"])
def test_a_damaged_cache_file_is_parsed_again_and_rewritten(cache, damage):
    want = safe_yaml(DOC)
    (path,) = cache.glob("*.marshal")
    raw = path.read_bytes()
    bad = {"truncate": raw[:-3], "flip": raw[:-1] + bytes([raw[-1] ^ 1]), "foreign": b"junk\n" + raw}[damage]
    path.write_bytes(bad)
    assert safe_yaml(DOC) == want
    assert path.read_bytes() == raw


def test_a_document_marshal_cannot_hold_is_parsed_each_time(cache):
    assert safe_yaml("when: 2026-12-04\n")["when"].isoformat() == "2026-12-04"
    assert not list(cache.glob("*.marshal"))


def test_an_unwritable_cache_costs_only_the_parse(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("VLLM_MEDIC_CACHE_DIR", str(blocker))
    assert safe_yaml(DOC) == yaml.safe_load(DOC)


def test_triage_reads_the_shipped_yaml_from_the_cache_on_a_second_run(tmp_path):
    """Through the CLI: the first run leaves the parsed files, the second gives the same answer."""
    log = tmp_path / "rank0.log"
    log.write_text("INFO 12-04 01:00:00 [core.py:1] ok\ntorch.OutOfMemoryError: CUDA out of memory.\n")
    env = {"VLLM_MEDIC_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    runs = [
        subprocess.run(
            [sys.executable, "-m", "vllm_medic.cli", "triage", str(log), "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        for _ in range(2)
    ]
    assert [r.returncode for r in runs] == [runs[0].returncode] * 2
    first, second = (json.loads(r.stdout) for r in runs)
    assert first["root_cause"] == second["root_cause"] and first["root_cause"]["category"] == "oom_startup"
    assert len(list((tmp_path / "cache" / "triage-yaml").glob("*.marshal"))) >= 5
