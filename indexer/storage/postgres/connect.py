"""Opening the database: migrate, then a connection pool, and the per-(site, root) lock.

The pool (psycopg_pool) keeps a few connections and replaces broken ones itself, so a
daemon resumes after a database restart without being restarted. Its connections are
in autocommit mode (a write opens its own transaction) and know pgvector's type.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import psycopg
import psycopg_pool
from pgvector.psycopg import register_vector

from memoryd.indexer.storage.base import SiteLockedError, StorageUnavailableError
from memoryd.indexer.storage.postgres import schema
from memoryd.indexer.storage.postgres.dsn import conninfo, describe, describe_error

CONNECT_TIMEOUT_S = 5


def connect(dsn: str, sslmode: str) -> psycopg.Connection[Any]:
    """One autocommit connection (migrations, the site lock). Raises StorageUnavailableError, password-free."""
    try:
        return psycopg.connect(conninfo(dsn, sslmode), autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        raise StorageUnavailableError(f"cannot connect to {describe(dsn)}: {describe_error(exc, dsn)}") from None


def prepare(dsn: str, sslmode: str) -> int:
    """Create or migrate the schema; returns the version found before (0: a new database)."""
    with connect(dsn, sslmode) as conn:
        return schema.migrate(conn)


def open_pool(dsn: str, sslmode: str, min_size: int = 1, max_size: int = 4) -> psycopg_pool.ConnectionPool:
    """A pool on a migrated database (call :func:`prepare` first: pgvector's type must exist)."""

    def configure(conn: psycopg.Connection[Any]) -> None:
        register_vector(conn)
        # vector searches then need no SET LOCAL (a transaction: three more round trips per query);
        # the iterative scan keeps filtered searches (prefix, sites) from returning too few rows
        conn.execute(f"SET hnsw.ef_search = {schema.EF_SEARCH}")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        # With ef_search above LIMIT, pgvector's cost estimate makes a small table's sequential scan
        # look cheaper than the HNSW index; the scan must read (and detoast) every vector: 30-50 ms
        # at 3k chunks against ~1 ms. memoryd's queries all have an index to use.
        conn.execute("SET enable_seqscan = off")
        # JIT compiles a plan whose estimated cost passes jit_above_cost (default on since PostgreSQL 12):
        # 10-100 ms per statement, for memoryd's queries that run in a few ms. The table-figures scan
        # and a filtered HNSW query can pass the threshold at 100k chunks.
        conn.execute("SET jit = off")

    pool = psycopg_pool.ConnectionPool(
        conninfo(dsn, sslmode), min_size=min_size, max_size=max_size, open=False, configure=configure,
        kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S}, name="memoryd")
    pool.open(wait=False)
    return pool


def lock_key(site: str, root: Path) -> int:
    """The advisory-lock key of (site, root): 63 bits of its SHA-256."""
    return int.from_bytes(hashlib.sha256(f"{site}\x00{root}".encode()).digest()[:8], "big") >> 1


class SiteLock:
    """Session advisory locks, one per (site, root), held on a connection of their own for the daemon's life."""

    def __init__(self, dsn: str, sslmode: str) -> None:
        self._conn = connect(dsn, sslmode)
        self._where = describe(dsn)

    def acquire(self, site: str, root: Path) -> None:
        row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (lock_key(site, root),)).fetchone()
        if not (row and row[0]):
            raise SiteLockedError(f"another daemon already indexes {root} for site {site!r} in {self._where}")

    def close(self) -> None:
        self._conn.close()
