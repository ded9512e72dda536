"""Store fixtures: a history URL per backend (SQLite file, real PostgreSQL started by the session)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
import store_pg_server as pg_server

_counter = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[pg_server.PgServer]:
    server = pg_server.start()
    if isinstance(server, str):
        pytest.skip(f"PostgreSQL store tests skipped: {server}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty history database on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.db'}"
    server = request.getfixturevalue("postgres_server")
    return pg_server.create_database(server, f"medic_{next(_counter)}")
