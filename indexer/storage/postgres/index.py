"""``PgMemoryIndex``: :class:`memoryd.indexer.engine.MemoryIndex` on the PostgreSQL backend.

Indexing, reconciling, moving and removing are inherited unchanged: they only use
the storage interface (store, cache, vectors). What differs is opening (migrations,
the shared identity, the HNSW index, one advisory lock per root), search (every
site, or the ``sites`` asked for) and upkeep (PostgreSQL's autovacuum does the rest).

While the database is unreachable every call fails with
:class:`~memoryd.indexer.storage.base.StorageUnavailableError` within
``storage.connect_timeout_s``; every write first makes sure this daemon still holds
its (site, root) locks (a database restart drops them), and skips the roots whose lock
another daemon took meanwhile (:meth:`PgMemoryIndex.lost_roots`, shown by ``status``) until
that daemon lets them go; then it takes them back and reconciles them.

The identity (model, dimension, chunking, text rules) is the *database's*: a daemon
whose identity differs from the stored one refuses to start while any chunk exists,
because dropping every chunk, as the embedded backend does, would wipe other sites.
Dropping them is explicit (``reindex=True``, ``memoryd migrate-storage --reindex``): it
bumps the database's identity generation, which every write checks, so a daemon of the old
settings stops writing at once (``storage.identity_changed``, its roots shown lost in
``status``), while one whose settings match the new identity re-adds its roots at its next
reconcile (its file rows are gone; the shared cache spares the embeddings).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg_pool
import structlog

from memoryd.indexer.config import Config
from memoryd.indexer.engine import MemoryIndex
from memoryd.indexer.errors import StoreError
from memoryd.indexer.fill.line_vectors import STEP_LINES, FillResult, LineRows
from memoryd.indexer.ingestion.indexstats import IndexStats, Progress
from memoryd.indexer.search.hits import SearchResult
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.base import LINE_WAIT_MS, Backend, Capabilities, LineStore, StorageUnavailableError
from memoryd.indexer.storage.index_status import (
    BacklogProgress,
    CacheStatus,
    IndexStatus,
    ModelStatus,
    VectorIndexStatus,
    skipped_files,
)
from memoryd.indexer.storage.postgres import connect, corpus, schema, sites
from memoryd.indexer.storage.postgres.cache import PgEmbeddingCache, PgLineStore
from memoryd.indexer.storage.postgres.dsn import describe
from memoryd.indexer.storage.postgres.line_rows import PgLineRows
from memoryd.indexer.storage.postgres.search import PgLegs, PgVectors
from memoryd.indexer.storage.postgres.status import LostRoot, PgFigures, PgStorage, SiteLocks
from memoryd.indexer.storage.postgres.store import FAST_REFUSAL_S, PgStore
from memoryd.indexer.storage.site import site_id
from memoryd.indexer.types import Embedder

log = structlog.get_logger(__name__)

POSTGRES = Capabilities(sites=True, keyword_first=True, vector_rebuilds=False, line_cache=True,
                        line_vectors=True, vectors_in_rows=True)

REINDEX_COMMAND = "memoryd migrate-storage --reindex"


class IdentityMismatchError(StoreError):
    """The database's chunks were made with other settings (model, chunking, text rules) than this memoryd's."""


class PgMemoryIndex(MemoryIndex):
    site: str  # always one: this daemon's, in the shared database

    def __init__(self, cfg: Config, embedder: Embedder, read_only: bool = False,
                 background_rebuilds: bool = False, pool: psycopg_pool.ConnectionPool | None = None,
                 reindex: bool = False) -> None:
        """Open (and migrate) the database named by ``cfg.storage``; ``pool`` reuses an open one (tests).

        ``reindex``: when the stored identity differs, drop every site's chunks and take this one's
        (see the module's docstring) instead of refusing. ``background_rebuilds`` says the caller
        is the daemon (which has threads for background work): it may start while the database
        is away (every call then fails with StorageUnavailableError until it answers, and the
        first call that reaches it finishes opening: :meth:`_attach_later`); a one-shot command
        fails at once instead."""
        st = cfg.storage
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
        # pgvector maintains its HNSW index itself: nothing to rebuild in the background
        super().__init__(cfg, embedder, read_only, background_rebuilds=False)

    def _open_backend(self) -> Backend:
        """The database: schema migrated (or checked), the pool, the identity and the (site, root) locks;
        or, for the daemon while the database is away, the parts that finish opening on first contact."""
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
            self.pgvectors = PgVectors(self.pg, self.embedder.dimension)
            return Backend(self.pg, self.cache, self.pgvectors, PgLegs(self.pg, self.pgvectors), POSTGRES)
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

    def _line_rows(self) -> LineRows:
        """This site's chunks' line vectors, in ``memoryd_line_vectors`` (asks nothing of the database yet)."""
        return PgLineRows(self.pg)

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

    def index_files(self, items: Sequence[tuple[Path, str]], progress: Progress | None = None,
                    defer_at: int | None = None) -> IndexStats:
        """As :meth:`MemoryIndex.index_files`, only for the roots whose lock this process holds.

        Keyword first works as on the embedded backend (``defer_at``): chunks are committed with a NULL
        embedding and the vector backlog writes it later. Meanwhile other sites read those rows too: a
        pending chunk is found by their keyword leg and given the neutral cosine in their fusion, as here."""
        self._verify_locks()
        mine = [(root, rel) for root, rel in items if self.claim_root(root)]
        return super().index_files(mine, progress, defer_at)

    def remove_file(self, root: Path, rel: str) -> int:
        """As :meth:`MemoryIndex.remove_file`, only under ``root``'s lock."""
        self._verify_locks()
        return super().remove_file(root, rel) if self.claim_root(root) else 0

    def move_file(self, root: Path, rel: str, dest_root: Path, dest_rel: str) -> bool:
        """As :meth:`MemoryIndex.move_file`, only under both roots' locks."""
        self._verify_locks()
        return self.claim_root(root) and self.claim_root(dest_root) and super().move_file(root, rel, dest_root,
                                                                                           dest_rel)

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
                                               "data_dir": str(self.data_dir), "version": _version()})
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
        if have == self.identity():
            log.info("storage.identity_reset", site=self.site, database=self.where, generation=generation,
                     action="every file row was dropped; a reconcile re-adds this site's roots")
            self.pg.generation = generation
            self._follow_reset = True
            return
        assert self._site_lock is not None
        why = (f"the database was re-indexed with other settings ({_differences(have or {}, self.identity())});"
               " upgrade memoryd here and restart it")
        self.identity_changed = why
        for root in self._site_lock.held:
            self._site_lock.lost[root] = why
        log.error("storage.identity_changed", site=self.site, database=self.where, generation=generation,
                  action="this daemon stopped writing: " + why)

    def identity(self) -> dict[str, str]:
        """The embedded backend's identity and the schema whose writers keep the corpus counts
        (:mod:`memoryd.indexer.storage.postgres.corpus`), so an older writer stops writing."""
        return {**super().identity(), "pg_writers": corpus.WRITERS_SINCE}

    def _check_identity(self) -> None:
        want = self.identity()
        stored = self.store.meta("identity")
        have = json.loads(stored) if stored else None
        if have != want:
            with self.pg.connection() as c:
                row = c.execute("SELECT EXISTS (SELECT 1 FROM memoryd_chunks)").fetchone()
            if have is not None and row and row[0] and not self._reindex:
                raise IdentityMismatchError(
                    f"database {self.where} holds chunks indexed with other settings ({_differences(have, want)});"
                    f" to re-index every site with this memoryd's settings, stop this daemon and run"
                    f" `{REINDEX_COMMAND}` (it drops every site's chunks, keeps the embedding cache; daemons"
                    " still on the old settings stop writing until upgraded), or use another database")
            if self.read_only:
                raise StoreError(f"no index in {self.where} (run `memoryd index` first)")
            if have is not None and self._reindex:
                same_vectors = all(have.get(k) == want[k] for k in ("model_id", "dimension"))
                self.reset = self.pg.reset_all_sites(json.dumps(want, sort_keys=True), drop_cache=not same_vectors)
                log.warning("storage.reindexed", database=self.where, site=self.site, files=self.reset[0],
                            chunks=self.reset[1], generation=self.reset[2], changed=_differences(have, want))
            else:
                self.store.set_meta({"identity": json.dumps(want, sort_keys=True)})
        if not self.read_only and self.pg.generation is None:
            self.pg.generation = self.pg.ensure_generation()
        if not self.read_only:
            with self.pg.connection() as c:
                schema.ensure_hnsw(c, self.embedder.dimension)

    def query(self, query: Query) -> SearchResult:
        """One query over every site's chunks, or those of ``query.sites``.

        A confined session (``path_check`` given: a peer or group) sees only this site's rows unless
        ``storage.share_peers_across_sites``: the same namespace path on another machine is another
        machine's peer (the default root is the same path for the same user everywhere), and its
        files are not this daemon's to check or to serve."""
        if query.path_check is not None and not self.cfg.storage.share_peers_across_sites:
            sites = query.sites if query.sites is not None else (self.site,)
            query = replace(query, sites=tuple(s for s in sites if s == self.site))
        return super().query(query)  # the embedded index's outage path: the embedder down, the keyword leg answers

    def lines_pending(self) -> bool:
        """As :meth:`MemoryIndex.lines_pending`; never while this daemon writes nothing (``identity_changed``,
        ``refused``), so its idle steps do not retry a refused write forever, nor while the last call found the
        database away (the daemon's next call that reaches it, a snapshot at the latest, resumes the fill)."""
        return (super().lines_pending() and self.identity_changed is None and self.refused is None
                and self.pg.health.reachable)

    def fill_line_vectors(self, max_lines: int = STEP_LINES, should_yield: Callable[[], bool] | None = None
                          ) -> FillResult:
        """As :meth:`MemoryIndex.fill_line_vectors`, after the check every write makes (the locks after a
        database restart, a re-index elsewhere); raises StorageUnavailableError while the database is away."""
        if self.read_only or self.line_fill is None:
            return FillResult()
        self._verify_locks()
        if self.identity_changed is not None or self.refused is not None:
            return FillResult()
        return super().fill_line_vectors(max_lines, should_yield)

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

    def status(self) -> IndexStatus:
        """The figures, read from the database; while it is unreachable, the last ones read, marked so."""
        try:
            st = self._status()
        except StorageUnavailableError:
            last = self._last_status or self._never_read()
            figures = last.storage.figures if isinstance(last.storage, PgStorage) else None
            return replace(last, storage=self._storage(figures), skipped=skipped_files(self.skipped),
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

    def _status(self) -> IndexStatus:
        with self.pg.connection() as c:
            row = c.execute("SELECT (SELECT count(*) FROM memoryd_files), (SELECT count(*) FROM memoryd_chunks),"
                            " (SELECT count(*) FROM memoryd_embed_cache),"
                            " (SELECT count(DISTINCT site) FROM memoryd_roots),"
                            " (SELECT count(*) FROM memoryd_chunks WHERE embedding IS NULL)").fetchone()
        assert row is not None
        files, chunks = self.store.counts()
        with self.pg.connection() as c:
            all_sites = tuple(sites.list_sites(c))
        figures = PgFigures(sites=int(row[3]), all_files=int(row[0]), all_chunks=int(row[1]), all_sites=all_sites)
        # every site's chunks with a vector (a chunk committed keyword first has none yet)
        vectors = int(row[1]) - int(row[4])
        st = self._index_status(files, chunks, int(row[2]), vectors, self._storage(figures))
        return replace(st, line_vectors_pending=self._lines_pending_count())

    def _count_lines_pending(self) -> int:
        """This site's chunks without line vectors (:meth:`MemoryIndex._lines_pending_count` keeps it a while)."""
        assert self.line_fill is not None
        return self.line_fill.count()

    def _never_read(self) -> IndexStatus:
        """``status``'s figures before the database ever answered (the daemon started without it)."""
        return self._index_status(None, None, None, None, self._storage(None))

    def _index_status(self, files: int | None, chunks: int | None, entries: int | None, vectors: int | None,
                      storage: PgStorage) -> IndexStatus:
        return IndexStatus(
            files=files, chunks=chunks,
            model=ModelStatus(self.embedder.model_id, self.embedder.dimension,
                              getattr(self.embedder, "query_precision", "exact")),
            cache=CacheStatus(entries, self.cache.hits, self.cache.misses, self.cache.capacity),
            index=VectorIndexStatus("pgvector-hnsw", vectors, tombstones=0, rebuilding=None),
            skipped=skipped_files(self.skipped),
            vectors=BacklogProgress.from_progress(self.backlog.progress()),  # this process's backlog
            storage=storage)

    def open_line_store(self) -> LineStore | None:
        """The shared embedding cache for the context excerpts' line vectors, through the pool (None read-only)."""
        if self.read_only:
            return None
        return PgLineStore(self.pg, self.embedder.dimension, LINE_WAIT_MS)

    def set_background_rebuilds(self, on: bool = True) -> None:
        """Nothing to switch: pgvector maintains its HNSW index in every write."""

    def rebuild_wanted(self) -> bool:
        return False

    def maintain(self) -> dict[str, Any]:
        return {"cache_evicted": self.evict_cache()}

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


def _differences(have: dict[str, Any], want: dict[str, str]) -> str:
    """The stored settings that differ from ``want``, as ``key=stored value`` (for messages; a key
    only one side has shows None on the other)."""
    return ", ".join(f"{k}={have.get(k)}" for k in sorted(have.keys() | want.keys()) if have.get(k) != want.get(k))


def _version() -> str:
    """This memoryd's version, for the site's record (``memoryd sites list``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memoryd")
    except PackageNotFoundError:
        return "unknown"
