"""The vector side of indexing: a group's vectors (or their deferral), the backlog steps, the cache bound.

:class:`~memoryd.indexer.engine.MemoryIndex` owns one :class:`VectorFill` and hands it
the work that concerns vectors only, so the engine itself reads as "prepare, commit,
search". Keyword-first indexing lives here: a group that needs many chunks embedded
is committed with only the vectors the cache already holds, the rest queue on the
:class:`~memoryd.indexer.fill.backlog.VectorBacklog`, and :meth:`VectorFill.fill` gives
them their vectors a bounded step at a time (:mod:`memoryd.indexer.fill.deferred`).

It starts no threads and takes the index's lock only where a step commits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from memoryd.indexer.errors import ProviderUnavailable
from memoryd.indexer.fill import deferred
from memoryd.indexer.fill.backlog import VectorBacklog
from memoryd.indexer.ingestion.indexstats import IndexStats
from memoryd.indexer.ingestion.ingest import EmbedResult, PreparedFile, embed_missing
from memoryd.indexer.storage.base import CacheStore, ChunkStore, VectorStore
from memoryd.indexer.types import Embedder

log = structlog.get_logger(__name__)

EMBED_GROUP = 256  # new chunks gathered before one embedding pass


class VectorFill:
    """Embeds (or defers) the chunks an index commits, and keeps the embedding cache bounded."""

    def __init__(self, store: ChunkStore, cache: CacheStore, vectors: VectorStore, lock: threading.Lock,
                 backlog: VectorBacklog, passages: Embedder, batch_size: int, read_only: bool) -> None:
        self.store = store
        self.cache = cache
        self.vectors = vectors
        self.lock = lock
        self.backlog = backlog
        self.passages = passages  # indexing's embedder (MemoryIndex.set_passage_embedder swaps it)
        self.backlog_passages: Embedder | None = None  # the backlog's, when the owner has one (None: passages)
        self.slice_size = max(32, 2 * batch_size)
        self.backlog_slice = self.slice_size  # per backlog model call; the daemon sizes it (vector_steps.py)
        self.read_only = read_only
        self._embedded_since_bound = 0

    def group_vectors(self, group: list[PreparedFile], defer_at: int | None,
                      deferring: bool) -> tuple[EmbedResult, bool]:
        """The group's vectors and whether the call defers from here on: every vector (the model
        computes what the cache lacks), or, deferring, only those the cache holds."""
        if defer_at is not None:
            keys = list(dict.fromkeys(c.embed_key for f in group for c in f.chunks))
            found = self.cache.get_many(keys)
            if deferring or len(keys) - len(found) >= defer_at:
                return EmbedResult(found, embedded=0, cache_hits=len(found)), True
        try:
            emb = embed_missing(group, self.passages, self.cache, persist=self.persist, slice_size=self.slice_size)
        except ProviderUnavailable as exc:  # the embedding server is down: keyword first, vectors wait
            log.warning("vectors.provider_down", error=str(exc), action="committed keyword first; vectors pending")
            keys = list(dict.fromkeys(c.embed_key for f in group for c in f.chunks))
            found = self.cache.get_many(keys)
            return EmbedResult(found, embedded=0, cache_hits=len(found)), True
        return emb, deferring

    def fill(self, limit: int = EMBED_GROUP, should_yield: Callable[[], bool] | None = None) -> int:
        """Give up to ``limit`` backlog chunks their vector, most urgent first; returns how many.

        ``should_yield`` is asked between model slices: True stops the step there (what
        is done stays done; the rest goes back to the backlog). The daemon keeps
        ``backlog_slice`` small: a slice is what a save arriving mid-step waits for.
        """
        entries = self.backlog.take(limit)
        if not entries:
            return 0
        done = deferred.run_step(self._parts(), entries, self.backlog_passages or self.passages, self.backlog_slice,
                                 should_yield)
        if done.embedded and not self.read_only:
            self.bound_cache(done.embedded)
        return done.done

    def fill_files(self, files: Sequence[tuple[int, str]], stats: IndexStats) -> None:
        """Give the backlog chunks of these files their vectors now (user-touched files go first)."""
        ids = [i for root_id, rel in files for i in self.store.chunk_ids_of(root_id, rel) if i in self.backlog]
        entries = self.backlog.take_ids(ids)
        if not entries:
            return
        try:
            stats.embedded += deferred.run_step(self._parts(), entries, self.passages, self.slice_size).embedded
        except ProviderUnavailable as exc:  # no model (a server down, a first start's build): they stay queued
            log.warning("vectors.provider_down", error=str(exc), action="vectors stay pending")

    def promote(self, files: Sequence[tuple[Path, str]]) -> int:
        """Put the backlog chunks of these ``(root, rel)`` files first (saved by the user while the
        backlog fills in: their vectors come in the next slice); returns how many chunks moved."""
        if not self.backlog:
            return 0
        ids = [i for root, rel in files for i in self.store.chunk_ids_of(self.store.root_id(root), rel)]
        return self.backlog.promote(ids)

    def _parts(self) -> deferred.Parts:
        return deferred.Parts(self.store, self.cache, self.vectors, self.lock, self.backlog, self.persist)

    def persist(self, vectors: dict[bytes, Any]) -> None:
        """Keep fresh model output at once (keys are text hashes: valid before any chunk uses them)."""
        with self.store.transaction() as t:
            self.cache.put_many(t, vectors)

    def evict_cache(self) -> int:
        """Trim the embedding cache to its capacity (live vectors always stay); no search lock needed."""
        with self.store.transaction() as t:
            return self.cache.evict(t)

    def bound_cache(self, embedded: int) -> None:
        """Honour the cache bound during long indexing runs too, not only at the hourly maintenance.

        Counting and evicting scan the cache (O(entries): ~0.2 s at 100k, seconds at 1M, every
        time when live chunks alone exceed the bound), so the check runs once per tenth of the
        bound's worth of new vectors — the cache overshoots by at most that — not per edit.
        """
        self._embedded_since_bound += embedded
        if self._embedded_since_bound < max(1, self.cache.capacity // 10):
            return
        self._embedded_since_bound = 0
        entries = self.cache.entries()
        if entries > self.cache.capacity:
            log.info("cache.evicted", evicted=self.evict_cache(), entries_before=entries,
                     capacity=self.cache.capacity)
