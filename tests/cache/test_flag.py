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
