"""Recognisable fake secrets planted in every kind of input never come out: not on stdout/stderr, not in
--json, not in a bundle (directory or .tar.gz), not in the stored run (every SQLite column, attachments
unpacked), not in the HTML sheet, not in JUnit XML.

The secrets are fake but shaped like the real thing (Hugging Face ``hf_`` token, OpenAI-style ``sk-``
key, a PostgreSQL URL with a password, an ``Authorization: Bearer`` header) so the redactor's patterns
are what is tested, not a list of these exact strings.
"""

from __future__ import annotations

import gzip
import io
import os
import sqlite3
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from robustkit import REPO, TRACEBACK, Outcome, medic_env, run_medic

HF = "hf_QxTrPlNmVbKjHgFdSaZwEuRiOyTcAlWq7381"
SK = "sk-proj-Fk3LmQ9zR7tVw2XbN5cJ8pHd4Gs6Ya1E"
PG_PASSWORD = "pgPassZq81Wx7Lm"
PG_URL = f"postgresql://medic:{PG_PASSWORD}@db.internal:5432/history"
BEARER = "tokBrr5Ht8Jk2Nq6Vx9Zc3Ld7Pf1Sw4Gm"
SECRETS = (HF, SK, PG_PASSWORD, BEARER)
DATA = REPO / "tests" / "data"


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def _texts_in(path: Path) -> Iterator[tuple[str, str]]:
    """(where, text) for every file under path; tarballs and gzip files are opened too."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        raw = f.read_bytes()
        yield str(f), raw.decode("utf-8", "replace")
        if f.name.endswith((".tar.gz", ".tgz")):
            with tarfile.open(f, "r:gz") as tar:
                for member in tar.getmembers():
                    handle = tar.extractfile(member)
                    if handle is not None:
                        yield f"{f}!{member.name}", handle.read().decode("utf-8", "replace")
        elif raw[:2] == b"\x1f\x8b":
            yield f"{f}!gunzip", gzip.decompress(raw).decode("utf-8", "replace")


def _texts_in_sqlite(db: Path) -> Iterator[tuple[str, str]]:
    """Every cell of every table, blobs unpacked when they are gzip or tar.gz."""
    conn = sqlite3.connect(db)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):  # noqa: S608 - names from sqlite_master
                for cell in row:
                    if isinstance(cell, bytes):
                        yield table, cell.decode("utf-8", "replace")
                        if cell[:2] == b"\x1f\x8b":
                            try:
                                with tarfile.open(fileobj=io.BytesIO(cell), mode="r:gz") as tar:
                                    for m in tar.getmembers():
                                        h = tar.extractfile(m)
                                        if h is not None:
                                            yield f"{table}!{m.name}", h.read().decode("utf-8", "replace")
                            except tarfile.TarError:
                                yield f"{table}!gunzip", gzip.decompress(cell).decode("utf-8", "replace")
                    elif cell is not None:
                        yield table, str(cell)
    finally:
        conn.close()


def _assert_clean(outcome: Outcome, *artefacts: Path) -> None:
    assert TRACEBACK not in outcome.text, outcome.describe()
    assert not _leaks(outcome.text), f"secret on stdout/stderr: {_leaks(outcome.text)}\n{outcome.describe()}"
    for artefact in artefacts:
        assert artefact.exists(), f"expected output {artefact} was not written\n{outcome.describe()}"
        for where, text in _texts_in(artefact):
            assert not _leaks(text), f"secret {_leaks(text)} in {where}"


SECRET_LAUNCH = (
    f"HF_TOKEN={HF} DATABASE_URL={PG_URL} vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 8 "
    f"--api-key {SK} --enable-prefix-caching"
)
SECRET_ENV = f"HF_TOKEN={HF}\nOPENAI_API_KEY={SK}\nDATABASE_URL={PG_URL}\nVLLM_AUTH_HEADER=Authorization: Bearer {BEARER}\n"
SECRET_LOG = (
    "INFO 11-30 03:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
    f"INFO 11-30 03:00:00 [api_server.py:2] non-default args: {{'api_key': '{SK}', 'model': 'm'}}\n"
    f"DEBUG 11-30 03:00:01 [launcher.py:3] request headers: Authorization: Bearer {BEARER}\n"
    f"INFO 11-30 03:00:01 [hf.py:4] using HF_TOKEN={HF} to download\n"
    f"INFO 11-30 03:00:01 [db.py:5] connecting to {PG_URL}\n"
    "ERROR 11-30 03:00:02 [core.py:6] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("secret-home")


@pytest.fixture(scope="module")
def captured(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory of captured outputs (a real nvidia-smi) plus env/launch files full of secrets."""
    root = tmp_path_factory.mktemp("captured")
    for f in (DATA / "checks" / "bundles" / "b200-r575-k3").iterdir():
        if f.name != "launch.txt":
            (root / f.name).write_bytes(f.read_bytes())
    (root / "env.txt").write_text(SECRET_ENV, encoding="utf-8")
    (root / "launch.txt").write_text(SECRET_LAUNCH + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def bundle(captured: Path, home: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle-out") / "bundle"
    outcome = run_medic(
        ["collect", "--from", str(captured), "--launch", SECRET_LAUNCH, "-o", str(out), "--json"],
        medic_env(home),
    )
    assert outcome.returncode in (0, 1), outcome.describe()
    _assert_clean(outcome, out)
    return out


def test_collect_from_captured_outputs_and_a_launch_redacts_the_bundle(bundle: Path) -> None:
    env_text = (bundle / "env.txt").read_text(encoding="utf-8") if (bundle / "env.txt").exists() else ""
    assert "HF_TOKEN" in env_text, "the variable name stays so the reader knows it was set"


def test_collect_live_redacts_the_environment_into_a_tarball(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "live.tar.gz"
    env = medic_env(
        home,
        HF_TOKEN=HF,
        OPENAI_API_KEY=SK,
        DATABASE_URL=PG_URL,
        VLLM_EXTRA_HEADERS=f"Authorization: Bearer {BEARER}",
        PATH=f"{REPO / 'tests' / 'fakebin'}:{os.environ['PATH']}",
        FAKEBIN_DIR=str(DATA / "checks" / "bundles" / "b200-r575-k3"),
    )
    outcome = run_medic(["collect", "--launch", SECRET_LAUNCH, "--timeout", "20", "-o", str(out)], env)
    assert outcome.returncode in (0, 1), outcome.describe()
    _assert_clean(outcome, out)


def test_check_with_a_secret_launch_redacts_terminal_json_and_junit(
    captured: Path, home: Path, tmp_path: Path
) -> None:
    junit = tmp_path / "check.xml"
    for extra in ([], ["--json"], ["-v"]):
        outcome = run_medic(
            [
                "check",
                "--from",
                str(captured),
                "--recipe",
                "kimi-k3",
                "--launch",
                SECRET_LAUNCH,
                "--junit",
                str(junit),
            ]
            + extra,
            medic_env(home),
        )
        assert outcome.returncode in (0, 1), outcome.describe()
        _assert_clean(outcome, junit)


def test_check_on_the_bundle_and_its_snapshot(bundle: Path, home: Path, tmp_path: Path) -> None:
    junit = tmp_path / "snap.xml"
    for source in (["--from", str(bundle)], ["--snapshot", str(bundle / "snapshot.json")]):
        outcome = run_medic(["check", *source, "--json", "-v", "--junit", str(junit)], medic_env(home))
        assert outcome.returncode in (0, 1), outcome.describe()
        _assert_clean(outcome, junit)


def test_triage_redacts_log_lines_in_every_output(home: Path, tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text(SECRET_LOG, encoding="utf-8")
    junit = tmp_path / "triage.xml"
    for extra in ([], ["--json"]):
        outcome = run_medic(["triage", str(log), "--junit", str(junit), *extra], medic_env(home))
        assert outcome.returncode == 1, outcome.describe()  # the OOM line is a root cause
        assert "OutOfMemoryError" in outcome.stdout, outcome.describe()
        _assert_clean(outcome, junit)
    stdin_run = run_medic(["triage", "-", "--json"], medic_env(home), stdin=SECRET_LOG.encode())
    assert stdin_run.returncode == 1, stdin_run.describe()
    _assert_clean(stdin_run)


def test_cache_flag_redacts_launch_and_log(home: Path, tmp_path: Path) -> None:
    log = tmp_path / "engine.log"
    log.write_text(SECRET_LOG, encoding="utf-8")
    outcome = run_medic(
        ["cache", "flag", "--launch", SECRET_LAUNCH, "--log", str(log), "--json", "-v"], medic_env(home)
    )
    assert outcome.returncode in (0, 1), outcome.describe()
    _assert_clean(outcome)


def test_accept_report_history_diff_never_show_the_api_key_or_planted_secrets(
    captured: Path, home: Path, tmp_path: Path
) -> None:
    """The sim requires SK as its API key; accept gets it by --api-key-env; the server log and the
    archived outputs carry the other secrets. The outputs are the raw captured directory (not a bundle
    `collect` already redacted), so the archive step's own redaction is what is tested. Every output
    and every stored byte is searched."""
    from vllm_medic.sim.config import SimConfig
    from vllm_medic.sim.server import start_sim

    sim_log = tmp_path / "sim.log"
    sim_log.write_text(
        SECRET_LOG.replace("ERROR", "INFO").replace("OutOfMemoryError", "Note"), encoding="utf-8"
    )
    handle = start_sim(SimConfig(api_key=SK, log_file=str(sim_log)))
    try:
        url = handle.url if hasattr(handle, "url") else f"http://127.0.0.1:{handle.port}"
        db = tmp_path / "history.db"
        html, junit = tmp_path / "sheet.html", tmp_path / "accept.xml"
        env = medic_env(home, MEDIC_TEST_KEY=SK)
        outcome = run_medic(
            [
                "accept",
                url,
                "--api-key-env",
                "MEDIC_TEST_KEY",
                "--steps",
                "start,basic,prefix_reuse,ramp,archive",
                "--quick",
                "--concurrency",
                "1,2",
                "--requests-per-step",
                "4",
                "--logs",
                str(sim_log),
                "--bundle",
                str(captured),
                "--no-collect",
                "--db",
                f"sqlite:///{db}",
                "--html",
                str(html),
                "--junit",
                str(junit),
                "--json",
            ],
            env,
            timeout=180,
        )
        assert outcome.returncode in (0, 1), outcome.describe()
        assert '"steps"' in outcome.stdout, outcome.describe()
        _assert_clean(outcome, html, junit)
    finally:
        handle.stop()

    stored = list(_texts_in_sqlite(db))
    for where, text in stored:
        assert not _leaks(text), f"secret {_leaks(text)} stored in {where}"
    everything = "\n".join(text for _, text in stored)
    assert "HF_TOKEN" in everything and "DATABASE_URL" in everything, (
        "the planted env never reached the store"
    )
    stored_html, stored_junit = tmp_path / "report.html", tmp_path / "report.xml"
    for argv, artefacts in (
        (
            ["report", "latest", "--html", str(stored_html), "--junit", str(stored_junit)],
            (stored_html, stored_junit),
        ),
        (["report", "latest", "--json"], ()),
        (["report", "latest", "--html", "-"], ()),
        (["history", "--json"], ()),
        (["diff", "latest", "latest", "--json"], ()),
    ):
        shown = run_medic([*argv, "--db", f"sqlite:///{db}"], medic_env(home))
        assert shown.returncode in (0, 1), shown.describe()
        _assert_clean(shown, *artefacts)
    sheet = stored_html.read_text(encoding="utf-8")
    assert "<script" not in sheet.lower()


def test_history_with_a_postgres_password_in_the_url_never_prints_it(home: Path) -> None:
    dead = f"postgresql+psycopg://medic:{PG_PASSWORD}@127.0.0.1:9/history"
    for argv in (["history", "--db", dead], ["report", "latest", "--db", dead], ["history", "--json"]):
        outcome = run_medic(argv, medic_env(home, VLLM_MEDIC_DB=dead), timeout=60)
        assert outcome.returncode in (0, 2, 3), outcome.describe()
        _assert_clean(outcome)
