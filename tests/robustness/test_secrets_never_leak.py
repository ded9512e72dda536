"""Recognisable fake secrets planted in every kind of input never come out: not on stdout/stderr, not in
--json, not in a bundle (directory or .tar.gz), not in the stored run (every SQLite column, attachments
unpacked), not in the HTML sheet, not in JUnit XML.

The secrets are fake but shaped like the real thing (one per known token shape of
``data/secret_shapes.yaml``: Hugging Face, OpenAI, NGC, GitHub, AWS, Slack, GitLab, Google, JWT; plus a
PostgreSQL URL with a password, bearer and basic auth) so the redactor's patterns are what is tested, not
a list of these exact strings. Shapeless keys (``KEY_*``) are planted in the structural forms only
structure finds: vLLM's ``non-default args: {'api_key': ['KEY']}``, a Python repr ``api_key='KEY'``, a bare
``Authorization: KEY``, a Kubernetes ``args:`` list (the value on the next item), a docker-inspect JSON
array and ``docker login -p KEY``.

The matrix: every secret x every input channel (launch text, launch file, Kubernetes manifest, docker
inspect, env file, live environment, log file, stdin, server URL) x every output channel (stdout/stderr,
``--json``, bundle files, JUnit, HTML, the SQLite store) is grep-checked by the tests below.
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
NGC = "nvapi-Zk9Qw3Er7Ty1Ui5Op2As6Df4Gh8Jk0LzXcVbNmQw"
GHP = "ghp_Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0UvWx"
GH_PAT = "github_pat_11ABCDEFG0123456789_abcdefghijKLMNOPqr"
AWS = "AKIAZ7Q4W2E8R6T1Y3U5"
SLACK = "xoxb-123456789012-abcdefABCDEFgh"
GITLAB = "glpat-Ab1Cd2Ef3Gh4Ij5Kl6MnOp"
GOOGLE = "AIzaSyA1b2C3d4E5f6G7h8I9j0KlMnOpQrStUvW"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJtZWRpYyJ9.c2lnbmF0dXJlLXBhcnQtMTIz"
BASIC = "bWVkaWM6YmFzaWNQYXNzOTk="
SHAPED = {  # shape name in data/secret_shapes.yaml -> the planted token
    "huggingface": HF,
    "openai": SK,
    "ngc": NGC,
    "github": GHP,
    "github-fine-grained": GH_PAT,
    "aws-access-key-id": AWS,
    "slack": SLACK,
    "gitlab": GITLAB,
    "google-api-key": GOOGLE,
    "jwt": JWT,
}
# Shapeless values: only the structure around them says secret.
KEY_NONDEFAULT = "KEYnd7Q2w9E4r1T6"
KEY_REPR = "KEYrp3Z8x5C2v7B1"
KEY_AUTH = "KEYah6N1m4K9j2H5"
KEY_K8S = "KEYk8sP0o9I8u7Y6"
KEY_INSPECT = "KEYdiL5k4J3h2G1f"
KEY_LOGIN = "KEYdlQ1a2S3d4F5g"
KEY_CURL = "KEYcuW6e5R4t3Y2u"
SHAPELESS = (KEY_NONDEFAULT, KEY_REPR, KEY_AUTH, KEY_K8S, KEY_INSPECT, KEY_LOGIN, KEY_CURL)
SECRETS = (*SHAPED.values(), PG_PASSWORD, BEARER, BASIC, *SHAPELESS)
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
    f"HF_TOKEN={HF} NGC_API_KEY={NGC} DATABASE_URL={PG_URL} vllm serve moonshotai/Kimi-K3 "
    f"--tensor-parallel-size 8 --api-key {SK} --enable-prefix-caching"
)
# A launch file as operators keep them: the login that pulled the image, then the serve line.
SECRET_LAUNCH_FILE = (
    f"docker login nvcr.io -u '$oauthtoken' -p {KEY_LOGIN}\n"
    f"curl -u admin:{KEY_CURL} http://127.0.0.1:8000/health\n"
    f"GITHUB_TOKEN={GHP} AWS_ACCESS_KEY_ID={AWS} vllm serve moonshotai/Kimi-K3 \\\n"
    f"  --tensor-parallel-size 8 --api-key {SK}\n"
)
SECRET_K8S = f"""apiVersion: v1
kind: Pod
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.11.0
      command: ["vllm", "serve"]
      args:
        - moonshotai/Kimi-K3
        - --tensor-parallel-size
        - "8"
        - --api-key
        - {KEY_K8S}
      env:
        - name: HF_TOKEN
          value: {HF}
"""
SECRET_INSPECT = f"""[
  {{
    "Id": "sha256:0123",
    "Config": {{
      "Env": ["HF_TOKEN={HF}", "SLACK_WEBHOOK_TOKEN={SLACK}", "PATH=/usr/bin"],
      "Cmd": [
        "--model",
        "moonshotai/Kimi-K3",
        "--api-key",
        "{KEY_INSPECT}"
      ]
    }}
  }}
]
"""
SECRET_ENV = (
    f"HF_TOKEN={HF}\nOPENAI_API_KEY={SK}\nDATABASE_URL={PG_URL}\nVLLM_AUTH_HEADER=Authorization: Bearer {BEARER}\n"
    f"NGC_API_KEY={NGC}\nGH_PAT={GH_PAT}\nGITLAB={GITLAB}\nGOOGLE={GOOGLE}\nJWT={JWT}\n"
)
SECRET_LOG = (
    "INFO 11-30 03:00:00 [api_server.py:1] vLLM API server version 0.11.0\n"
    f"INFO 11-30 03:00:00 [api_server.py:2] non-default args: {{'api_key': ['{KEY_NONDEFAULT}'], 'model': 'm'}}\n"
    f"INFO 11-30 03:00:00 [api_server.py:2] args: Namespace(api_key='{KEY_REPR}', port=8000)\n"
    f"DEBUG 11-30 03:00:01 [launcher.py:3] request headers: Authorization: Bearer {BEARER}\n"
    f"DEBUG 11-30 03:00:01 [launcher.py:3] proxy header Authorization: {KEY_AUTH}\n"
    f"DEBUG 11-30 03:00:01 [launcher.py:3] upstream Authorization: Basic {BASIC}\n"
    f"INFO 11-30 03:00:01 [hf.py:4] using HF_TOKEN={HF} to download\n"
    f"INFO 11-30 03:00:01 [hf.py:4] pulling with {NGC} and {GHP} {GH_PAT} {AWS} {SLACK} {GITLAB}\n"
    f"INFO 11-30 03:00:01 [hf.py:4] session {JWT} key {GOOGLE}\n"
    f"INFO 11-30 03:00:01 [db.py:5] connecting to {PG_URL}\n"
    f"ERROR 11-30 03:00:02 [core.py:6] worker failed with token={HF} api_key='{KEY_REPR}'\n"
    "ERROR 11-30 03:00:02 [core.py:6] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
)


def test_the_matrix_has_a_planted_token_for_every_known_shape() -> None:
    from vllm_medic.redact import shapes

    assert {name for name, _, _ in shapes()} == set(SHAPED)


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
    (root / "launch.txt").write_text(SECRET_LAUNCH_FILE, encoding="utf-8")
    (root / "docker-image-inspect.json").write_text(SECRET_INSPECT, encoding="utf-8")
    (root / "vllm-pod.yaml").write_text(SECRET_K8S, encoding="utf-8")
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


@pytest.mark.parametrize("launch_file", ["launch.txt", "vllm-pod.yaml"])
def test_launch_files_in_every_argv_form_are_redacted_through_collect_and_check(
    captured: Path, home: Path, tmp_path: Path, launch_file: str
) -> None:
    """A launch file (login line, curl -u, continuation lines) and a Kubernetes manifest (the key on the
    next `args:` item) given to collect (bundle, then check --from it) and to check and cache flag."""
    out = tmp_path / "bundle.tar.gz"
    launch = str(captured / launch_file)
    collected = run_medic(
        ["collect", "--from", str(captured), "--launch", launch, "-o", str(out), "--json"], medic_env(home)
    )
    assert collected.returncode in (0, 1), collected.describe()
    _assert_clean(collected, out)
    junit = tmp_path / "check.xml"
    for argv in (
        ["check", "--from", str(out), "--json", "-v", "--junit", str(junit)],
        ["check", "--from", str(captured), "--launch", launch, "--json", "-v", "--junit", str(junit)],
    ):
        checked = run_medic(argv, medic_env(home))
        assert checked.returncode in (0, 1), checked.describe()
        _assert_clean(checked, junit)
    flagged = run_medic(["cache", "flag", "--launch", launch, "--json", "-v"], medic_env(home))
    assert flagged.returncode in (0, 1), flagged.describe()
    _assert_clean(flagged)


def test_a_password_in_a_server_url_never_reaches_an_error_message(home: Path) -> None:
    """cache probe / cache flag --server with user:PASSWORD@ against a dead loopback port: exit 3 with
    the request named, the password masked."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://medic:{PG_PASSWORD}@127.0.0.1:{port}"
    for argv in (["cache", "probe", url, "--json"], ["cache", "flag", "--server", url, "--json"]):
        outcome = run_medic(argv, medic_env(home), timeout=60)
        assert outcome.returncode == 3, outcome.describe()
        assert "127.0.0.1" in outcome.stderr, outcome.describe()
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
    assert "GITHUB_TOKEN" in everything and "AWS_ACCESS_KEY_ID" in everything, (
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
