"""Opening the database: migrate, then a connection pool, and the per-(site, root) lock.

The pool (psycopg_pool) keeps a few connections and replaces broken ones itself, so a
daemon resumes after a database restart without being restarted. Its connections are
in autocommit mode (a write opens its own transaction) and know pgvector's type.
"""

from __future__ import annotations

import math
import os
import select
import threading
from pathlib import Path
from typing import Any

import psycopg
import psycopg_pool
import structlog
from pgvector.psycopg import register_vector

from memoryd.indexer.errors import StoreError
from memoryd.indexer.storage.base import SchemaTooNewError, SiteLockedError, StorageUnavailableError
from memoryd.indexer.storage.postgres import schema, sites
from memoryd.indexer.storage.postgres.dsn import conninfo, describe, describe_error
from memoryd.indexer.storage.postgres.sites import site_key

log = structlog.get_logger(__name__)

CONNECT_TIMEOUT_S = 3.0  # storage.connect_timeout_s's default


def timeouts(timeout_s: float) -> dict[str, Any]:
    """libpq's bounds for a connection: ``connect_timeout`` (whole seconds, libpq's minimum is 2) and
    ``tcp_user_timeout`` (ms), which ends a query sent to a host that stopped answering (a black-holed
    network) instead of waiting for the OS's TCP timeout, minutes later; ignored on Unix sockets."""
    return {"connect_timeout": max(2, math.ceil(timeout_s)), "tcp_user_timeout": int(timeout_s * 1000)}


def connect(dsn: str, sslmode: str, timeout_s: float = CONNECT_TIMEOUT_S) -> psycopg.Connection[Any]:
    """One autocommit connection (migrations, the site lock). Raises StorageUnavailableError, password-free."""
    try:
        return psycopg.connect(conninfo(dsn, sslmode), autocommit=True, **timeouts(timeout_s))
    except psycopg.Error as exc:
        raise StorageUnavailableError(f"cannot connect to {describe(dsn)}: {describe_error(exc, dsn)}",
                                      where=describe(dsn)) from None


def prepare(dsn: str, sslmode: str, timeout_s: float = CONNECT_TIMEOUT_S) -> int:
    """Create or migrate the schema; returns the version found before (0: a new database).

    A refusal by the server (a read-only role or replica, no pgvector) is a :class:`StoreError`
    in words, never a traceback quoting SQL."""
    with connect(dsn, sslmode, timeout_s) as conn:
        try:
            return schema.migrate(conn)
        except READ_ONLY as exc:
            raise read_only_error(exc, describe(dsn)) from None
        except psycopg.OperationalError as exc:
            raise StorageUnavailableError(f"database {describe(dsn)} failed: {describe_error(exc, dsn)}",
                                          where=describe(dsn)) from None
        except psycopg.Error as exc:
            raise StoreError(f"database {describe(dsn)} refused memoryd's schema: {describe_error(exc, dsn)}"
                             " (memoryd needs PostgreSQL 14+ with the pgvector extension: docs/postgres.md)") from None


READ_ONLY = (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction)


class ReadOnlyRoleError(StoreError):
    """The server refused a change: a read-only role, or a read-only server (a replica)."""


def read_only_error(exc: psycopg.Error, where: str) -> ReadOnlyRoleError:
    """What to say when the server refuses a change (its first line names the table, never our SQL)."""
    why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return ReadOnlyRoleError(
        f"database {where} refused a change ({why}): this role (or server) is read-only. A daemon and"
        " `memoryd index` need a role that may create and write memoryd's tables (their owner, or CREATE on"
        " the schema and SELECT, INSERT, UPDATE, DELETE on memoryd_*) on the primary; a read-only role serves"
        " `memoryd search --offline` only")


def check_schema(dsn: str, sslmode: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """For a read-only open, which migrates nothing: refuse a database this memoryd's schema is ahead of."""
    with connect(dsn, sslmode, timeout_s) as conn:
        found = schema.version(conn)
    if found > schema.SCHEMA_VERSION:
        raise SchemaTooNewError(f"database {describe(dsn)} is at schema version {found}, newer than this memoryd's"
                                f" ({schema.SCHEMA_VERSION}): upgrade memoryd before reading it")
    if 0 < found < schema.SCHEMA_VERSION:
        raise StoreError(f"database {describe(dsn)} is at schema version {found}; this memoryd reads version"
                         f" {schema.SCHEMA_VERSION}: start an upgraded daemon (or run `memoryd index`) once to"
                         " migrate it, then read it")


def open_pool(dsn: str, sslmode: str, min_size: int = 1, max_size: int = 4,
              timeout_s: float = CONNECT_TIMEOUT_S) -> psycopg_pool.ConnectionPool:
    """A pool on a migrated database (call :func:`prepare` first: pgvector's type must exist)."""

    def configure(conn: psycopg.Connection[Any]) -> None:
        register_vector(conn)
        # vector searches then need no SET LOCAL (a transaction: three more round trips per query);
        # the iterative scan keeps filtered searches (prefix, sites) from returning too few rows
        # (the table's size when the connection opens; the pool replaces each connection within the hour).
        # pgvector checks the value only once its library is loaded: a vector value loads it first.
        conn.execute("SELECT '[1]'::vector")
        conn.execute(f"SET hnsw.ef_search = {schema.session_ef_search(_chunks(conn))}")
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
        kwargs={"autocommit": True, **timeouts(timeout_s)}, name="memoryd")
    pool.open(wait=False)
    return pool


def _chunks(conn: psycopg.Connection[Any]) -> int:
    """The table's chunk count as the writes keep it (0 before schema 3: a read-only open migrates nothing)."""
    try:
        row = conn.execute("SELECT chunks FROM memoryd_totals WHERE id = 1").fetchone()
    except psycopg.errors.UndefinedTable:
        return 0
    return int(row[0]) if row else 0


def closed_by_server(conn: psycopg.Connection[Any]) -> bool:
    """Whether the server has ended this idle connection (a restart ends every session), without a round trip.

    The pool does not notice its idle connections die, and the first query on one would fail
    (a search or write would get a storage error once, with the database back). An idle session
    has nothing to say, so a socket with something to read (the server's goodbye, or its end)
    is a closed session: a poll with no wait, unlike a ``SELECT 1``, which would cost every
    query a round trip.
    """
    if conn.closed or conn.broken:
        return True
    poller = select.poll()  # not select.select: it cannot watch a descriptor above 1023
    poller.register(conn.fileno(), select.POLLIN)
    return bool(poller.poll(0))


def lock_key(site: str, root: Path) -> int:
    """The advisory-lock key of (site, root): 63 bits of the SHA-256 of the site and the root's *real* path,
    so a symlink to a locked root (or the root spelt another way) is the same lock."""
    return sites.key(f"{site}\x00{os.path.realpath(root)}")




class SiteLock:
    """Session advisory locks, held on a connection of their own for the daemon's life: one for the site,
    and one per (site, root) it indexes.

    The site lock makes one process the only writer of a site's rows: a second ``memoryd`` that
    claims a site already in use (a copied config, a second daemon or ``memoryd index`` with the
    same ``storage.site``) is refused at start (:class:`SiteInUseError`), so no reconcile ever
    deletes another process's roots. Holding a root means holding both locks; the root's lock is
    keyed on its real path (:func:`lock_key`).

    A session lock dies with its connection: when the database restarts, every lock is gone.
    :meth:`verify` (run before every write) notices a dead connection, reconnects and takes the
    locks again; a root whose lock another daemon took meanwhile is *lost*: this daemon must not
    index it while the other one does (two indexers of one (site, root) would fight over its rows).
    Each :meth:`verify` tries such a lock again (one more statement per lost root), so the root
    comes back to this daemon once the other one has stopped (:attr:`regained`).
    """

    def __init__(self, dsn: str, sslmode: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        self._args = (dsn, sslmode, timeout_s)
        self._conn = connect(*self._args)
        self._where = describe(dsn)
        self._mutex = threading.Lock()  # the worker verifies; status reads held/lost from other threads
        self.held: dict[Path, str] = {}  # root -> site
        self.lost: dict[Path, str] = {}  # root -> why
        self._taken: dict[Path, str] = {}  # root -> site, for the lost roots whose lock another daemon holds
        self.regained: list[Path] = []  # roots whose lock came back since the caller last emptied this
        self.generation = self._generation()  # the identity generation read by the last verify

    def claim_site(self, site: str, about: dict[str, Any]) -> None:
        """Take the site's lock, or raise :class:`SiteInUseError` naming the process that holds it; then
        record ``about`` (host, pid, data_dir, version) as the site's row in ``memoryd_sites``."""
        with self._mutex:
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (site_key(site),)).fetchone()
            if not (row and row[0]):
                raise SiteInUseError(_in_use(self._conn, site, self._where))
            try:
                sites.record_claim(self._conn, site, about)
            except READ_ONLY as exc:
                raise read_only_error(exc, self._where) from None

    def acquire(self, site: str, root: Path) -> None:
        with self._mutex:
            if not self._try(site, root):
                raise SiteLockedError(f"another daemon already indexes {root} for site {site!r} in {self._where}")
            self.held[root] = site

    def claim(self, site: str, root: Path) -> bool:
        """Whether this process may write ``root``'s rows: it holds the root's lock, or takes it now (a root
        added by a config reload, or one no longer configured whose rows a reconcile removes)."""
        with self._mutex:
            if root in self.held:
                return True
            if root in self.lost or not self._try(site, root):
                return False
            self.held[root] = site
            return True

    def _try(self, site: str, root: Path) -> bool:
        """Both locks (the site's first; the root's only with it). A lock this session holds already
        is taken again (it stacks), which is harmless: the session's end drops every level."""
        row = self._conn.execute("SELECT CASE WHEN pg_try_advisory_lock(%s) THEN pg_try_advisory_lock(%s)"
                                 " ELSE false END", (site_key(site), lock_key(site, root))).fetchone()
        return bool(row and row[0])

    def _generation(self) -> str:
        """The database's identity generation (bumped by ``migrate-storage --reindex``); "0" before any."""
        row = self._conn.execute("SELECT value FROM memoryd_meta WHERE key = %s", (schema.GENERATION_KEY,)).fetchone()
        return str(row[0]) if row else "0"

    def verify(self, take_back: bool = True) -> list[Path]:
        """Make sure the held locks still are; returns the roots lost by this call (usually none).

        One round trip when the connection is alive, which also reads the identity generation
        into :attr:`generation` (the caller compares it with its own). Raises
        StorageUnavailableError when the database cannot be reached (then nothing can be written anyway).
        """
        with self._mutex:
            try:
                self.generation = self._generation()
                if take_back:
                    self._take_back()
                return []
            except psycopg.Error:
                self._conn.close()
            self._conn = connect(*self._args)  # raises StorageUnavailableError while the database is away
            self.generation = self._generation()
            newly: list[Path] = []
            for root, site in list(self.held.items()):
                if not self._try(site, root):
                    del self.held[root]
                    self.lost[root] = (f"another daemon took the lock of site {site!r} (or of this root) while the"
                                       " database restarted")
                    self._taken[root] = site
                    newly.append(root)
            log.info("storage.site_lock.retaken", roots=[str(r) for r in self.held], lost=[str(r) for r in newly])
            if take_back:
                self._take_back()
            return newly

    def _take_back(self) -> None:
        """Try again each lock another daemon held; a root whose lock is free again is this daemon's again."""
        for root, site in list(self._taken.items()):
            if self._try(site, root):
                del self._taken[root]
                self.lost.pop(root, None)
                self.held[root] = site
                self.regained.append(root)
                log.info("storage.site_lock.regained", root=str(root), site=site,
                         action="the other daemon let it go: this one indexes the root again (reconciling it)")

    def close(self) -> None:
        self._conn.close()


class SiteInUseError(SiteLockedError):
    """Another process writes this site's rows: a second one would delete them at its first reconcile."""


def _in_use(conn: psycopg.Connection[Any], site: str, where: str) -> str:
    """Why a site cannot be claimed, naming its holder as it recorded itself (no password, no SQL)."""
    holder = sites.describe_holder(conn, site)
    return (f"site {site!r} is already in use in {where} by another memoryd ({holder}): two processes of one"
            " site would delete each other's files from the index. Give this one its own site id"
            " (storage.site; every machine and every data directory needs its own), or stop the other"
            " one first (`memoryd sites list` shows every site)")
