"""Every command, through the real console script, against bad input: it must answer with a documented
exit code (0/1/2/3/130), a human message, and never a Python traceback or an 'internal error'.

The matrix is a table: (case id, argv template). Templates name the session's bad inputs
(``{binary}``, ``{url_html}``...; see conftest.BadInputs) and ``{out}``, a fresh directory per case.
A case whose command is still being built elsewhere and fails is listed in XFAIL with the owner area.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from robustkit import DOCUMENTED_EXIT_CODES, REPO, TRACEBACK, BadInputs, medic_env, run_medic

from vllm_medic.store.step_row import StepRow

DATA = REPO / "tests" / "data"

# Quick, bounded accept/cache probe options so a bad URL costs seconds, not the defaults' minutes.
_ACCEPT = "--steps start,basic --quick --ready-timeout 2s --request-timeout 5s --no-collect --db sqlite:///{out}/a.db"
_PLAN_OK = "--weights-gib 100 --gpu H100 --gpus 8 --tp 8 --max-model-len 8192"

CASES: list[tuple[str, str]] = [
    # --- collect: rebuild from captured outputs, or live (no GPU here: every probe is missing)
    ("collect-from-missing", "collect --from {missing} -o {out}/b"),
    ("collect-from-binary-file", "collect --from {binary} -o {out}/b"),
    ("collect-from-noise-dir", "collect --from {directory} -o {out}/b"),
    ("collect-from-truncated-tgz", "collect --from {truncated_tgz} -o {out}/b"),
    ("collect-from-socket", "collect --from {socket_file} -o {out}/b"),
    ("collect-from-empty", "collect --from {empty} -o {out}/b"),
    ("collect-launch-binary", "collect --from {directory} --launch {binary} -o {out}/b"),
    ("collect-launch-bad-yaml", "collect --from {directory} --launch {bad_yaml} -o {out}/b"),
    ("collect-launch-nul", "collect --from {directory} --launch {nul} -o {out}/b"),
    ("collect-model-bad-json", "collect --from {directory} --model {bad_json} -o {out}/b"),
    ("collect-model-json-list", "collect --from {directory} --model {json_list} -o {out}/b"),
    ("collect-model-binary", "collect --from {directory} --model {binary} -o {out}/b"),
    ("collect-output-is-file", "collect --from {directory} -o {binary}"),
    ("collect-output-under-file", "collect --from {directory} -o {empty}/sub/b"),
    ("collect-negative-timeout", "collect --timeout -1 -o {out}/b"),
    ("collect-zero-timeout", "collect --timeout 0 -o {out}/b"),
    ("collect-hosts-empty", "collect --hosts {empty} -o {out}/b"),
    ("collect-hosts-binary", "collect --hosts {binary} -o {out}/b"),
    ("collect-hosts-missing", "collect --hosts {missing} -o {out}/b"),
    ("collect-k8s-no-kubectl", "collect --k8s app=vllm -o {out}/b"),
    ("collect-ray-dead-address", "collect --ray 127.0.0.1:{dead_port} -o {out}/b"),
    ("collect-hosts-all-unreachable", "collect --hosts {dead_hosts} -o {out}/b"),
    ("collect-from-and-hosts", "collect --from {directory} --hosts {empty} -o {out}/b"),
    # --- check
    ("check-from-missing", "check --from {missing}"),
    ("check-from-binary", "check --from {binary}"),
    ("check-from-empty", "check --from {empty}"),
    ("check-from-noise-dir", "check --from {directory}"),
    ("check-from-truncated-tgz", "check --from {truncated_tgz}"),
    ("check-from-text-tgz", "check --from {not_a_tgz}"),
    ("check-from-socket", "check --from {socket_file}"),
    ("check-snapshot-bad-json", "check --snapshot {bad_json}"),
    ("check-snapshot-list", "check --snapshot {json_list}"),
    ("check-snapshot-wrong-obj", "check --snapshot {json_wrong_obj}"),
    ("check-snapshot-binary", "check --snapshot {binary}"),
    ("check-snapshot-dir", "check --snapshot {directory}"),
    ("check-snapshot-missing", "check --snapshot {missing}"),
    ("check-recipe-bad-yaml", "check --from {bundle} --recipe {bad_yaml}"),
    ("check-recipe-scalar", "check --from {bundle} --recipe {yaml_scalar}"),
    ("check-recipe-binary", "check --from {bundle} --recipe {binary}"),
    ("check-recipe-json-list", "check --from {bundle} --recipe {json_list}"),
    ("check-recipe-unknown", "check --from {directory} --recipe no-such-recipe"),
    ("check-recipe-dir", "check --from {bundle} --recipe {directory}"),
    ("check-model-bad-json", "check --from {bundle} --model {bad_json}"),
    ("check-model-list", "check --from {bundle} --model {json_list}"),
    ("check-model-wrong-obj", "check --from {bundle} --model {json_wrong_obj}"),
    ("check-model-binary", "check --from {bundle} --model {binary}"),
    ("check-launch-binary", "check --from {bundle} --launch {binary}"),
    ("check-launch-bad-yaml", "check --from {bundle} --launch {bad_yaml}"),
    ("check-launch-empty", "check --from {bundle} --launch ''"),
    (
        "check-launch-bad-numbers",
        "check --from {bundle} --launch 'vllm serve m --tensor-parallel-size -4 --max-model-len abc "
        "--gpu-memory-utilization 7 --pipeline-parallel-size 0'",
    ),
    ("check-bundle-json-junit-into-dir", "check --from {bundle} --json --junit {directory}"),
    ("check-multinode-list", "check --from {cluster_list}"),
    ("check-multinode-nodes-str", "check --from {cluster_nodes_str}"),
    ("check-multinode-bad-json", "check --from {cluster_bad_json}"),
    ("check-from-and-snapshot", "check --from {directory} --snapshot {bad_json}"),
    ("check-strategy-hardware-unknown", "check --from {bundle} --strategy nope --hardware nope"),
    ("check-junit-into-dir", "check --from {bundle} --junit {directory}"),
    ("check-junit-under-file", "check --from {bundle} --junit {empty}/x.xml"),
    ("check-negative-timeout", "check --timeout -1"),
    # --- doctor (collects here: no nvidia-smi on this machine)
    ("doctor-negative-timeout", "doctor --timeout -5"),
    ("doctor-recipe-bad-yaml", "doctor --recipe {bad_yaml}"),
    ("doctor-launch-binary", "doctor --launch {binary}"),
    ("doctor-model-noise-dir", "doctor --model {directory}"),
    ("doctor-junit-into-dir", "doctor --junit {directory}"),
    # --- rules / recipes
    ("rules-unknown-flag", "rules --bogus"),
    ("recipes-extra-arg", "recipes extra"),
    # --- triage
    ("triage-missing", "triage {missing}"),
    ("triage-noise-dir", "triage {directory}"),
    ("triage-empty", "triage {empty}"),
    ("triage-binary", "triage {binary}"),
    ("triage-nul", "triage {nul}"),
    ("triage-bad-utf8", "triage {bad_utf8}"),
    ("triage-truncated-gz", "triage {truncated_gz}"),
    ("triage-text-as-tgz", "triage {not_a_tgz}"),
    ("triage-truncated-tgz", "triage {truncated_tgz}"),
    ("triage-socket", "triage {socket_file}"),
    ("triage-glob-nomatch", "triage '{root}/*.nomatch'"),
    ("triage-no-args", "triage"),
    ("triage-catalogue-bad-yaml", "triage {bad_utf8} --catalogue {bad_yaml}"),
    ("triage-catalogue-scalar", "triage {bad_utf8} --catalogue {yaml_scalar}"),
    ("triage-catalogue-binary", "triage {bad_utf8} --catalogue {binary}"),
    ("triage-catalogue-missing", "triage {bad_utf8} --catalogue {missing}"),
    ("triage-catalogue-list-json", "triage {bad_utf8} --catalogue {json_list}"),
    ("triage-junit-into-dir", "triage {bad_utf8} --junit {directory}"),
    ("triage-kubectl-missing", "triage --kubectl vllm-0"),
    ("triage-previous-alone", "triage {bad_utf8} --previous"),
    # --- accept (real HTTP to loopback servers that are dead or misbehave)
    ("accept-dead-url", "accept {url_dead} " + _ACCEPT),
    ("accept-html-url", "accept {url_html} " + _ACCEPT),
    ("accept-500-url", "accept {url_500} " + _ACCEPT),
    ("accept-badjson-url", "accept {url_badjson} " + _ACCEPT),
    ("accept-raw-garbage-url", "accept {url_raw} " + _ACCEPT),
    ("accept-not-a-url", "accept 'not a url' " + _ACCEPT),
    ("accept-ftp-url", "accept ftp://127.0.0.1/ " + _ACCEPT),
    ("accept-concurrency-zero", "accept {url_dead} --concurrency 0 " + _ACCEPT),
    ("accept-concurrency-garbage", "accept {url_dead} --concurrency -1,abc " + _ACCEPT),
    ("accept-max-concurrency-zero", "accept {url_dead} --max-concurrency 0 " + _ACCEPT),
    ("accept-concurrency-conflict", "accept {url_dead} --concurrency 1,2 --max-concurrency 4 " + _ACCEPT),
    (
        "accept-requests-and-duration",
        "accept {url_dead} --requests-per-step 4 --step-duration 5s " + _ACCEPT,
    ),
    ("accept-request-timeout-neg", "accept {url_dead} --steps basic --request-timeout -5s --no-collect"),
    ("accept-soak-garbage", "accept {url_dead} --steps soak --soak banana --no-collect"),
    ("accept-error-budget-2", "accept {url_dead} --error-budget 2 " + _ACCEPT),
    ("accept-steps-unknown", "accept {url_dead} --steps nonsense --no-collect"),
    ("accept-logs-binary", "accept {url_dead} --logs {binary} " + _ACCEPT),
    ("accept-bundle-truncated", "accept {url_dead} --bundle {truncated_tgz} " + _ACCEPT),
    ("accept-db-garbage", "accept {url_dead} --steps basic --no-collect --db nonsense://"),
    ("accept-html-into-dir", "accept {url_dead} --html {directory} " + _ACCEPT),
    ("accept-api-key-env-unset", "accept {url_dead} --api-key-env MEDIC_UNSET_VAR " + _ACCEPT),
    # --- plan
    ("plan-nothing", "plan"),
    ("plan-config-missing", "plan --config {missing}"),
    ("plan-config-bad-json", "plan --config {bad_json}"),
    ("plan-config-list", "plan --config {json_list}"),
    ("plan-config-wrong-obj", "plan --config {json_wrong_obj}"),
    ("plan-config-binary", "plan --config {binary}"),
    ("plan-config-noise-dir", "plan --config {directory}"),
    ("plan-config-empty", "plan --config {empty}"),
    ("plan-recipe-bad-yaml", "plan --recipe {bad_yaml}"),
    ("plan-recipe-unknown", "plan --recipe nope"),
    ("plan-gpu-unknown", "plan --weights-gib 100 --gpu NOPE9000 --gpus 8 --tp 8 --max-model-len 8192"),
    ("plan-negative-memory", "plan " + _PLAN_OK + " --gpu-memory-gib -1"),
    ("plan-negative-weights", "plan --weights-gib -5 --gpu H100 --gpus 8 --tp 8 --max-model-len 8192"),
    ("plan-zero-tp", "plan --weights-gib 100 --tp 0 --max-model-len 8192"),
    ("plan-util-above-1", "plan " + _PLAN_OK + " --gpu-memory-utilization 1.5"),
    ("plan-negative-kv", "plan " + _PLAN_OK + " --kv-cache-gib -1"),
    ("plan-negative-overhead", "plan " + _PLAN_OK + " --overhead-gib -2"),
    ("plan-gpus-below-tp", "plan --weights-gib 100 --gpu H100 --gpus 2 --tp 8 --max-model-len 8192"),
    ("plan-kv-dtype-garbage", "plan " + _PLAN_OK + " --kv-cache-dtype int3"),
    ("plan-nan", "plan --weights-gib nan --gpu H100 --gpus 8 --tp 8 --max-model-len 8192"),
    ("plan-inf-memory", "plan " + _PLAN_OK + " --gpu-memory-gib inf"),
    ("plan-junit-into-dir", "plan " + _PLAN_OK + " --junit {directory}"),
    # --- sim: invalid options must be refused before it listens (a listening sim would time out here)
    ("sim-port-negative", "sim --port -1"),
    ("sim-port-too-big", "sim --port 70000"),
    ("sim-port-busy", "sim --port {busy_port}"),
    ("sim-host-invalid", "sim --port 0 --host 256.1.1.1"),
    ("sim-error-rate-2", "sim --port 0 --error-rate 2"),
    ("sim-routing-unknown", "sim --port 0 --routing nope"),
    ("sim-metric-names-unknown", "sim --port 0 --metric-names nope"),
    ("sim-crash-kind-unknown", "sim --port 0 --crash-kind nope"),
    ("sim-engines-zero", "sim --port 0 --engines 0"),
    ("sim-block-size-zero", "sim --port 0 --block-size 0"),
    ("sim-log-file-is-dir", "sim --port 0 --log-file {directory}"),
    ("sim-api-key-env-unset", "sim --port 0 --api-key-env MEDIC_UNSET_VAR"),
    # --- history / report / diff
    ("history-db-garbage-url", "history --db nonsense"),
    ("history-db-unknown-dialect", "history --db 'mysql://u:pw@127.0.0.1/x'"),
    ("history-db-missing-file", "history --db sqlite:///{missing}"),
    ("history-db-binary-file", "history --db sqlite:///{binary}"),
    ("history-db-empty-file", "history --db sqlite:///{empty}"),
    ("history-db-directory", "history --db sqlite:///{directory}"),
    ("history-db-text-file", "history --db sqlite:///{bad_utf8}"),
    ("history-postgres-dead", "history --db 'postgresql+psycopg://medic:pw@127.0.0.1:{dead_port}/x'"),
    ("history-limit-zero", "history --limit 0"),
    ("report-db-binary", "report latest --db sqlite:///{binary}"),
    ("report-db-missing", "report latest --db sqlite:///{missing}"),
    ("report-unknown-run", "report no-such-run --db sqlite:///{good_db}"),
    ("report-html-into-dir", "report latest --db sqlite:///{good_db} --html {directory}"),
    ("report-junit-under-file", "report latest --db sqlite:///{good_db} --junit {empty}/x.xml"),
    ("diff-db-binary", "diff a b --db sqlite:///{binary}"),
    ("diff-unknown-runs", "diff nope1 nope2 --db sqlite:///{good_db}"),
    ("diff-db-empty", "diff latest latest --db sqlite:///{empty}"),
    # --- health
    ("health-from-missing", "health --from {missing}"),
    ("health-from-binary-file", "health --from {binary}"),
    ("health-from-noise-dir", "health --from {directory}"),
    ("health-from-truncated-tgz", "health --from {truncated_tgz}"),
    ("health-tp-zero", "health --from {directory} --tp 0"),
    ("health-tp-negative", "health --from {directory} --tp -1 --pp -2"),
    ("health-timeout-negative", "health --timeout -1"),
    ("health-save-is-file", "health --from {directory} --save {binary}"),
    ("health-save-under-file", "health --from {directory} --save {empty}/x"),
    ("health-junit-into-dir", "health --from {directory} --junit {directory}"),
    # --- nccl-path
    ("nccl-missing", "nccl-path {missing}"),
    ("nccl-noise-dir", "nccl-path {directory}"),
    ("nccl-empty", "nccl-path {empty}"),
    ("nccl-binary", "nccl-path {binary}"),
    ("nccl-nul", "nccl-path {nul}"),
    ("nccl-bad-utf8", "nccl-path {bad_utf8}"),
    ("nccl-truncated-gz", "nccl-path {truncated_gz}"),
    ("nccl-socket", "nccl-path {socket_file}"),
    ("nccl-from-truncated-tgz", "nccl-path {bad_utf8} --from {truncated_tgz}"),
    ("nccl-from-binary", "nccl-path {bad_utf8} --from {binary}"),
    ("nccl-junit-into-dir", "nccl-path {nccl_log} --junit {directory}"),
    ("nccl-junit-under-file", "nccl-path {nccl_log} --junit {empty}/x.xml"),
    # --- cache flag / diff / probe
    ("cache-flag-nothing", "cache flag"),
    ("cache-flag-launch-binary", "cache flag --launch {binary}"),
    ("cache-flag-launch-bad-yaml", "cache flag --launch {bad_yaml}"),
    ("cache-flag-launch-list-json", "cache flag --launch {json_list}"),
    ("cache-flag-log-binary", "cache flag --log {binary}"),
    ("cache-flag-log-truncated-gz", "cache flag --log {truncated_gz}"),
    ("cache-flag-log-missing", "cache flag --log {missing}"),
    ("cache-flag-log-dir", "cache flag --log {directory}"),
    ("cache-flag-log-socket", "cache flag --log {socket_file}"),
    ("cache-flag-model-bad-json", "cache flag --launch 'vllm serve m' --model-config {bad_json}"),
    ("cache-flag-model-list", "cache flag --launch 'vllm serve m' --model-config {json_list}"),
    ("cache-flag-server-dead", "cache flag --server {url_dead}"),
    ("cache-flag-server-html", "cache flag --server {url_html}"),
    ("cache-flag-server-500", "cache flag --server {url_500}"),
    ("cache-flag-server-badjson", "cache flag --server {url_badjson}"),
    ("cache-flag-server-raw", "cache flag --server {url_raw}"),
    ("cache-flag-server-not-url", "cache flag --server 'not a url'"),
    ("cache-diff-bad-json", "cache diff {bad_json} {bad_json}"),
    ("cache-diff-binary", "cache diff {binary}"),
    ("cache-diff-list-vs-obj", "cache diff {json_list} {json_wrong_obj}"),
    ("cache-diff-missing", "cache diff {missing} {missing}"),
    ("cache-diff-dir", "cache diff {directory} {directory}"),
    ("cache-diff-empty", "cache diff {empty}"),
    ("cache-diff-nul", "cache diff {nul}"),
    ("cache-diff-server-dead", "cache diff {req_a} {req_b} --server {url_dead}"),
    ("cache-diff-server-html", "cache diff {req_a} {req_b} --server {url_html}"),
    ("cache-diff-server-raw", "cache diff {req_a} {req_b} --server {url_raw}"),
    ("cache-diff-tokenizer-binary", "cache diff {req_a} {req_b} --tokenizer {binary}"),
    ("cache-diff-tokenizer-bad-json", "cache diff {req_a} {req_b} --tokenizer {bad_json}"),
    ("cache-diff-block-size-zero", "cache diff {req_a} {req_b} --block-size 0"),
    ("cache-probe-dead", "cache probe {url_dead} --filler-repeats 1"),
    ("cache-probe-html", "cache probe {url_html} --filler-repeats 1"),
    ("cache-probe-500", "cache probe {url_500} --filler-repeats 1"),
    ("cache-probe-badjson", "cache probe {url_badjson} --filler-repeats 1"),
    ("cache-probe-raw", "cache probe {url_raw} --filler-repeats 1"),
    ("cache-probe-not-url", "cache probe 'not a url' --filler-repeats 1"),
    ("cache-probe-request-bad-json", "cache probe {url_dead} --request {bad_json}"),
    ("cache-probe-request-list", "cache probe {url_dead} --request {json_list}"),
    ("cache-probe-out-into-dir", "cache probe {url_html} --filler-repeats 1 --out {directory}"),
    ("cache-probe-logs-binary", "cache probe {url_html} --filler-repeats 1 --logs {binary}"),
    ("cache-probe-store-garbage", "cache probe {url_html} --filler-repeats 1 --store nonsense://"),
    ("cache-probe-launch-binary", "cache probe {url_html} --filler-repeats 1 --launch {binary}"),
]

# Cases that broke in areas built in parallel, kept here as strict xfails until fixed (none open now).
XFAIL: dict[str, str] = {}

# What a case may answer beyond "a documented code": a missing input is a usage error, never 0.
MUST_BE_USAGE = {
    "check-from-missing",
    "accept-not-a-url",
    "accept-concurrency-conflict",
    "accept-requests-and-duration",
    "collect-ray-dead-address",
    "check-from-truncated-tgz",
    "check-from-binary",
    "check-multinode-list",
    "check-multinode-bad-json",
    "check-snapshot-missing",
    "check-recipe-unknown",
    "triage-missing",
    "nccl-missing",
    "plan-config-missing",
    "plan-recipe-unknown",
    "health-from-missing",
    "cache-flag-log-missing",
    "cache-diff-missing",
    "report-db-missing",
    "rules-unknown-flag",
    "recipes-extra-arg",
    "sim-port-busy",
    "cache-flag-server-not-url",
    "cache-probe-not-url",
    "health-timeout-negative",
}


def _params() -> list[object]:
    out = []
    for case_id, template in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[case_id])] if case_id in XFAIL else []
        out.append(pytest.param(case_id, template, id=case_id, marks=marks))
    return out


@pytest.fixture(scope="module")
def good_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A history with one real finished run, written through the public store API."""
    from vllm_medic.store.api import open_store

    path = tmp_path_factory.mktemp("good-db") / "h.db"
    store = open_store(f"sqlite:///{path}")
    run_id = store.start_run("accept", "http://127.0.0.1:1", {"steps": ["basic"]})
    store.record_step(run_id, StepRow("basic", "fail"))
    store.finish_run(run_id, verdict="fail")
    return path


@pytest.fixture(scope="module")
def requests_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("requests")
    a, b = root / "a.json", root / "b.json"
    a.write_text('{"model": "m", "messages": [{"role": "user", "content": "hello there"}]}')
    b.write_text('{"model": "m", "messages": [{"role": "user", "content": "hello world"}]}')
    return a, b


def _multinode_bundles(root: Path) -> dict[str, str]:
    """Multi-node bundle directories whose cluster.json is of the wrong shape (built once, idempotent)."""
    out = {}
    for name, text in (
        ("cluster_list", "[1, 2, 3]"),
        ("cluster_nodes_str", '{"nodes": "gpu-01", "schema": 1}'),
        ("cluster_bad_json", '{"nodes": [{"node": "a", "dir": "a", "status": "ok"'),
    ):
        d = root / name
        d.mkdir(exist_ok=True)
        (d / "cluster.json").write_text(text, encoding="utf-8")
        out[name] = str(d)
    hosts = root / "dead-hosts.txt"
    hosts.write_text("# nothing listens on port 9 of loopback\n127.0.0.1:9\n", encoding="utf-8")
    out["dead_hosts"] = str(hosts)
    return out


def _render(template: str, bad: BadInputs, out: Path, good_db: Path, reqs: tuple[Path, Path]) -> list[str]:
    import shlex

    values = {name: str(path) for name, path in bad.all_files().items()}
    values.update(
        root=str(bad.root),
        out=str(out),
        url_dead=bad.url_dead,
        url_html=bad.url_html,
        url_500=bad.url_500,
        url_badjson=bad.url_badjson,
        url_raw=bad.url_raw,
        busy_port=bad.url_html.rsplit(":", 1)[1],
        dead_port=bad.url_dead.rsplit(":", 1)[1],
        good_db=str(good_db),
        bundle=str(DATA / "checks" / "bundles" / "b200-r575-k3"),
        nccl_log=str(DATA / "health" / "nccl" / "socket-between-nodes-nccl-952-excerpt.txt"),
        req_a=str(reqs[0]),
        req_b=str(reqs[1]),
        **_multinode_bundles(bad.root),
    )
    return shlex.split(template.format(**values))


@pytest.mark.parametrize(("case_id", "template"), _params())
def test_bad_input_gets_a_message_and_a_documented_exit_code(
    case_id: str,
    template: str,
    bad: BadInputs,
    medic_home: Path,
    tmp_path: Path,
    good_db: Path,
    requests_pair: tuple[Path, Path],
) -> None:
    argv = _render(template, bad, tmp_path, good_db, requests_pair)
    timeout = 20 if case_id.startswith("sim-") else 90
    try:
        outcome = run_medic(argv, medic_env(medic_home), timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{case_id}: no answer within {exc.timeout}s: {argv}")
    assert TRACEBACK not in outcome.text, outcome.describe()
    assert "internal error" not in outcome.text, outcome.describe()
    # Click prints 'Aborted!' (exit 1) for an EOFError/KeyboardInterrupt that escaped: a crash in disguise.
    assert "Aborted!" not in outcome.text, outcome.describe()
    assert outcome.returncode in DOCUMENTED_EXIT_CODES, outcome.describe()
    assert outcome.text.strip(), f"no message at all\n{outcome.describe()}"
    if outcome.returncode in (2, 3):
        assert len(outcome.stderr.strip()) >= 10, (
            f"error exit without a message on stderr\n{outcome.describe()}"
        )
    if case_id in MUST_BE_USAGE:
        assert outcome.returncode == 2, outcome.describe()


def test_unwritable_junit_keeps_the_findings_on_screen(bad: BadInputs, medic_home: Path) -> None:
    """An unwritable --junit FILE is exit 3 naming the file, after the findings were already printed."""
    bundle = DATA / "checks" / "bundles" / "b200-r575-k3"
    shown = run_medic(
        ["check", "--from", str(bundle), "--recipe", "kimi-k3", "--json", "--junit", str(bad.directory)],
        medic_env(medic_home),
    )
    assert shown.returncode == 3, shown.describe()
    assert "DRV002" in shown.stdout, shown.describe()  # the JSON findings came out first
    assert "JUnit" in shown.stderr and str(bad.directory) in shown.stderr, shown.describe()

    plan = run_medic(
        ["plan", *_PLAN_OK.split(), "--junit", f"{bad.empty}/under-a-file.xml"], medic_env(medic_home)
    )
    assert plan.returncode == 3, plan.describe()
    assert "weights per GPU" in plan.stdout, plan.describe()
    assert "under-a-file.xml" in plan.stderr, plan.describe()


def test_binary_hosts_file_is_a_usage_error_naming_the_file(bad: BadInputs, medic_home: Path) -> None:
    outcome = run_medic(["collect", "--hosts", str(bad.binary)], medic_env(medic_home))
    assert outcome.returncode == 2, outcome.describe()
    assert str(bad.binary) in outcome.stderr and "not a text hosts file" in outcome.stderr, outcome.describe()


@pytest.mark.parametrize("flag", ["--weights-gib nan", "--weights-gib -5", "--gpu-memory-gib inf"])
def test_plan_rejects_non_finite_and_negative_sizes(flag: str, medic_home: Path) -> None:
    argv = ["plan", "--weights-gib", "100", "--tp", "8", "--max-model-len", "8192", *flag.split()]
    outcome = run_medic(argv, medic_env(medic_home))
    assert outcome.returncode == 2, outcome.describe()
    assert flag.split()[0] in outcome.stderr, outcome.describe()


def test_cache_probe_against_garbage_answers_says_no_usable_answer_not_a_cache_miss(
    bad: BadInputs, medic_home: Path
) -> None:
    """A server whose chat answers are not SSE cannot show a prefix-cache miss: the verdict says so."""
    import json

    outcome = run_medic(
        ["cache", "probe", bad.url_badjson, "--filler-repeats", "1", "--json"], medic_env(medic_home)
    )
    assert outcome.returncode == 1, outcome.describe()
    report = json.loads(outcome.stdout)
    ids = [f["id"] for f in report["findings"]]
    assert "CACHE-PROBE007" in ids and "CACHE-PROBE005" not in ids, ids
    finding = next(f for f in report["findings"] if f["id"] == "CACHE-PROBE007")
    assert "no usable answer" in finding["title"] and "[DONE]" in finding["title"], finding["title"]


def test_cache_flag_names_the_inputs_that_held_nothing(bad: BadInputs, medic_home: Path) -> None:
    import json

    outcome = run_medic(
        ["cache", "flag", "--log", str(bad.binary), "--server", bad.url_html, "--json"], medic_env(medic_home)
    )
    assert outcome.returncode == 0, outcome.describe()  # a warning: nothing failed, nothing could be compared
    finding = json.loads(outcome.stdout)["findings"][0]
    assert finding["id"] == "CACHE-FLAG000", finding
    assert "hold no prefix-caching setting" in finding["title"], finding
    evidence = " ".join(finding["evidence"])
    assert str(bad.binary) in evidence and f"{bad.url_html}/metrics" in evidence, evidence


def test_a_fan_out_that_reaches_no_node_is_exit_3_and_keeps_the_bundle(
    bad: BadInputs, medic_home: Path, tmp_path: Path
) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1:9\n", encoding="utf-8")
    outcome = run_medic(["collect", "--hosts", str(hosts), "-o", str(tmp_path / "b")], medic_env(medic_home))
    assert outcome.returncode == 3, outcome.describe()
    assert "no node could be collected (0/1)" in outcome.stderr, outcome.describe()
    assert (tmp_path / "b" / "cluster.json").is_file()
