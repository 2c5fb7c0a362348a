"""``MemoryIndex``: the index as one object — open, index, reconcile, search, save — whatever the backend.

Usable in-process without the daemon (a test, a notebook, ``memoryd index``): :func:`open_index`
builds the backend ``cfg.storage`` names first (:func:`memoryd.indexer.storage.factory.open_backend`),
then the index over it. The index knows the storage interface only
(:class:`~memoryd.indexer.storage.base.Backend`); what differs between backends (opening and its
identity check, the guard before a write, snapshots, upkeep, status, vector rebuilds, line rows)
is the backend's.

It starts no threads; it is safe to call ``search`` from several threads while one thread indexes,
because every commit and every search holds the backend's lock (the embedding work happens outside
it). Indexing itself is :class:`~memoryd.indexer.ingestion.indexing.FileIndexer`'s job, the vector
side of it (a group's vectors or their deferral, the backlog steps, the cache bound)
:class:`~memoryd.indexer.fill.vectorfill.VectorFill`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from memoryd.indexer.config import Config
from memoryd.indexer.errors import ModelError, ProviderUnavailable
from memoryd.indexer.fill.line_vectors import STEP_LINES, FillResult, LineVectorFill
from memoryd.indexer.fill.vectorfill import EMBED_GROUP, VectorFill
from memoryd.indexer.ingestion.identity import rows_identity
from memoryd.indexer.ingestion.indexing import FileIndexer
from memoryd.indexer.ingestion.indexstats import IndexStats, Progress, storable
from memoryd.indexer.search.hits import SearchResult
from memoryd.indexer.search.pipeline import SearchPipeline
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.base import Backend, CacheStore, ChunkStore, LineStore, RebuildJob, VectorStore
from memoryd.indexer.storage.factory import open_backend
from memoryd.indexer.storage.index_status import IndexStatus
from memoryd.indexer.types import Embedder

log = structlog.get_logger(__name__)

LINES_COUNT_EVERY_S = 10.0  # status counts the line-vector backlog at most this often (an anti-join over the chunks)
__all__ = ["EMBED_GROUP", "MemoryIndex", "open_index"]


def open_index(cfg: Config, embedder: Embedder, read_only: bool = False, background_rebuilds: bool = False,
               *, reindex: bool = False, pool: Any = None) -> MemoryIndex:
    """The index over the backend ``cfg.storage.backend`` names (the composition root of storage).

    ``background_rebuilds`` (the daemon): vector rebuilds run off the writing thread, and a shared
    database may be away at start. ``reindex`` and ``pool`` are :func:`~memoryd.indexer.storage.factory.open_backend`'s.
    """
    backend = open_backend(cfg, embedder, rows_identity(cfg, embedder), read_only=read_only,
                           background_rebuilds=background_rebuilds, reindex=reindex, pool=pool)
    try:
        return MemoryIndex(cfg, embedder, backend, read_only=read_only)
    except BaseException:
        backend.close()
        raise


class MemoryIndex:
    """The whole index over one backend: indexing, the vector and line backlogs, search, upkeep."""

    store: ChunkStore
    cache: CacheStore
    vectors: VectorStore

    def __init__(self, cfg: Config, embedder: Embedder, backend: Backend, read_only: bool = False) -> None:
        self.cfg, self.embedder, self.backend, self.read_only = cfg, embedder, backend, read_only
        self.data_dir = cfg.data_dir
        self.skipped: dict[str, str] = {}
        self.store, self.cache, self.vectors = backend.store, backend.cache, backend.vectors
        self.lock, self.backlog, self.capabilities, self.site = backend.lock, backend.backlog, \
            backend.capabilities, backend.site
        self.vector_fill = VectorFill(self.store, self.cache, self.vectors, self.lock, self.backlog, embedder,
                                      cfg.embedding.batch_size, read_only)
        self.searcher = SearchPipeline(backend.legs, embedder, cfg.search)
        # the lines serve the ranking (search.line_weight) and the context excerpts (search.context_line_model)
        wanted = cfg.search.line_weight > 0 or cfg.search.context_line_model
        self.line_fill = LineVectorFill(backend.line_rows(), self.cache, embedder.model_id, read_only) \
            if self.capabilities.line_vectors and wanted else None
        self._files = FileIndexer(cfg, embedder, backend, self.vector_fill, self.line_fill, self.skipped)

    def identity(self) -> dict[str, str]:
        """What this index's rows are made with, as the backend stores it
        (:mod:`~memoryd.indexer.ingestion.identity`)."""
        return self.backend.identity

    # -- indexing -------------------------------------------------------------

    def index_files(self, items: Sequence[tuple[Path, str]], progress: Progress | None = None,
                    defer_at: int | None = None) -> IndexStats:
        """Index (or re-index) files given as (root, relative path); vanished files are removed.

        ``defer_at``: keyword first. Once a group of files needs at least this many chunks
        embedded, this call commits chunks and keyword terms without waiting for the model
        and queues the missing vectors on :attr:`backlog` (:meth:`fill_vectors` gives them).
        None (the default) always embeds before committing. Files indexed without deferral
        also take their chunks still in the backlog along (a user-touched file jumps the queue).
        With ``defer_at`` a group is committed once it holds ``defer_at`` chunks, and file by file
        once deferring: no file waits on more than a handful of embeddings, so the first files are
        searchable at once and ``progress`` counts committed files. Only the roots the backend lets
        this process write are indexed (a shared database: those whose lock it holds).

        A file that cannot be indexed is skipped, never the batch: it is counted and named in the
        returned stats and in ``status().skipped`` (with the reason) until it is indexed or removed.
        """
        mine = set(self.backend.guard_write(dict.fromkeys(root for root, _ in items)))
        return self._files.index([(root, rel) for root, rel in items if root in mine], progress, defer_at,
                                 self.read_only)

    def remove_file(self, root: Path, rel: str) -> int:
        """Drop a file from the index; returns the number of chunks removed (0 when ``root`` is not ours)."""
        if not self.backend.guard_write([root]):
            return 0
        stats = IndexStats()
        self._files.remove(self.store.root_id(root), rel, stats)
        self.skipped.pop(f"{root}/{rel}", None)
        return stats.chunks_removed

    def move_file(self, root: Path, rel: str, dest_root: Path, dest_rel: str) -> bool:
        """Rename a file in the index: no chunk is re-embedded. False if ``rel`` was not indexed."""
        if len(self.backend.guard_write(dict.fromkeys([root, dest_root]))) < len({root, dest_root}):
            return False
        if not (storable(rel) and storable(dest_rel)):
            return False
        with self.lock:
            return self.store.move_file(self.store.root_id(root), rel, self.store.root_id(dest_root), dest_rel)

    def claim_root(self, root: Path) -> bool:
        """Whether this process may change ``root``'s rows (:func:`memoryd.indexer.ingestion.reconcile.plan`
        asks before removing a root no longer configured): always on the embedded index, under the
        root's lock on a shared database."""
        return self.backend.claim_root(root)

    def take_reconcile_wanted(self) -> bool:
        """True once when the storage dropped this site's rows under it (a shared database re-indexed)."""
        return self.backend.take_reconcile_wanted()

    # -- the vector and line backlogs -------------------------------------------

    def fill_vectors(self, limit: int = EMBED_GROUP, should_yield: Callable[[], bool] | None = None) -> int:
        """Give up to ``limit`` backlog chunks their vector, most urgent first; returns how many.

        ``should_yield`` is asked between model slices: True stops the step there (what
        is done stays done; the rest goes back to the backlog).
        """
        return self.vector_fill.fill(limit, should_yield)

    def set_backlog_embedder(self, embedder: Embedder | None) -> None:
        """Fill the vector backlog and the line vectors with ``embedder`` (the daemon's low-priority
        one, which gives way to a waiting task); None: with the indexing embedder."""
        self.vector_fill.backlog_passages = embedder

    def set_backlog_slice(self, size: int) -> None:
        """Passages per backlog model call: what a save arriving mid-step waits behind (the daemon
        sizes it to the measured rate, daemon/work/vector_steps.py)."""
        self.vector_fill.backlog_slice = size

    def promote_backlog(self, files: Sequence[tuple[Path, str]]) -> int:
        """Put the backlog chunks of these ``(root, rel)`` files first; returns how many moved."""
        return self.vector_fill.promote(files)

    def lines_pending(self) -> bool:
        """Whether chunks may still lack their line vectors (a hint: cleared by a step that finds none);
        never while this process writes nothing, nor while the storage was last found away."""
        return self.line_fill is not None and self.line_fill.pending and not self.read_only \
            and self.backend.may_write(idle=True)

    def fill_line_vectors(self, max_lines: int = STEP_LINES, should_yield: Callable[[], bool] | None = None
                          ) -> FillResult:
        """Give the next chunks their line vectors (:mod:`memoryd.indexer.fill.line_vectors`), embedding at
        most ``max_lines`` new lines with the backlog's embedder; ``should_yield`` as :meth:`fill_vectors`'s.
        Runs the backend's check before a write first (raises StorageUnavailableError when it is away)."""
        if self.line_fill is None or self.read_only:
            return FillResult()
        self.backend.guard_write(())
        if not self.backend.may_write():
            return FillResult()
        return self.line_fill.fill(self.vector_fill.backlog_passages or self.vector_fill.passages,
                                   self.vector_fill.passages, max_lines, should_yield=should_yield)

    def evict_cache(self) -> int:
        """Trim the embedding cache to ``embedding.cache_entries`` (live vectors always stay).

        Call it from the writing thread. It takes no search lock: searches never read the cache.
        """
        return self.vector_fill.evict_cache()

    def set_passage_embedder(self, embedder: Embedder) -> None:
        """Embed passages (indexing) with ``embedder`` from now on; queries keep the constructor's.

        It must be the same model (the daemon passes a low-priority wrapper of it); raises
        ModelError otherwise, since vectors of two models must never mix.
        """
        if (embedder.model_id, embedder.dimension) != (self.embedder.model_id, self.embedder.dimension):
            raise ModelError(f"passage embedder {embedder.model_id} ({embedder.dimension}-d) is not the "
                             f"index's model {self.embedder.model_id} ({self.embedder.dimension}-d)")
        self.vector_fill.passages = embedder

    # -- search -----------------------------------------------------------------

    def query(self, query: Query) -> SearchResult:
        """Run ``query`` (:mod:`memoryd.indexer.search.pipeline`) over the rows the backend lets it see."""
        query = self.backend.scope(query)
        try:
            return self.searcher.search(query)
        except ProviderUnavailable as exc:  # the embedding server is down: the keyword leg still answers
            if query.mode == "keyword":
                raise
            log.warning("search.keyword_only", reason=str(exc))
            result = self.searcher.search(dataclasses.replace(query, mode="keyword", query_vector=None))
            return dataclasses.replace(result, degraded=f"keyword results only: {exc}")

    def open_line_store(self) -> LineStore | None:
        """The embedding cache for the context excerpts' line vectors
        (:class:`~memoryd.indexer.storage.base.LineStore`), on a connection of its own: it serves requests'
        threads, never the writer's. None when read-only (line vectors then live in memory only) or when
        the backend keeps none (``Capabilities.line_cache``). The caller closes it."""
        if self.read_only or not self.capabilities.line_cache:
            return None
        return self.backend.open_line_store()

    # -- snapshots, upkeep, status ------------------------------------------------

    def save(self, force: bool = False) -> bool:
        """Make what is only in memory durable (the embedded index: the FAISS snapshot if it changed, or
        ``force``; the cache counters); whether anything was written."""
        return self.backend.save(force)

    def maintain(self) -> dict[str, Any]:
        """The periodic upkeep, on the writing thread: trim the embedding cache, then the backend's own
        (the embedded index: checkpoint the WAL, refresh SQLite's statistics). Returns what it did."""
        return self.backend.maintain(self.evict_cache())

    def status(self) -> IndexStatus:
        """The index's figures. Safe from any thread (the backend reads them off the writer's connection)."""
        return self.backend.status(self.skipped, self._lines_pending_count)

    def _lines_pending_count(self) -> int | None:
        """Chunks without line vectors (None: not filled here — read-only, or turned off); 0 at once when
        the fill found none left, else counted at most every :data:`LINES_COUNT_EVERY_S`."""
        if self.line_fill is None or self.read_only:
            return None
        if not self.line_fill.pending:
            return 0
        return self.line_fill.recount(self.backend.count_lines_pending, LINES_COUNT_EVERY_S)

    # -- background rebuilds of the vector structure (``Capabilities.vector_rebuilds``) --

    def set_background_rebuilds(self, on: bool = True) -> None:
        """Switch to (or from) background rebuilds, e.g. when a daemon takes over an open index."""
        self.backend.set_background_rebuilds(on)

    def rebuild_wanted(self) -> bool:
        """True when the vector structure is due a rebuild (switch or compaction) and none is planned."""
        return self.backend.rebuild_wanted()

    def start_rebuild(self) -> RebuildJob | None:
        """Plan the due rebuild (under the lock, ~1 ms): its source is a read snapshot of chunks x cache.

        None when nothing is due or one is already planned. Run ``build()`` on the result
        anywhere (no lock), then :meth:`finish_rebuild`; or :meth:`cancel_rebuild` it.
        """
        return self.backend.start_rebuild()

    def finish_rebuild(self, job: RebuildJob) -> bool:
        """Swap a built rebuild in, with every write made meanwhile (under the lock, milliseconds)."""
        return self.backend.finish_rebuild(job)

    def cancel_rebuild(self, job: RebuildJob) -> None:
        self.backend.cancel_rebuild(job)

    def close(self) -> None:
        self.backend.close()
