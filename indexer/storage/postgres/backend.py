"""``PostgresBackend``: the PostgreSQL + pgvector backend as :class:`memoryd.indexer.engine.MemoryIndex` runs it.

Indexing, reconciling, moving and removing are the index's, unchanged: they only use
the storage interface (store, cache, vectors). What differs is opening (migrations,
the shared identity, the HNSW index, one advisory lock per root), the guard before
every write (:meth:`PostgresBackend.guard_write`), search (every site, or the
``sites`` asked for: :meth:`PostgresBackend.scope`) and upkeep (PostgreSQL's
autovacuum does the rest).

While the database is unreachable every call fails with
:class:`~memoryd.indexer.storage.base.StorageUnavailableError` within
``storage.connect_timeout_s``; every write first makes sure this daemon still holds
its (site, root) locks (a database restart drops them), and skips the roots whose lock
another daemon took meanwhile (:meth:`PostgresBackend.lost_roots`, shown by ``status``) until
that daemon lets them go; then it takes them back and reconciles them.

The identity is the *database's* (:mod:`.identity`): a re-index bumps its generation, which
every write checks, so a daemon of the old settings stops writing at once
(``storage.identity_changed``, its roots shown lost in ``status``), while one whose settings
match re-adds its roots at its next reconcile (the shared cache spares the embeddings).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg_pool
import structlog

from memoryd.indexer.config import Config
from memoryd.indexer.errors import StoreError
from memoryd.indexer.fill.backlog import VectorBacklog
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.base import (
    LINE_WAIT_MS,
    Capabilities,
    LineRows,
    LineStore,
    RebuildJob,
    StorageUnavailableError,
)
from memoryd.indexer.storage.index_status import BacklogProgress, IndexStatus, skipped_files
from memoryd.indexer.storage.postgres import connect, corpus, schema, sites
from memoryd.indexer.storage.postgres.cache import PgEmbeddingCache, PgLineStore
from memoryd.indexer.storage.postgres.dsn import describe
from memoryd.indexer.storage.postgres.identity import check_identity, differences
from memoryd.indexer.storage.postgres.line_rows import PgLineRows
from memoryd.indexer.storage.postgres.search import PgLegs, PgVectors
from memoryd.indexer.storage.postgres.status import (
    LostRoot,
    PgFigures,
    PgStorage,
    SiteLocks,
    index_status,
    read_figures,
)
from memoryd.indexer.storage.postgres.store import FAST_REFUSAL_S, PgStore
from memoryd.indexer.storage.site import site_id
from memoryd.indexer.types import Embedder

log = structlog.get_logger(__name__)

POSTGRES = Capabilities(sites=True, keyword_first=True, vector_rebuilds=False, line_cache=True,
                        line_vectors=True, vectors_in_rows=True)


class PostgresBackend:
    """A shared database: this daemon's site, its (site, root) locks, the rows of every site."""

    capabilities = POSTGRES
    site: str  # always one: this daemon's, in the shared database

    def __init__(self, cfg: Config, embedder: Embedder, identity: dict[str, str], read_only: bool = False,
                 background_rebuilds: bool = False, pool: psycopg_pool.ConnectionPool | None = None,
                 reindex: bool = False) -> None:
        """Open (and migrate) the database named by ``cfg.storage`` for rows of ``identity`` (plus this
        schema's writers: :meth:`stored_identity`); ``pool`` reuses an open one (tests).

        ``reindex``: when the stored identity differs, drop every site's chunks and take this one's
        (see the module's docstring) instead of refusing. ``background_rebuilds`` says the caller
        is the daemon (which has threads for background work): it may start while the database
        is away (every call then fails with StorageUnavailableError until it answers, and the
        first call that reaches it finishes opening: :meth:`_attach_later`); a one-shot command
        fails at once instead."""
        st = cfg.storage
        self.cfg, self.embedder, self.read_only, self.data_dir = cfg, embedder, read_only, cfg.data_dir
        self.lock = threading.Lock()
        self.backlog = VectorBacklog()
        self.identity = self.stored_identity(identity)
        self.site = site_id(st.site, cfg.data_dir, remember=not read_only)
        self.where = describe(st.dsn)
        self._site_lock: connect.SiteLock | None = None
        self._last_status: IndexStatus | None = None
        self._may_start_away = background_rebuilds and not read_only and not reindex  # the daemon only
        self._reindex = reindex and not read_only
        self.identity_changed: str | None = None  # set when another site re-indexed with other settings
        self.refused: str | None = None  # why this daemon writes nothing (found only once the database answered)
        self._follow_reset = False  # set by a matching re-index elsewhere; the daemon reconciles at once
        self.reset: tuple[int, int, int] | None = None  # (files, chunks, generation) dropped by ``reindex``
        self._attach_lock = threading.RLock()  # the first call after a start without the database finishes it
        self._attaching = False
        self._attach_failed = -float("inf")
        self._attach_window = st.connect_timeout_s  # how long a failed try stands (PgStore's probe, likewise)
        self._own_pool = pool is None
        self._given_pool = pool
        self._open()

    def _open(self) -> None:
        """The database: schema migrated (or checked), the pool, the identity and the (site, root) locks;
        or, for the daemon while the database is away, the parts that finish opening on first contact.
        (pgvector maintains its HNSW index itself: nothing is rebuilt in the background.)"""
        st = self.cfg.storage
        timeout = st.connect_timeout_s
        away: StorageUnavailableError | None = None
        try:
            self._open_schema()
        except StorageUnavailableError as exc:
            if not self._may_start_away:
                raise
            away = exc
        self.pool = self._given_pool or connect.open_pool(st.dsn, st.sslmode, timeout_s=timeout)
        try:
            self.pg = PgStore(self.pool, self.site, self.where, timeout,
                              reopen=(lambda: connect.open_pool(st.dsn, st.sslmode, timeout_s=timeout))
                              if self._own_pool else None,
                              probe=lambda: connect.connect(st.dsn, st.sslmode, timeout))
            self.store = self.pg  # opening reads the identity through the interface
            self.cache = PgEmbeddingCache(self.pg, self.embedder.dimension, self.cfg.embedding.cache_entries)
            if away is None:
                self._attach()
            else:
                self._start_away(away)
            self.pgvectors = self.vectors = PgVectors(self.pg, self.embedder.dimension)
            self.legs = PgLegs(self.pg, self.pgvectors)
            self.lines = PgLineRows(self.pg)
        except BaseException:
            self.close()
            raise

    def _open_schema(self) -> None:
        """Migrate the schema (a writer) or check it (a read-only open): one direct connection."""
        st = self.cfg.storage
        if self.read_only:
            connect.check_schema(st.dsn, st.sslmode, st.connect_timeout_s)
        else:
            connect.prepare(st.dsn, st.sslmode, st.connect_timeout_s)

    def stored_identity(self, rows: dict[str, str]) -> dict[str, str]:
        """The rows' identity and the schema whose writers keep the corpus counts
        (:mod:`memoryd.indexer.storage.postgres.corpus`), so an older writer stops writing."""
        return {**rows, "pg_writers": corpus.WRITERS_SINCE}

    def line_rows(self) -> LineRows:
        """This site's chunks' line vectors, in ``memoryd_line_vectors`` (asks nothing of the database yet)."""
        return self.lines

    def count_lines_pending(self) -> int:
        """This site's chunks without line vectors (the index keeps the count a while)."""
        return self.lines.count()

    def _attach(self) -> None:
        """What opening needs the database for once the schema is there: the identity, the locks, and
        the vector backlog an earlier process left (its chunks committed keyword first, still without
        a vector: the daemon's idle steps give them one, newest files first)."""
        self._check_identity()
        if not self.read_only:
            self._lock_roots()
            for i, mtime_ns in self.pg.chunks_without_vectors().items():
                self.backlog.add([i], mtime_ns)

    def _start_away(self, exc: StorageUnavailableError) -> None:
        """The daemon starts without its database: files stay the truth, every call says the storage is
        away, and the first call that reaches it finishes opening (:meth:`_attach_later`)."""
        self._attach_failed = time.monotonic()
        self.pg.health.record(False, str(exc))
        self.pg.before_use = self._attach_later
        log.error("storage.start_unreachable", database=self.where, site=self.site, error=str(exc),
                  action="serving what needs no database; files written meanwhile are indexed when it answers")

    def _attach_later(self) -> None:
        """Run before every database call while opening is unfinished (:attr:`PgStore.before_use`).

        Other threads wait for the one finishing it; that thread's own calls pass through. While the
        database is still away this raises StorageUnavailableError at once (one direct connection per
        ``connect_timeout_s`` at most). A refusal found only now (another process holds the site,
        the database holds chunks made with other settings) cannot stop the daemon: it writes
        nothing and says why in ``status`` (``storage.refused``)."""
        with self._attach_lock:
            if self.pg.before_use is None or self._attaching:
                return
            if time.monotonic() - self._attach_failed < self._attach_window:
                raise StorageUnavailableError(f"database {self.where} is unreachable", where=self.where)
            self._attaching = True
            t0 = time.monotonic()
            try:
                self._open_schema()
                self._attach()
            except StorageUnavailableError as exc:
                self._attach_failed = time.monotonic()
                slow = self._attach_failed - t0 >= FAST_REFUSAL_S  # a silent host, not a stopped server
                self._attach_window = self.cfg.storage.connect_timeout_s if slow else FAST_REFUSAL_S
                self.pg.health.record(False, str(exc))
                raise StorageUnavailableError(f"database {self.where} is unreachable", where=self.where) from None
            except StoreError as exc:
                self.refused = str(exc)
                log.error("storage.refused", database=self.where, site=self.site, error=str(exc),
                          action="this daemon writes nothing to the database until the cause is fixed and it restarts")
            finally:
                self._attaching = False
            self.pg.before_use = None
            self._follow_reset = True  # what changed while the database was away is reconciled now
            log.info("storage.attached", database=self.where, site=self.site, refused=self.refused is not None)

    def guard_write(self, roots: Iterable[Path]) -> list[Path]:
        """Before a write: re-take the locks a database restart dropped (finishing an opening the database
        was away for), then the roots among ``roots`` whose lock this process holds or takes now."""
        self._verify_locks()
        return [root for root in roots if self.claim_root(root)]

    def may_write(self, idle: bool = False) -> bool:
        """Never while this daemon writes nothing (``identity_changed``, ``refused``); ``idle``: nor while the
        last call found the database away (the daemon's next call that reaches it, a snapshot at the latest,
        resumes the idle work), so its idle steps do not retry a refused write forever."""
        return self.identity_changed is None and self.refused is None and (not idle or self.pg.health.reachable)

    def claim_root(self, root: Path) -> bool:
        """Whether this process may change ``root``'s rows (:func:`memoryd.indexer.ingestion.reconcile.plan` asks
        before removing a root no longer configured): it holds the (site, root) lock, or takes it
        now. Never for a root lost to another process, nor while writes are refused."""
        if self.read_only or self.identity_changed is not None or self.refused is not None:
            return False
        if self._site_lock is None:
            self._verify_locks()  # opening unfinished (the database was away at start): finish it or raise
        return self._site_lock is not None and self._site_lock.claim(self.site, root)

    def lost_roots(self) -> dict[Path, str]:
        """The roots this daemon no longer indexes (their lock went to another daemon), and why."""
        lost = dict(self._site_lock.lost) if self._site_lock is not None else {}
        if self.refused is not None:
            lost.update(dict.fromkeys(self.cfg.effective_roots, self.refused))
        return lost

    def _lock_roots(self) -> None:
        st = self.cfg.storage
        self._site_lock = connect.SiteLock(st.dsn, st.sslmode, st.connect_timeout_s)
        self._site_lock.claim_site(self.site, {"host": socket.gethostname(), "pid": os.getpid(),
                                               "data_dir": str(self.data_dir), "version": sites.memoryd_version()})
        for root in self.cfg.effective_roots:
            self._site_lock.acquire(self.site, root)

    def _verify_locks(self) -> dict[Path, str]:
        """Before a write: re-take the locks a database restart dropped; the roots lost to another daemon."""
        if self.pg.before_use is not None:
            self.pg.before_use()  # the database was away at start: finish opening, or raise StorageUnavailableError
        if self._site_lock is None:
            return {}
        for root in self._site_lock.verify(take_back=self.identity_changed is None):
            log.error("storage.site_lock.lost", root=str(root), site=self.site, database=self.where,
                      action="this daemon stops indexing this root while the other daemon holds it,"
                      " and takes it back (with a reconcile) once that one stops")
        if self.identity_changed is None and self._site_lock.generation != self.pg.generation:
            self._generation_changed(self._site_lock.generation)
        if self._site_lock.regained:  # changed meanwhile, indexed by the other daemon or by nobody
            self._site_lock.regained.clear()
            self._follow_reset = True
        return self._site_lock.lost

    def _generation_changed(self, generation: str) -> None:
        """Another site re-indexed the database: follow it if its identity is ours, else stop writing."""
        stored = self.store.meta("identity")
        have = json.loads(stored) if stored else None
        if have == self.identity:
            log.info("storage.identity_reset", site=self.site, database=self.where, generation=generation,
                     action="every file row was dropped; a reconcile re-adds this site's roots")
            self.pg.generation = generation
            self._follow_reset = True
            return
        assert self._site_lock is not None
        why = (f"the database was re-indexed with other settings ({differences(have or {}, self.identity)});"
               " upgrade memoryd here and restart it")
        self.identity_changed = why
        for root in self._site_lock.held:
            self._site_lock.lost[root] = why
        log.error("storage.identity_changed", site=self.site, database=self.where, generation=generation,
                  action="this daemon stopped writing: " + why)

    def _check_identity(self) -> None:
        reset = check_identity(self.pg, self.identity, self.where, read_only=self.read_only, reindex=self._reindex)
        if reset is not None:
            self.reset = reset
        if not self.read_only and self.pg.generation is None:
            self.pg.generation = self.pg.ensure_generation()
        if not self.read_only:
            with self.pg.connection() as c:
                schema.ensure_hnsw(c, self.embedder.dimension)

    def scope(self, query: Query) -> Query:
        """Every site's chunks, or those of ``query.sites``.

        A confined session (``path_check`` given: a peer or group) sees only this site's rows unless
        ``storage.share_peers_across_sites``: the same namespace path on another machine is another
        machine's peer (the default root is the same path for the same user everywhere), and its
        files are not this daemon's to check or to serve."""
        if query.path_check is not None and not self.cfg.storage.share_peers_across_sites:
            sites = query.sites if query.sites is not None else (self.site,)
            query = replace(query, sites=tuple(s for s in sites if s == self.site))
        return query

    def take_reconcile_wanted(self) -> bool:
        """True once after another site re-indexed the database with our settings, or a root lost to
        another daemon came back (checked at each write and snapshot): this site's roots must be
        reconciled now."""
        wanted, self._follow_reset = self._follow_reset, False
        return wanted

    def save(self, force: bool = False) -> bool:
        """Every change is already committed; only the cache counters are kept (this site's)."""
        if self.read_only:
            return False
        self._verify_locks()  # a snapshot after a database restart takes the locks again, even if nothing changed
        self.store.set_meta({f"cache_hits:{self.site}": str(self.cache.hits),
                             f"cache_misses:{self.site}": str(self.cache.misses)})
        if self._site_lock is not None and self.refused is None:
            with self.pg.connection() as c:
                sites.touch(c, self.site)  # `memoryd sites list`: when this site was last heard from
        return True

    def status(self, skipped: Mapping[str, str], lines_pending: Callable[[], int | None]) -> IndexStatus:
        """The figures, read from the database; while it is unreachable, the last ones read, marked so."""
        try:
            st = self._status(skipped, lines_pending)
        except StorageUnavailableError:
            last = self._last_status or self._index_status(None, None, None, None, None, skipped)
            figures = last.storage.figures if isinstance(last.storage, PgStorage) else None
            return replace(last, storage=self._storage(figures), skipped=skipped_files(skipped),
                           vectors=BacklogProgress.from_progress(self.backlog.progress()))
        self._last_status = st
        return st

    def _storage(self, figures: PgFigures | None) -> PgStorage:
        """Reachability (since when, the last error), the (site, root) locks: held, and lost to another
        daemon; with ``figures``, the last ones read from the database."""
        held = tuple(sorted(str(r) for r in self._site_lock.held)) if self._site_lock is not None else ()
        lost = tuple(LostRoot(str(r), why) for r, why in sorted(self.lost_roots().items()))
        health = self.pg.health.to_json()  # its ``since`` written as everywhere else
        return PgStorage(database=self.where, site=self.site, reachable=bool(health["reachable"]),
                         last_error=health["last_error"], since=str(health["since"]),
                         identity_changed=self.identity_changed, refused=self.refused,
                         locks=SiteLocks(held, lost), figures=figures)

    def _status(self, skipped: Mapping[str, str], lines_pending: Callable[[], int | None]) -> IndexStatus:
        figures, entries, vectors = read_figures(self.pg)
        files, chunks = self.store.counts()
        st = self._index_status(files, chunks, entries, vectors, figures, skipped)
        return replace(st, line_vectors_pending=lines_pending())

    def _index_status(self, files: int | None, chunks: int | None, entries: int | None, vectors: int | None,
                      figures: PgFigures | None, skipped: Mapping[str, str]) -> IndexStatus:
        """The figures given (all None: before the database ever answered, the daemon started without it)."""
        return index_status(self.embedder, self.cache, files, chunks, entries, vectors, self._storage(figures),
                            skipped=skipped_files(skipped),
                            backlog=BacklogProgress.from_progress(self.backlog.progress()))  # this process's backlog

    def open_line_store(self) -> LineStore | None:
        """The shared embedding cache for the context excerpts' line vectors, through the pool (None read-only)."""
        if self.read_only:
            return None
        return PgLineStore(self.pg, self.embedder.dimension, LINE_WAIT_MS)

    def set_background_rebuilds(self, on: bool) -> None:
        """Nothing to switch: pgvector maintains its HNSW index in every write."""

    def rebuild_wanted(self) -> bool:
        return False

    def start_rebuild(self) -> RebuildJob | None:
        return None

    def finish_rebuild(self, job: RebuildJob) -> bool:
        return False

    def cancel_rebuild(self, job: RebuildJob) -> None:
        """Nothing is ever planned here."""

    def maintain(self, cache_evicted: int) -> dict[str, Any]:
        """PostgreSQL's autovacuum does the rest."""
        return {"cache_evicted": cache_evicted}

    def close(self) -> None:
        if getattr(self, "pg", None) is not None and not self.read_only and self.pg.before_use is None:
            with contextlib.suppress(StoreError):
                self.save()
        if self._site_lock is not None:
            self._site_lock.close()
            self._site_lock = None
        if self._own_pool:  # the store's pool: it replaces the first one after an outage
            pg = getattr(self, "pg", None)
            (pg.pool if pg is not None else self.pool).close()

