"""The embedded backend as the index runs it: SQLite + FTS5 and the FAISS snapshot in the data directory.

Opening checks the stored identity (model id, dimension, chunk settings, text rules) against the
one given; a difference drops every chunk once, with a single log line, so vectors of two models
are never mixed (this backend is its rows' only writer). The FAISS snapshot is then checked
against the chunk table and repaired from the cache (:mod:`.vector_sync`).

Rebuilds of the vector structure (the flat -> HNSW switch, tombstone compaction) run inline by
default. With ``background_rebuilds`` they never run inside a write: the owner polls
:meth:`EmbeddedBackend.rebuild_wanted`, takes a plan with :meth:`~EmbeddedBackend.start_rebuild`
(a snapshot, under the lock, milliseconds), runs its ``build`` on any thread without the lock
(seconds to minutes; searches go on against the old structure) and hands it back to
:meth:`~EmbeddedBackend.finish_rebuild` (under the lock, milliseconds).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import structlog

from memoryd.indexer.config import Config
from memoryd.indexer.errors import ModelError, StoreCorruptError, StoreError
from memoryd.indexer.fill.backlog import VectorBacklog
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.base import EMBEDDED, LINE_WAIT_MS, LineRows, LineStore, RebuildJob
from memoryd.indexer.storage.embedded import ann, vector_sync
from memoryd.indexer.storage.embedded.cache import EmbeddingCache, SqliteLineStore, open_machine_cache
from memoryd.indexer.storage.embedded.hybrid import EmbeddedLegs, ReaderPool
from memoryd.indexer.storage.embedded.store import Store
from memoryd.indexer.storage.embedded.store_lines import SqliteLineRows, count_without_lines
from memoryd.indexer.storage.embedded.vectors import VectorIndex
from memoryd.indexer.storage.index_status import (
    BacklogProgress,
    EmbeddedStorage,
    IndexStatus,
    LocalCacheStatus,
    ModelStatus,
    VectorIndexStatus,
    skipped_files,
)
from memoryd.indexer.types import Embedder

log = structlog.get_logger(__name__)

DB_NAME = "index.sqlite3"
VECTORS_NAME = "vectors.faiss"
__all__ = ["DB_NAME", "VECTORS_NAME", "EmbeddedBackend"]


class EmbeddedBackend:
    """SQLite (rows, keyword terms, the embedding cache, line vectors) and FAISS, under one lock."""

    capabilities = EMBEDDED
    site: str | None = None  # one site: this data directory's

    def __init__(self, cfg: Config, embedder: Embedder, identity: dict[str, str], read_only: bool = False,
                 background_rebuilds: bool = False) -> None:
        self.cfg, self.embedder, self.read_only = cfg, embedder, read_only
        self.data_dir = cfg.data_dir
        self._background = background_rebuilds
        self.lock = threading.Lock()
        self.backlog = VectorBacklog()
        if not read_only:
            self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        elif not (self.data_dir / DB_NAME).exists():
            raise StoreError(f"no index in {self.data_dir} (run `memoryd index` first)")
        self.sqlite = self.store = self._open_store()
        # The machine-wide layer (never for the toy "hash" provider: it computes faster than it looks up)
        machine = None if read_only or cfg.embedding.provider == "hash" else \
            open_machine_cache(cfg.embedding_cache_dir, cfg.embedding.machine_cache_entries)
        self.local_cache = self.cache = EmbeddingCache(self.sqlite.conn, embedder.dimension,
                                                       cfg.embedding.cache_entries, machine)
        if machine is not None and self.sqlite.meta("machine_cache") != str(machine.path):  # once per data dir
            log.info("machine_cache.seeded", path=str(machine.path), vectors=machine.seed(self.sqlite.conn))
            self.sqlite.set_meta({"machine_cache": str(machine.path)})
        self.local_cache.hits = int(self.sqlite.meta("cache_hits") or 0)
        self.local_cache.misses = int(self.sqlite.meta("cache_misses") or 0)
        self.identity = identity
        self._check_identity()
        self.faiss = self.vectors = self._load_vectors()
        self.readers = ReaderPool(self.sqlite.reader)
        self.legs = EmbeddedLegs(self.readers, self.faiss, self.lock)

    def _open_store(self) -> Store:
        """Open the database; a corrupt one is moved aside (kept for inspection) and rebuilt.

        The Markdown files are the real source: a fresh database re-indexes them
        (embedding again, since the cache lived in the broken file).
        """
        path = self.data_dir / DB_NAME
        try:
            return Store(path, read_only=self.read_only)
        except StoreCorruptError as exc:
            if self.read_only:
                raise
            aside = path.with_name(f"{DB_NAME}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}")
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.replace(f"{path}{suffix}", f"{aside}{suffix}")
            with contextlib.suppress(FileNotFoundError):
                (self.data_dir / VECTORS_NAME).unlink()
            log.error("index.corrupt", error=str(exc), kept_as=str(aside),
                      action="rebuilding the index from the Markdown files")
            return Store(path)

    def _check_identity(self) -> None:
        want = self.identity
        stored = self.store.meta("identity")
        have = json.loads(stored) if stored else None
        if have == want:
            return
        if self.read_only:
            if have is not None and have.get("model_id") != want["model_id"]:
                raise StoreError(f"index in {self.data_dir} was built with model {have.get('model_id')}, "
                                 f"not {want['model_id']}: run `memoryd index` to rebuild it")
            return
        if have is not None:
            _same_server_model_other_width(have, want, self.data_dir)
            changed = sorted(k for k in want if have.get(k) != want[k])
            log.warning("index.identity_changed", changed=changed, old=have, new=want,
                        action="dropping all chunks; files will be re-indexed (cached vectors reused)")
            self.store.forget_everything()
            with contextlib.suppress(FileNotFoundError):
                (self.data_dir / VECTORS_NAME).unlink()
        self.store.set_meta({"identity": json.dumps(want, sort_keys=True)})

    def _load_vectors(self) -> VectorIndex:
        vectors = vector_sync.open_vectors(self.data_dir / VECTORS_NAME, self.embedder.dimension, self.cfg.search,
                                           background=self._background, read_only=self.read_only)
        lost = vector_sync.sync_with_chunks(vectors, self.sqlite, self.local_cache, self.embedder.embed_passages,
                                            read_only=self.read_only, defer=self._background or self.read_only)
        for i, mtime_ns in self.sqlite.chunk_mtimes(lost).items():
            self.backlog.add([i], mtime_ns)
        return vectors

    # -- writes: this backend is its rows' only writer ---------------------------

    def guard_write(self, roots: Iterable[Path]) -> list[Path]:
        return list(roots)

    def claim_root(self, root: Path) -> bool:
        return True

    def may_write(self, idle: bool = False) -> bool:
        return True

    def take_reconcile_wanted(self) -> bool:
        return False

    def scope(self, query: Query) -> Query:
        """One site: ``sites`` does not narrow it."""
        return query

    def save(self, force: bool = False) -> bool:
        """Snapshot the vector index if it changed (or ``force``); persist cache counters."""
        if self.read_only:
            return False
        with self.lock:
            if not (self.faiss.dirty or force):
                return False
            self.faiss.save(self.data_dir / VECTORS_NAME)
        self.store.set_meta({"cache_hits": str(self.cache.hits), "cache_misses": str(self.cache.misses)})
        return True

    def maintain(self, cache_evicted: int) -> dict[str, Any]:
        """Checkpoint the WAL and let SQLite refresh its statistics, on the writing thread."""
        # A background rebuild reads a snapshot in one long read transaction: TRUNCATE would
        # wait for it (up to the busy timeout, on the worker); PASSIVE copies what it can.
        mode = "PASSIVE" if self.faiss.rebuilding else "TRUNCATE"
        self.sqlite.conn.execute(f"PRAGMA wal_checkpoint({mode})")
        self.sqlite.conn.execute("PRAGMA optimize")
        return {"cache_evicted": cache_evicted, "checkpoint": mode.lower()}

    def status(self, skipped: Mapping[str, str], lines_pending: Callable[[], int | None]) -> IndexStatus:
        """The counts are read through the reader pool (never the writer's connection, which belongs
        to the writing thread)."""
        with self.readers.connection() as conn:
            files, chunks, entries = (int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
                                      for table in ("files", "chunks", "embed_cache"))
        machine = self.local_cache.machine
        return IndexStatus(
            files=files, chunks=chunks,
            model=ModelStatus(self.embedder.model_id, self.embedder.dimension,
                              getattr(self.embedder, "query_precision", "exact"),
                              passages=getattr(self.embedder, "passage_precision", "exact"),
                              provider=self.cfg.embedding.provider, server=_server_health(self.embedder)),
            cache=LocalCacheStatus(entries, self.cache.hits, self.cache.misses, self.cache.capacity,
                                   machine=str(machine.path) if machine is not None else None),
            index=VectorIndexStatus(self.faiss.kind, self.vectors.size, self.faiss.tombstones, self.faiss.rebuilding),
            skipped=skipped_files(skipped),
            vectors=BacklogProgress.from_progress(self.backlog.progress()),
            storage=EmbeddedStorage(str(self.data_dir)),
            line_vectors_pending=lines_pending(),
        )

    # -- line vectors ------------------------------------------------------------

    def line_rows(self) -> LineRows:
        return SqliteLineRows(self.sqlite)

    def count_lines_pending(self) -> int:
        with self.readers.connection() as conn:
            return count_without_lines(conn)

    def open_line_store(self) -> LineStore | None:
        return None if self.read_only else SqliteLineStore(self.sqlite.path, self.embedder.dimension, LINE_WAIT_MS)

    # -- background rebuilds -------------------------------------------------------

    def set_background_rebuilds(self, on: bool) -> None:
        with self.lock:
            self._background = on
            self.faiss.auto_rebuild = not on

    def rebuild_wanted(self) -> bool:
        return self._background and self.faiss.rebuilding is None and self.faiss.wanted() is not None

    def start_rebuild(self) -> RebuildJob | None:
        with self.lock:
            if not self.rebuild_wanted():
                return None
            source, close = vector_sync.rebuild_source(self.sqlite, self.embedder.dimension)
            return self.faiss.plan_rebuild(source, close)

    def finish_rebuild(self, job: RebuildJob) -> bool:
        assert isinstance(job, ann.Rebuild), job  # planned by start_rebuild
        with self.lock:
            return self.faiss.adopt(job)

    def cancel_rebuild(self, job: RebuildJob) -> None:
        assert isinstance(job, ann.Rebuild), job
        with self.lock:
            self.faiss.cancel(job)

    def close(self) -> None:
        with contextlib.suppress(StoreError):
            self.save()
        self.readers.close()
        self.store.close()
        if self.local_cache.machine is not None:
            self.local_cache.machine.close()


def _same_server_model_other_width(have: dict[str, str], want: dict[str, str], data_dir: Path) -> None:
    """Refuse to start when an embedding server's model now gives vectors of another width than the
    index holds (``openai:<model>@<dim>``): a server swapped under the same name, or a changed
    ``embedding.dimensions``, would otherwise silently re-embed everything."""
    old, new = have.get("model_id", ""), want["model_id"]
    if old.startswith("openai:") and new.startswith("openai:") and \
            old.split("@")[0] == new.split("@")[0] and have.get("dimension") != want["dimension"]:
        raise ModelError(f"the embedding server's model {new.split('@')[0][7:]!r} gives {want['dimension']}-d "
                         f"vectors, but the index in {data_dir} holds {have.get('dimension')}-d ones: set "
                         f"embedding.dimensions = {have.get('dimension')}, or index into a new --data-dir "
                         f"(or remove this one's index) to re-embed with the new width")


def _server_health(embedder: Embedder) -> dict[str, Any] | None:
    """An embedding server's health (reachable, last error) for an embedder behind one, else None."""
    health = getattr(embedder, "health", None)
    return health() if callable(health) else None
