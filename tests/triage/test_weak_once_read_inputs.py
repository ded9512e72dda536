"""The weak layer's second look covers inputs that can be read only once: stdin and `docker logs`.

A log piped in, or replayed by `docker logs`, must get the root the same log gets as a file; the
first pass keeps a copy (triage/spool.py) for the second look. Driven through the real console
script; the docker case through the fake `docker` (tests/triage/fakebin) over a blind-round log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from triage_json import blind_case, root_cause

MEDIC = Path(sys.executable).parent / "vllm-medic"
FAKEBIN = Path(__file__).resolve().parent / "fakebin"
# round 8's vLLM 0.8 `Prefix cache hit rate: GPU: 0.00%`: no failure word; the weak layer's root, line 4.
CASE = blind_case("round8.jsonl", "vllm-17954")


def _triage(
    *args: str, stdin: bytes | None = None, env: dict | None = None, redirect: Path | None = None
) -> dict:
    with redirect.open("rb") if redirect is not None else open(os.devnull, "rb") as fh:
        p = subprocess.run(
            [str(MEDIC), "triage", *args, "--json"],
            input=stdin,
            stdin=None if stdin is not None else fh,
            capture_output=True,
            env=env,
            timeout=120,
        )
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


def test_stdin_gets_the_weak_root_a_file_gets(tmp_path):
    as_file = root_cause(tmp_path, CASE["log"])
    rc = _triage("-", stdin=CASE["log"].encode())["root_cause"]
    assert rc is not None, "stdin: no root"
    assert (rc["layer"], rc["category"], rc["line"], rc["source"]) == (
        "weak",
        as_file["category"],
        as_file["line"],
        "<stdin>",
    )
    assert rc["text"] == as_file["text"]


def test_stdin_redirected_from_a_file_is_read_like_the_file(tmp_path):
    log = tmp_path / "redirected.log"
    log.write_text(CASE["log"], encoding="utf-8")
    rc = _triage("-", redirect=log)["root_cause"]
    assert rc is not None and (rc["layer"], rc["line"], rc["source"]) == ("weak", 4, "<stdin>")


def test_docker_logs_stderr_gets_the_weak_root(tmp_path):
    (tmp_path / "cache-cold").mkdir()
    (tmp_path / "cache-cold" / "stderr.log").write_text(CASE["log"], encoding="utf-8")
    env = dict(os.environ, PATH=f"{FAKEBIN}{os.pathsep}{os.environ['PATH']}", FAKE_DOCKER_DATA=str(tmp_path))
    rc = _triage("--docker", "cache-cold", env=env)["root_cause"]
    assert rc is not None, "docker: no root"
    assert (rc["layer"], rc["source"], rc["line"]) == ("weak", "docker:cache-cold (stderr)", 4)
    assert rc["timestamp"].startswith("2026-11-30T02:36:")  # the copy keeps docker's timestamp prefix


def test_a_copy_cut_short_is_said_not_hidden(tmp_path):
    env = dict(os.environ, VLLM_MEDIC_TRIAGE_SPOOL_MAX="16")
    d = _triage("-", stdin=CASE["log"].encode(), env=env)
    assert d["root_cause"] is None  # the cue line lies past the first 16 bytes kept
    assert any("<stdin>: the second look covers only its first 16 bytes" in w for w in d["warnings"])
