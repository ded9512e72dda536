"""`vllm-medic cache flag`: which layer dropped or overrode --enable-prefix-caching."""

from __future__ import annotations

import pytest
from cache_helpers import DATA, run


def ids(out: dict) -> list[str]:
    return [f["id"] for f in out["findings"]]


def test_manifest_has_flag_but_engine_never_got_it() -> None:
    code, out, _ = run(
        "flag",
        "--launch",
        str(DATA / "k8s-wrapper-drops-args.yaml"),
        "--log",
        str(DATA / "engine-log-flag-dropped.log"),
        "--json",
    )
    assert code == 1
    assert ids(out) == ["CACHE-FLAG002", "CACHE-FLAG009"]
    f = out["findings"][0]
    assert "absent from the engine's non-default args" in f["title"]
    assert any("k8s-wrapper-drops-args.yaml:" in e and "--enable-prefix-caching" in e for e in f["evidence"])
    assert any("engine-log-flag-dropped.log:1" in e for e in f["evidence"])
    assert any(
        "engine-log-flag-dropped.log:2" in e and "enable_prefix_caching=False" in e for e in f["evidence"]
    )
    assert any('"$@"' in s for s in f["fix"])
    assert out["hybrid"] is True
    retention = out["findings"][1]
    assert "every 32768 tokens" in retention["title"]
    assert "VLLM_PREFIX_CACHE_RETENTION_INTERVAL=32768 (env)" in retention["evidence"]


def test_k3_without_the_flag_is_off_by_default() -> None:
    code, out, _ = run(
        "flag",
        "--launch",
        "vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 8 --trust-remote-code",
        "--json",
    )
    assert code == 1
    assert ids(out) == ["CACHE-FLAG007", "CACHE-FLAG009"]
    assert "off by default for hybrid models" in out["findings"][0]["title"]


def test_ordinary_model_without_flag_is_on_by_default_but_unconfirmed() -> None:
    code, out, _ = run("flag", "--launch", "vllm serve meta-llama/Llama-3.1-8B-Instruct", "--json")
    assert code == 0
    assert ids(out) == ["CACHE-FLAG008"]


def test_flag_on_everywhere_passes() -> None:
    code, out, _ = run(
        "flag",
        "--launch",
        "vllm serve moonshotai/Kimi-K3 --enable-prefix-caching",
        "--log",
        str(DATA / "engine-log-flag-on.log"),
        "--json",
    )
    assert code == 0 and ids(out)[0] == "CACHE-FLAG001"


def test_later_no_flag_overrides_earlier_flag() -> None:
    code, out, _ = run(
        "flag",
        "--launch",
        "vllm serve m --enable-prefix-caching --no-enable-prefix-caching",
        "--hybrid",
        "--json",
    )
    assert code == 1
    assert ids(out)[0] == "CACHE-FLAG006"
    assert any("the last one wins" in e for e in out["findings"][0]["evidence"])


def test_nothing_given_is_a_warning() -> None:
    code, out, _ = run("flag", "--json")
    assert code == 0 and ids(out) == ["CACHE-FLAG000"]
    code, _, _ = run("flag", "--strict")
    assert code == 1


def test_missing_log_file_is_usage_error() -> None:
    code, _, err = run("flag", "--log", "/nonexistent/engine.log")
    assert code == 2 and "cannot read log" in err and "Traceback" not in err


def test_dead_server_is_tool_error() -> None:
    code, _, err = run("flag", "--server", "http://127.0.0.1:9")
    assert code == 3 and "Traceback" not in err


@pytest.mark.real_vllm
def test_real_server_cached_flag_confirmed_by_log_and_metrics(vllm_server_cached) -> None:  # noqa: ANN001
    s = vllm_server_cached
    launch = "python -m vllm.entrypoints.openai.api_server " + " ".join(s.args)
    code, out, _ = run("flag", "--launch", launch, "--log", str(s.log_path), "--server", s.url, "--json")
    assert code == 0, out
    assert ids(out) == ["CACHE-FLAG001"]
    layers = {layer["layer"]: layer["value"] for layer in out["layers"]}
    assert layers == {"launch": True, "non_default_args": True, "engine_config": True, "metrics": True}


@pytest.mark.real_vllm
def test_real_server_uncached_names_the_launch(vllm_server_uncached) -> None:  # noqa: ANN001
    s = vllm_server_uncached
    launch = "python -m vllm.entrypoints.openai.api_server " + " ".join(s.args)
    code, out, _ = run("flag", "--launch", launch, "--log", str(s.log_path), "--server", s.url, "--json")
    assert code == 1
    assert ids(out) == ["CACHE-FLAG006"]
    layers = {layer["layer"]: layer["value"] for layer in out["layers"]}
    assert layers["metrics"] is False and layers["engine_config"] is False


def test_gzipped_coloured_log_is_read(tmp_path) -> None:  # noqa: ANN001
    import gzip

    text = (DATA / "engine-log-flag-on.log").read_text()
    coloured = "\n".join(f"\x1b[36m{line}\x1b[0m" for line in text.splitlines())
    log = tmp_path / "engine.log.gz"
    log.write_bytes(gzip.compress(coloured.encode()))
    code, out, _ = run("flag", "--log", str(log), "--json")
    assert code == 0 and ids(out)[0] == "CACHE-FLAG001"
    layers = {layer["layer"]: layer["value"] for layer in out["layers"]}
    assert layers == {"non_default_args": True, "engine_config": True}


# ---------------------------------------------------------------- titles claim only what the evidence shows


def test_metrics_alone_say_the_engine_runs_with_caching_off_not_that_the_flag_was_never_passed() -> None:
    from vllm_medic.sim.config import SimConfig
    from vllm_medic.sim.server import start_sim

    handle = start_sim(SimConfig(enable_prefix_caching=False))
    try:
        code, out, _ = run("flag", "--server", handle.url, "--json")
    finally:
        handle.stop()
    assert code == 1
    f = out["findings"][0]
    assert f["id"] == "CACHE-FLAG007" and f["severity"] == "fail"
    assert "never passed" not in f["title"]
    assert f["title"].startswith("The engine runs with prefix caching off (metrics)")
    assert "whether the flag was passed is not known" in f["title"]
    assert any(f"{handle.url}/metrics vllm:cache_config_info" in e for e in f["evidence"])
    assert any("--launch" in step and "--log" in step for step in f["fix"])


def test_retention_evidence_names_the_metric_it_was_read_from() -> None:
    from vllm_medic.sim.config import SimConfig
    from vllm_medic.sim.server import start_sim

    handle = start_sim(SimConfig(hybrid=True, block_size=32))
    try:
        code, out, _ = run("flag", "--server", handle.url, "--json")
    finally:
        handle.stop()
    assert code == 0, out
    f9 = next(f for f in out["findings"] if f["id"] == "CACHE-FLAG009")
    assert f'{handle.url}/metrics vllm:cache_config_info block_size="32"' in f9["evidence"]
    assert f'{handle.url}/metrics vllm:cache_config_info mamba_cache_mode="align"' in f9["evidence"]


def test_retention_evidence_without_a_server_says_what_was_assumed() -> None:
    code, out, _ = run("flag", "--launch", "vllm serve moonshotai/Kimi-K3 --trust-remote-code", "--json")
    f9 = next(f for f in out["findings"] if f["id"] == "CACHE-FLAG009")
    ev = " ".join(f9["evidence"])
    assert "block_size 16: vLLM's default, not read from the server" in ev
    assert "mamba_cache_mode align: assumed" in ev
    assert "block_size 16, mamba_cache_mode align" not in ev  # never a bare value without its source


@pytest.mark.real_vllm
def test_real_uncached_server_from_metrics_alone(vllm_server_uncached) -> None:  # noqa: ANN001
    code, out, _ = run("flag", "--server", vllm_server_uncached.url, "--json")
    assert code == 1
    f = out["findings"][0]
    assert f["id"] == "CACHE-FLAG007" and "never passed" not in f["title"]
    assert "whether the flag was passed is not known" in f["title"]
