"""Property tests of the public parsers: whatever text, bytes or JSON they are fed, they answer with a
result (or the documented ``UsageError`` where a user-supplied file is malformed), never an exception.

Inputs are both unstructured (random text/bytes) and structured (real recipes, snapshots and model
configs from tests/data with random leaves replaced), because the second kind reaches the code behind
the first line of type checks. Anything a parser accepts is then judged by the rules/planner too: an
input that loads must not crash the next stage either.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from robustkit import REPO
from typer.testing import CliRunner

from vllm_medic.errors import UsageError

DATA = REPO / "tests" / "data"
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Random text that looks a little like the real thing: separators, numbers, NUL, odd unicode.
TOKENS = st.sampled_from(
    list("|+-=:./ \t\n\r\"'{}[]<>$#()\\,;0123456789abcxyzNVGPUMiB%_\x00\x1b\u2019\u00e9\ufffd")
    + ["NVIDIA-SMI ", "Driver Version: ", "GPU0", "vllm serve ", "--tensor-parallel-size", "nan", "inf", "-1"]
)
TEXTISH = st.one_of(
    st.text(max_size=400),
    st.lists(TOKENS, max_size=200).map("".join),
    st.binary(max_size=600).map(lambda b: b.decode("utf-8", "replace")),
    st.binary(max_size=600).map(lambda b: b.decode("latin-1")),
)
JSON_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
)
JSON_ANY = st.recursive(
    JSON_LEAF,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)


def _mutate(doc: Any, data: st.DataObject, depth: int = 0) -> Any:
    """Replace one random leaf or sub-tree of a real document by a random JSON value (or drop a key)."""
    if isinstance(doc, dict) and doc and depth < 6:
        key = data.draw(st.sampled_from(sorted(doc, key=str)))
        action = data.draw(st.sampled_from(["descend", "replace", "drop"]))
        out = dict(doc)
        if action == "drop":
            del out[key]
        elif action == "replace":
            out[key] = data.draw(JSON_ANY)
        else:
            out[key] = _mutate(doc[key], data, depth + 1)
        return out
    if isinstance(doc, list) and doc and depth < 6:
        i = data.draw(st.integers(min_value=0, max_value=len(doc) - 1))
        out_list = list(doc)
        out_list[i] = _mutate(doc[i], data, depth + 1)
        return out_list
    return data.draw(JSON_ANY)


def _mutated(doc: Any, data: st.DataObject) -> Any:
    rounds = data.draw(st.integers(min_value=1, max_value=4))
    for _ in range(rounds):
        doc = _mutate(doc, data)
    return doc


# --- collect parsers -------------------------------------------------------------------------------


def _collect_parsers() -> list[Callable[[str], Any]]:
    import importlib
    import pkgutil

    import vllm_medic.collect.parsers as pkg

    found = []
    for info in pkgutil.iter_modules(pkg.__path__):
        module = importlib.import_module(f"{pkg.__name__}.{info.name}")
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if not name.startswith("parse_") or fn.__module__ != module.__name__:
                continue
            required = [
                p for p in inspect.signature(fn).parameters.values() if p.default is inspect.Parameter.empty
            ]
            if len(required) == 1:
                found.append(fn)
    return found


COLLECT_PARSERS = _collect_parsers()


def test_the_parser_list_is_not_empty() -> None:
    names = {fn.__name__ for fn in COLLECT_PARSERS}
    assert {"parse_nvidia_smi_table", "parse_topology", "parse_lsmod", "parse_env"} <= names, names


@FUZZ
@given(text=TEXTISH)
def test_collect_parsers_never_raise(text: str) -> None:
    for parse in COLLECT_PARSERS:
        parse(text)


# --- launch ----------------------------------------------------------------------------------------

VLLM_FLAGS = [
    "--tensor-parallel-size",
    "-tp",
    "--pipeline-parallel-size",
    "--data-parallel-size",
    "--max-model-len",
    "--gpu-memory-utilization",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--kv-cache-dtype",
    "--block-size",
    "--config",
    "--api-key",
    "--enable-expert-parallel",
    "--max-num-seqs",
    "-e",
    "--env",
    "--shm-size",
    "--ipc",
]
LAUNCH_WORD = st.one_of(
    st.sampled_from(VLLM_FLAGS),
    st.sampled_from(
        ["8", "-4", "0", "abc", "1e999", "nan", "0.95", "7", "4Gi", "=", "$X", "${Y:-2}", "'", '"']
    ),
    st.text(max_size=10),
)
LAUNCH_TEXT = st.one_of(
    TEXTISH,
    st.lists(LAUNCH_WORD, max_size=30).map(lambda ws: "vllm serve moonshotai/Kimi-K3 " + " ".join(ws)),
    st.lists(LAUNCH_WORD, max_size=30).map(
        lambda ws: "docker run --gpus all vllm/vllm-openai:latest " + " ".join(ws)
    ),
    JSON_ANY.map(json.dumps),
    JSON_ANY.map(lambda d: yaml.safe_dump(d, allow_unicode=True)),
)


@FUZZ
@given(text=LAUNCH_TEXT)
def test_parse_launch_reads_any_text_without_falling_back_to_a_crash_note(text: str) -> None:
    """parse_launch catches everything (documented), so the property is stronger: no input should end in
    its catch-all note 'could not parse the launch: <ExceptionName>', which hides a parser bug."""
    from vllm_medic.collect.launch import parse_launch

    launch = parse_launch(text)
    crashed = [w for w in launch.warnings if w.startswith("could not parse the launch:")]
    assert not crashed, crashed


@FUZZ
@given(argv=st.lists(LAUNCH_WORD, max_size=30))
def test_parse_launch_reads_any_argv(argv: list[str]) -> None:
    from vllm_medic.collect.launch import parse_launch

    launch = parse_launch(["vllm", "serve", "m", *argv])
    crashed = [w for w in launch.warnings if w.startswith("could not parse the launch:")]
    assert not crashed, crashed


# --- Prometheus ------------------------------------------------------------------------------------

METRIC_LINE = st.one_of(
    TEXTISH,
    st.tuples(
        st.sampled_from(
            ["vllm:prefix_cache_hits_total", "vllm:num_requests_running", "vllm:kv_cache_usage_perc"]
        ),
        st.dictionaries(
            st.sampled_from(["engine", "model_name", "le", 'x"y']), st.text(max_size=8), max_size=3
        ),
        st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.text(max_size=6)),
    ).map(
        lambda t: (
            t[0] + ("{" + ",".join(f'{k}="{v}"' for k, v in t[1].items()) + "}" if t[1] else "") + " " + t[2]
        )
    ),
)


@FUZZ
@given(before=st.lists(METRIC_LINE, max_size=30), after=st.lists(METRIC_LINE, max_size=30))
def test_parse_prometheus_and_its_helpers_never_raise(before: list[str], after: list[str]) -> None:
    from vllm_medic.serve.metrics import diff, parse_prometheus, prefix_cache_hit_rate

    a, b = parse_prometheus("\n".join(before)), parse_prometheus("\n".join(after))
    prefix_cache_hit_rate(a)
    prefix_cache_hit_rate(diff(a, b))


# --- Snapshot and the rules that read it ------------------------------------------------------------


def _real_snapshot() -> dict[str, Any]:
    from vllm_medic.checks.inputs import from_bundle

    ev = from_bundle(DATA / "checks" / "bundles" / "b200-r575-k3")
    ev.snapshot.launch = __import__("vllm_medic.collect.launch", fromlist=["x"]).parse_launch(
        "vllm serve moonshotai/Kimi-K3 -tp 8 --enable-expert-parallel --gpu-memory-utilization 0.9"
    )
    return ev.snapshot.to_dict()


REAL_SNAPSHOT = _real_snapshot()


@FUZZ
@given(data=st.data())
def test_snapshot_from_any_dict_round_trips_and_the_rules_judge_it(data: st.DataObject) -> None:
    from vllm_medic.checks.api import run_checks
    from vllm_medic.recipes import load_recipe
    from vllm_medic.snapshot import Snapshot

    raw = data.draw(st.one_of(JSON_ANY.filter(lambda d: isinstance(d, dict)), st.just(REAL_SNAPSHOT)))
    doc = _mutated(raw, data)
    if not isinstance(doc, dict):
        doc = {"extra": doc}
    snap = Snapshot.from_dict(doc)
    json.dumps(snap.to_dict(), default=str)
    for recipe in ("generic", "kimi-k3"):
        findings = run_checks(snap, load_recipe(recipe))
        assert findings, "the rules always say something, even about an empty snapshot"


# --- recipes ---------------------------------------------------------------------------------------

SHIPPED_RECIPE = yaml.safe_load(
    (REPO / "src" / "vllm_medic" / "recipes" / "data" / "kimi-k3.yaml").read_text(encoding="utf-8")
)
OFFICIAL = sorted((DATA / "checks" / "official-recipes").rglob("*.yaml"))


def _load_recipe_text(text: str) -> Any:
    from vllm_medic.recipes import load_recipe

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "recipe.yaml"
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        try:
            return load_recipe(str(path))
        except UsageError:
            return None


@FUZZ
@given(text=TEXTISH)
def test_recipe_from_random_text_is_a_usage_error_or_a_recipe(text: str) -> None:
    _load_recipe_text(text)


@pytest.mark.skipif(not OFFICIAL, reason="no official recipe samples in tests/data/checks")
@FUZZ
@given(data=st.data())
def test_recipe_from_a_mutated_real_recipe_loads_or_is_refused_and_never_crashes_the_rules(
    data: st.DataObject,
) -> None:
    from vllm_medic.checks.api import run_checks
    from vllm_medic.snapshot import Snapshot

    sources = [SHIPPED_RECIPE] + [yaml.safe_load(p.read_text(encoding="utf-8")) for p in OFFICIAL[:3]]
    doc = _mutated(data.draw(st.sampled_from(sources)), data)
    recipe = _load_recipe_text(yaml.safe_dump(doc, allow_unicode=True))
    if recipe is not None:
        run_checks(Snapshot.from_dict(REAL_SNAPSHOT), recipe)
        run_checks(Snapshot(), recipe)


# --- plan: model config reading and the planner behind it -------------------------------------------

PLAN_CONFIGS = [
    json.loads(p.read_text(encoding="utf-8")) for p in sorted((DATA / "plan").glob("*.config.json"))
]


@FUZZ
@given(data=st.data())
def test_plan_config_parsing_raises_only_value_error(data: st.DataObject) -> None:
    from vllm_medic.plan.shape import parse_model_config

    doc = _mutated(data.draw(st.sampled_from(PLAN_CONFIGS)), data)
    if not isinstance(doc, dict):
        return
    with contextlib.suppress(ValueError):  # the documented refusal; anything else fails the test
        parse_model_config(doc)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_plan_command_on_any_config_file_exits_0_1_or_2(data: st.DataObject, tmp_path_factory: Any) -> None:
    """Through the public CLI (in-process): a mutated real config.json is planned or refused with exit 2."""
    from vllm_medic.cli import app

    raw = data.draw(
        st.one_of(
            st.just(None),
            st.binary(max_size=200),
            JSON_ANY.map(lambda d: json.dumps(d).encode()),
        )
    )
    if raw is None:
        doc = _mutated(data.draw(st.sampled_from(PLAN_CONFIGS)), data)
        raw = json.dumps(doc, allow_nan=True).encode()
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_bytes(raw)
    tp = data.draw(st.sampled_from(["1", "2", "8"]))
    result = CliRunner().invoke(app, ["plan", "--config", str(path), "--tp", tp, "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}\nconfig: {raw[:400]!r}"
    )
    assert result.exit_code in (0, 1, 2), result.output
    if result.exit_code in (0, 1):
        payload = json.loads(result.stdout)
        for value in _numbers(payload):
            assert math.isfinite(value), f"non-finite number in the plan: {payload}"


def _numbers(obj: Any) -> list[float]:
    if isinstance(obj, bool):
        return []
    if isinstance(obj, int | float):
        return [float(obj)]
    if isinstance(obj, dict):
        return [n for v in obj.values() for n in _numbers(v)]
    if isinstance(obj, list):
        return [n for v in obj for n in _numbers(v)]
    return []


# --- triage, health parsers, SSE, cache diff ---------------------------------------------------------

LOG_LINE = st.one_of(
    TEXTISH,
    st.sampled_from(
        [
            "ERROR 11-30 03:00:02 [core.py:6] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate ",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.12/site-packages/vllm/engine.py", line 12, in run',
            "NVRM: Xid (PCI:0000:1b:00): 79, pid=1234, GPU has fallen off the bus.",
            "gpu-01:1234:1234 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM",
            "gpu-01:1234:1234 [0] NCCL INFO comm 0x55 rank 0 nranks 8 cudaDev 0 nvmlDev 0 busId 1b000 - Init",
            "(EngineCore_DP0 pid=77) ERROR 11-30 [multiproc_executor.py:1] Worker proc VllmWorker-0 died",
            "\x1b[31mERROR\x1b[0m",
        ]
    ),
)


@FUZZ
@given(lines=st.lists(LOG_LINE, max_size=40))
def test_triage_scan_text_never_raises(lines: list[str]) -> None:
    from vllm_medic.triage.api import scan_text

    result = scan_text("\n".join(lines))
    result.findings()


@FUZZ
@given(lines=st.lists(LOG_LINE, max_size=40))
def test_health_parsers_never_raise(lines: list[str]) -> None:
    from vllm_medic.collect.health import fabric, limits, xid
    from vllm_medic.health.nccl_path import nccl_findings, parse_nccl_logs

    text = "\n".join(lines)
    xid.group_events(xid.parse_xid_events(text))
    fabric.parse_nvidia_smi_q(text)
    fabric.parse_nvidia_smi_q_xml(text)
    fabric.parse_service(text)
    limits.parse_df_shm(text)
    limits.parse_ulimit(text)
    limits.parse_cgroup_memory(text)
    nccl_findings(parse_nccl_logs([("a.log", text), ("b.log", text[::-1])]))


@FUZZ
@given(
    chunks=st.lists(
        st.one_of(st.binary(max_size=80), TEXTISH.map(lambda t: t.encode("utf-8", "replace"))), max_size=20
    )
)
def test_sse_parser_never_raises(chunks: list[bytes]) -> None:
    from vllm_medic.serve.sse import SSEParser

    parser = SSEParser()
    for i, chunk in enumerate(chunks):
        parser.feed(chunk, float(i))


CHAT_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"])},
    optional={"content": st.one_of(st.text(max_size=30), st.none(), JSON_ANY), "tool_calls": JSON_ANY},
)
CHAT_REQUEST = st.fixed_dictionaries(
    {"messages": st.lists(CHAT_MESSAGE, max_size=5)},
    optional={
        "model": JSON_ANY,
        "tools": JSON_ANY,
        "chat_template_kwargs": JSON_ANY,
        "temperature": JSON_ANY,
    },
)


@settings(max_examples=500, deadline=None)  # cheap: pure functions on small dicts
@given(a=st.one_of(CHAT_REQUEST, JSON_ANY), b=st.one_of(CHAT_REQUEST, JSON_ANY))
def test_cache_diff_of_any_two_requests_is_a_result_or_a_refusal(a: Any, b: Any) -> None:
    from vllm_medic.cache.diff import NotAChatRequest, check_chat, diff_requests

    try:
        a, b = check_chat(a, "a"), check_chat(b, "b")
    except NotAChatRequest:
        return
    result = diff_requests(a, b)
    assert result.identical == (result.divergence is None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_plan_with_a_mutated_recipe_file_exits_0_1_or_2(data: st.DataObject, tmp_path_factory: Any) -> None:
    """`plan --recipe FILE` reads the recipe twice (validated, then the official variants): any shape
    that loads must plan, anything else must be a usage error."""
    from vllm_medic.cli import app

    sources = [SHIPPED_RECIPE] + [yaml.safe_load(p.read_text(encoding="utf-8")) for p in OFFICIAL[:3]]
    doc = _mutated(data.draw(st.sampled_from(sources)), data)
    path = tmp_path_factory.mktemp("recipe") / "recipe.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True), encoding="utf-8")
    result = CliRunner().invoke(app, ["plan", "--recipe", str(path), "--gpu", "H200", "--json"])
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}"
    )
    assert result.exit_code in (0, 1, 2), result.output


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_rules_judge_any_model_config(data: st.DataObject) -> None:
    """`check --model` hands the config to the layout/hybrid rules: a config of any shape is judged."""
    from vllm_medic.checks.api import run_checks
    from vllm_medic.recipes import load_recipe
    from vllm_medic.snapshot import Snapshot

    config = _mutated(data.draw(st.sampled_from(PLAN_CONFIGS)), data)
    if not isinstance(config, dict):
        config = {"architectures": config}
    for recipe in ("generic", "kimi-k3"):
        run_checks(Snapshot.from_dict(REAL_SNAPSHOT), load_recipe(recipe), model_config=config)
