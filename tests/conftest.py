"""Root conftest: registers the real vLLM tier fixtures (machinery and docs in tests/vllm_tier.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import vllm_tier  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "vllm_destructive: kills a real vLLM server; run after every other test so the servers are started once",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that kill a real server go last (stable order otherwise): no other test pays for a restart."""
    items.sort(key=lambda item: item.get_closest_marker("vllm_destructive") is not None)


@pytest.fixture(scope="session")
def vllm_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[vllm_tier.ServerPool]:
    pool = vllm_tier.ServerPool(tmp_path_factory.mktemp("vllm-logs"))
    yield pool
    pool.close()


def _server(pool: vllm_tier.ServerPool, name: str, args: tuple[str, ...]) -> vllm_tier.VllmServer:
    try:
        return pool.get(name, args)
    except vllm_tier.VllmUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def vllm_server_cached(vllm_pool: vllm_tier.ServerPool) -> vllm_tier.VllmServer:
    """Real vLLM, prefix caching on, prompt-token details, hermes tool parser (see tests/vllm_tier.py)."""
    return _server(vllm_pool, "cached", vllm_tier.CACHED_ARGS)


@pytest.fixture
def vllm_server_uncached(vllm_pool: vllm_tier.ServerPool) -> vllm_tier.VllmServer:
    """Real vLLM, ``--no-enable-prefix-caching``, no tool parser (see tests/vllm_tier.py)."""
    return _server(vllm_pool, "uncached", vllm_tier.UNCACHED_ARGS)
