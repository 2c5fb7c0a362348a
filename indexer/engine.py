"""``MemoryIndex``: the index as one object — open, index, reconcile, search, save.

Usable in-process without the daemon (a test, a notebook, ``memoryd index``).
It starts no threads; it is safe to call ``search`` from several threads while
one thread indexes, because every commit (SQLite + FAISS) and every search
holds the same lock (the embedding work happens outside it).

Rebuilds of the vector structure (the flat -> HNSW switch, tombstone
compaction) run inline by default. With ``background_rebuilds`` they never
run inside a write: the owner polls :meth:`MemoryIndex.rebuild_wanted`, takes
a plan with :meth:`~MemoryIndex.start_rebuild` (a snapshot, under the lock,
milliseconds), runs its ``build`` on any thread without the lock (seconds to
minutes; searches go on against the old structure) and hands it back to
:meth:`~MemoryIndex.finish_rebuild` (under the lock, milliseconds).

On open, the stored identity (model id, dimension, chunk settings, text rules)
is compared with the current one; a difference drops every chunk once, with a
single log line, so vectors of two models are never mixed. The FAISS snapshot
is then checked against the chunk table and repaired from the cache.

The vector side of indexing (a group's vectors or their deferral, the backlog
steps, the cache bound) is :class:`~memoryd.indexer.fill.vectorfill.VectorFill`'s job.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from memoryd.indexer.config import Config
from memoryd.indexer.errors import FileSkipped, ModelError, ProviderUnavailable, StoreCorruptError, StoreError
from memoryd.indexer.fill.backlog import VectorBacklog
from memoryd.indexer.fill.line_vectors import STEP_LINES, FillResult, LineRows, LineVectorFill
from memoryd.indexer.fill.vectorfill import EMBED_GROUP, VectorFill
from memoryd.indexer.ingestion.chunker import CHUNKER_VERSION
from memoryd.indexer.ingestion.embedtext import EMBED_TEXT_VERSION
from memoryd.indexer.ingestion.files import VANISHED, read_memory_file
from memoryd.indexer.ingestion.indexstats import IndexStats, Progress, printable_name, storable
from memoryd.indexer.ingestion.ingest import (
    PREPARE_FAILED,
    EmbedResult,
    PreparedFile,
    describe_error,
    file_fault,
    prepare_file,
    skip_reason,
    stage,
)
from memoryd.indexer.redaction.privacy import REDACT_VERSION
from memoryd.indexer.search import keyword
from memoryd.indexer.search.hits import SearchResult
from memoryd.indexer.search.pipeline import SearchPipeline
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.base import EMBEDDED, LINE_WAIT_MS, Backend, CacheStore, ChunkStore, LineStore, VectorStore
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
LINES_COUNT_EVERY_S = 10.0  # status counts the line-vector backlog at most this often (an anti-join over the chunks)
VECTORS_NAME = "vectors.faiss"
__all__ = ["DB_NAME", "EMBED_GROUP", "VECTORS_NAME", "MemoryIndex"]


class MemoryIndex:
    """The whole index: store, cache, vectors, searcher, under one lock."""

    site: str | None = None  # this daemon's site in a shared database (None: the embedded index, one site)

    store: ChunkStore
    cache: CacheStore
    vectors: VectorStore

    def __init__(self, cfg: Config, embedder: Embedder, read_only: bool = False,
                 background_rebuilds: bool = False) -> None:
        self.cfg = cfg
        self.embedder = embedder
        self.read_only = read_only
        self._background = background_rebuilds
        self.data_dir = cfg.data_dir
        self.lock = threading.Lock()
        self.skipped: dict[str, str] = {}
        self.backlog = VectorBacklog()
        backend = self._open_backend()
        self.store, self.cache, self.vectors = backend.store, backend.cache, backend.vectors
        self.capabilities = backend.capabilities
        self.vector_fill = VectorFill(self.store, self.cache, self.vectors, self.lock, self.backlog, embedder,
                                      cfg.embedding.batch_size, read_only)
        self.searcher = SearchPipeline(backend.legs, embedder, cfg.search)
        # the lines serve the ranking (search.line_weight) and the context excerpts (search.context_line_model)
        wanted = cfg.search.line_weight > 0 or cfg.search.context_line_model
        self.line_fill = LineVectorFill(self._line_rows(), self.cache, embedder.model_id, read_only) \
            if self.capabilities.line_vectors and wanted else None

    def _open_backend(self) -> Backend:
        """The embedded backend: SQLite + FTS5 and the FAISS snapshot in the data directory, checked
        against this index's identity. A subclass opens another backend here (the attributes set
        before this call, ``lock`` and ``backlog`` among them, are there to use)."""
        cfg, embedder, read_only = self.cfg, self.embedder, self.read_only
        if not read_only:
            self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        elif not (self.data_dir / DB_NAME).exists():
            raise StoreError(f"no index in {self.data_dir} (run `memoryd index` first)")
        self.sqlite = self._open_store()
        self.store = self.sqlite
        # The machine-wide layer (never for the toy "hash" provider: it computes faster than it looks up)
        machine = None if read_only or cfg.embedding.provider == "hash" else \
            open_machine_cache(cfg.embedding_cache_dir, cfg.embedding.machine_cache_entries)
        self.local_cache = EmbeddingCache(self.sqlite.conn, embedder.dimension, cfg.embedding.cache_entries, machine)
        if machine is not None and self.sqlite.meta("machine_cache") != str(machine.path):  # once per data dir
            log.info("machine_cache.seeded", path=str(machine.path), vectors=machine.seed(self.sqlite.conn))
            self.sqlite.set_meta({"machine_cache": str(machine.path)})
        self.local_cache.hits = int(self.sqlite.meta("cache_hits") or 0)
        self.local_cache.misses = int(self.sqlite.meta("cache_misses") or 0)
        self._check_identity()
        self.faiss = self._load_vectors()
        self.readers = ReaderPool(self.sqlite.reader)
        return Backend(self.sqlite, self.local_cache, self.faiss, EmbeddedLegs(self.readers, self.faiss, self.lock),
                       EMBEDDED)

    def _line_rows(self) -> LineRows:
        """Where this backend keeps the chunks' line vectors (asked only when it declares ``line_vectors``)."""
        return SqliteLineRows(self.sqlite)

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

    # -- identity and vectors -------------------------------------------------

    def identity(self) -> dict[str, str]:
        c = self.cfg.chunking
        return {"model_id": self.embedder.model_id, "dimension": str(self.embedder.dimension),
                "chunking": f"{c.max_tokens}/{c.overlap_tokens}/v{CHUNKER_VERSION}", "embed_text": EMBED_TEXT_VERSION,
                "keyword": keyword.ANALYZER_VERSION, "redact": f"{self.cfg.write.redact_index}/v{REDACT_VERSION}"}

    def _check_identity(self) -> None:
        want = self.identity()
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
        searchable at once and ``progress`` counts committed files.

        A file that cannot be indexed is skipped, never the batch: it is counted and named in the
        returned stats and in ``status().skipped`` (with the reason) until it is indexed or removed.
        """
        if not self.capabilities.keyword_first:
            defer_at = None  # a backend without a vector backlog commits chunks with their vectors only
        stats = IndexStats()
        t0 = time.perf_counter()
        group: list[PreparedFile] = []
        pending = 0
        deferring = False
        touched: list[tuple[int, str]] = []
        for n, (root, rel) in enumerate(items, 1):
            prepared = self._prepare(root, rel, stats, touched)
            if prepared is not None:
                group.append(prepared)
                pending += len(prepared.chunks)
            if pending >= EMBED_GROUP or n == len(items) or (
                    defer_at is not None and (deferring or pending >= defer_at)):
                deferring = self._commit_group(group, stats, defer_at, deferring)
                group, pending = [], 0
            if progress:
                progress(n, len(items), stats)
        if touched and not deferring and self.backlog:
            self.vector_fill.fill_files(touched, stats)
        if stats.embedded and not self.read_only:
            self.vector_fill.bound_cache(stats.embedded)
        stats.seconds = time.perf_counter() - t0
        return stats

    def _prepare(self, root: Path, rel: str, stats: IndexStats, touched: list[tuple[int, str]]) -> PreparedFile | None:
        """Read and prepare one file; None when there is nothing to commit for it.

        A file that cannot be indexed (:class:`FileSkipped`: unreadable, binary, or a stage that
        failed on its text, see :func:`~memoryd.indexer.ingestion.ingest.file_fault`) is skipped and listed
        in ``status``; the batch goes on. Storage errors and the like propagate."""
        key = f"{root}/{rel}"
        if not storable(rel):
            shown = printable_name(key)
            self._skip(shown, root, printable_name(rel), FileSkipped(shown, "bad-file-name", "not valid UTF-8"), stats)
            return None
        root_id = self.store.root_id(root)
        row = self.store.file(root_id, rel)
        try:
            with stage(rel, "read"):
                content = read_memory_file(root / rel, root, self.cfg.watch.max_file_bytes,
                                           follow_symlinks=self.cfg.watch.follow_symlinks)
            if row is None or row.sha256 != content.sha256:
                prepared = prepare_file(root, rel, content, self.embedder, self.cfg.chunking,
                                        self.cfg.write.redact_index)
        except FileSkipped as exc:
            if exc.reason == VANISHED:
                stats.files_skipped += 1
                self.skipped.pop(key, None)
                self._remove(root_id, rel, stats)
            else:
                self._skip(key, root, rel, exc, stats)
            return None
        if row is not None and row.sha256 == content.sha256:
            self.skipped.pop(key, None)
            if (row.size, row.mtime_ns) != (content.size, content.mtime_ns):
                self.store.touch_file(row.id, content.size, content.mtime_ns)
            stats.files_unchanged += 1
            touched.append((root_id, rel))
            return None
        for w in prepared.warnings:
            log.warning("file.warning", root=str(root), path=rel, warning=w)
        return prepared

    def _skip(self, key: str, root: Path, rel: str, exc: FileSkipped, stats: IndexStats) -> None:
        """List a skipped file (``status``), logging it once: again only when its reason changes.

        A file already indexed keeps its last good chunks (as a file grown past the size limit does)."""
        reason = skip_reason(exc)
        first = self.skipped.get(key) != reason
        stats.files_skipped += 1
        stats.skipped[key] = self.skipped[key] = reason
        cause = exc.__cause__ if exc.reason == PREPARE_FAILED else None  # a traceback for what a stage raised
        if first:
            log.warning("file.skipped", root=str(root), path=rel, reason=exc.reason, detail=exc.detail,
                        exc_info=cause)
        else:
            log.debug("file.skipped", root=str(root), path=rel, reason=exc.reason, detail=exc.detail)

    def _commit_group(self, group: list[PreparedFile], stats: IndexStats, defer_at: int | None,
                      deferring: bool) -> bool:
        """Commit a group of prepared files; returns whether this call now defers vectors."""
        if not group:
            return deferring
        group, emb, deferring = self._group_vectors(group, stats, defer_at, deferring)
        stats.embedded += emb.embedded
        stats.cache_hits += emb.cache_hits
        for f in group:
            root_id = self.store.root_id(f.root)
            keys = {c.embed_key for c in f.chunks}
            new = {k: emb.vectors[k] for k in keys if k in emb.vectors}

            def cache_write(conn: Any, new: dict[bytes, Any] = new) -> None:
                self.cache.put_many(conn, new)

            with self.lock:
                change = self.store.replace_file(
                    root_id, f.rel, f.content.size, f.content.mtime_ns, f.content.sha256, f.front_matter,
                    f.chunks, in_transaction=cache_write,
                )
                self.vectors.remove(change.removed)
                ready = [(i, k) for i, k in change.added if k in emb.vectors]
                if ready and not self.capabilities.vectors_in_rows:  # else the rows took them from the cache
                    self.vectors.add([i for i, _ in ready], np.stack([emb.vectors[k] for _, k in ready]))
            self.skipped.pop(f"{f.root}/{f.rel}", None)
            self.backlog.discard(change.removed)
            self.backlog.add([i for i, k in change.added if k not in emb.vectors], f.content.mtime_ns)
            if self.line_fill is not None:
                self.line_fill.added([i for i, _ in change.added])  # their lines: when the index is idle
            if not deferring and self.backlog:  # kept chunks still waiting: their vectors are known
                self.vector_fill.fill_files([(root_id, f.rel)], stats)
            stats.files_indexed += 1
            stats.chunks_added += len(change.added)
            stats.chunks_removed += len(change.removed)
            stats.chunks_kept += change.kept
            log.debug("file.indexed", root=str(f.root), path=f.rel, chunks=len(f.chunks), added=len(change.added))
        return deferring

    def _group_vectors(self, group: list[PreparedFile], stats: IndexStats, defer_at: int | None,
                       deferring: bool) -> tuple[list[PreparedFile], EmbedResult, bool]:
        """The group's vectors and the files that have them. When the model fails on the group but
        still embeds a plain probe text, the fault is a text's: the model is asked file by file and
        the files it fails on are skipped. Otherwise the error is the model's and propagates."""
        try:
            return group, *self.vector_fill.group_vectors(group, defer_at, deferring)
        except Exception as exc:
            if not file_fault(exc) or not self._model_answers():
                raise
        done: list[tuple[PreparedFile, EmbedResult]] = []
        for f in group:
            try:
                with stage(f.rel, "embedding"):
                    emb, deferring = self.vector_fill.group_vectors([f], defer_at, deferring)
            except FileSkipped as skipped:
                self._skip(f"{f.root}/{f.rel}", f.root, f.rel, skipped, stats)
                continue
            done.append((f, emb))
        vectors = {k: v for _, emb in done for k, v in emb.vectors.items()}
        return ([f for f, _ in done], EmbedResult(vectors, embedded=sum(e.embedded for _, e in done),
                                                  cache_hits=sum(e.cache_hits for _, e in done)), deferring)

    def _model_answers(self) -> bool:
        """Whether the passage model embeds a plain text (after it failed on a group's texts)."""
        try:
            self.vector_fill.passages.embed_passages(["memoryd model check"])
        except Exception as exc:
            log.debug("model.check_failed", error=describe_error(exc))
            return False
        return True

    # -- the vector backlog (keyword-first indexing) ----------------------------

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
        """Whether chunks may still lack their line vectors (a hint: cleared by a step that finds none)."""
        return self.line_fill is not None and self.line_fill.pending and not self.read_only

    def fill_line_vectors(self, max_lines: int = STEP_LINES, should_yield: Callable[[], bool] | None = None
                          ) -> FillResult:
        """Give the next chunks their line vectors (:mod:`memoryd.indexer.fill.line_vectors`), embedding at most
        ``max_lines`` new lines with the backlog's embedder; ``should_yield`` as :meth:`fill_vectors`'s."""
        if self.line_fill is None or self.read_only:
            return FillResult()
        done = self.line_fill.fill(self.vector_fill.backlog_passages or self.vector_fill.passages,
                                   self.vector_fill.passages, max_lines, should_yield=should_yield)
        return done

    def remove_file(self, root: Path, rel: str) -> int:
        """Drop a file from the index; returns the number of chunks removed."""
        stats = IndexStats()
        self._remove(self.store.root_id(root), rel, stats)
        self.skipped.pop(f"{root}/{rel}", None)
        return stats.chunks_removed

    def _remove(self, root_id: int, rel: str, stats: IndexStats) -> None:
        if not storable(rel):
            self.skipped.pop(printable_name(f"{self.store.roots().get(root_id)}/{rel}"), None)
            return
        with self.lock:
            removed = self.store.delete_file(root_id, rel)
            self.vectors.remove(removed)
        self.backlog.discard(removed)
        stats.files_removed += 1 if removed else 0
        stats.chunks_removed += len(removed)

    def move_file(self, root: Path, rel: str, dest_root: Path, dest_rel: str) -> bool:
        """Rename a file in the index: no chunk is re-embedded. False if ``rel`` was not indexed."""
        if not (storable(rel) and storable(dest_rel)):
            return False
        with self.lock:
            return self.store.move_file(self.store.root_id(root), rel, self.store.root_id(dest_root), dest_rel)

    # -- the rest -------------------------------------------------------------

    def query(self, query: Query) -> SearchResult:
        """Run ``query`` (:mod:`memoryd.indexer.search.pipeline`). The embedded index is one site:
        ``sites`` does not narrow it."""
        try:
            return self.searcher.search(query)
        except ProviderUnavailable as exc:  # the embedding server is down: the keyword leg still answers
            if query.mode == "keyword":
                raise
            log.warning("search.keyword_only", reason=str(exc))
            result = self.searcher.search(dataclasses.replace(query, mode="keyword", query_vector=None))
            return dataclasses.replace(result, degraded=f"keyword results only: {exc}")

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

    def evict_cache(self) -> int:
        """Trim the embedding cache to ``embedding.cache_entries`` (live vectors always stay).

        Call it from the writing thread. It takes no search lock: searches never read the cache.
        """
        return self.vector_fill.evict_cache()

    def open_line_store(self) -> LineStore | None:
        """The embedding cache for the context excerpts' line vectors
        (:class:`~memoryd.indexer.storage.base.LineStore`), on a connection of its own: it serves requests'
        threads, never the writer's. None when read-only (line vectors then live in memory only) or when
        the backend keeps none (``Capabilities.line_cache``). The caller closes it."""
        if self.read_only or not self.capabilities.line_cache:
            return None
        return SqliteLineStore(self.sqlite.path, self.embedder.dimension, LINE_WAIT_MS)

    def set_passage_embedder(self, embedder: Embedder) -> None:
        """Embed passages (indexing) with ``embedder`` from now on; queries keep the constructor's.

        It must be the same model (the daemon passes a low-priority wrapper of it); raises
        ModelError otherwise, since vectors of two models must never mix.
        """
        if (embedder.model_id, embedder.dimension) != (self.embedder.model_id, self.embedder.dimension):
            raise ModelError(f"passage embedder {embedder.model_id} ({embedder.dimension}-d) is not the "
                             f"index's model {self.embedder.model_id} ({self.embedder.dimension}-d)")
        self.vector_fill.passages = embedder

    # -- background rebuilds ----------------------------------------------------

    def set_background_rebuilds(self, on: bool = True) -> None:
        """Switch to (or from) background rebuilds, e.g. when a daemon takes over an open index."""
        with self.lock:
            self._background = on
            self.faiss.auto_rebuild = not on

    def claim_root(self, root: Path) -> bool:
        """Whether this process may change ``root``'s rows (:func:`memoryd.indexer.ingestion.reconcile.plan` asks
        before removing a root no longer configured). Always: the embedded index is its rows' only writer;
        a shared database answers with the root's lock (``PgMemoryIndex.claim_root``)."""
        return True

    def take_reconcile_wanted(self) -> bool:
        """True once when the storage dropped this site's rows under it (a shared database re-indexed)."""
        return False

    def rebuild_wanted(self) -> bool:
        """True when the vector structure is due a rebuild (switch or compaction) and none is planned."""
        return self._background and self.faiss.rebuilding is None and self.faiss.wanted() is not None

    def start_rebuild(self) -> ann.Rebuild | None:
        """Plan the due rebuild (under the lock, ~1 ms): its source is a read snapshot of chunks x cache.

        None when nothing is due or one is already planned. Run ``build()`` on the result
        anywhere (no lock), then :meth:`finish_rebuild`; or :meth:`cancel_rebuild` it.
        """
        with self.lock:
            if not self.rebuild_wanted():
                return None
            source, close = vector_sync.rebuild_source(self.sqlite, self.embedder.dimension)
            return self.faiss.plan_rebuild(source, close)

    def finish_rebuild(self, job: ann.Rebuild) -> bool:
        """Swap a built rebuild in, with every write made meanwhile (under the lock, milliseconds)."""
        with self.lock:
            return self.faiss.adopt(job)

    def cancel_rebuild(self, job: ann.Rebuild) -> None:
        with self.lock:
            self.faiss.cancel(job)

    def status(self) -> IndexStatus:
        """The index's figures. Safe from any thread: the counts are read through the reader pool
        (never the writer's connection, which belongs to the writing thread)."""
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
            skipped=skipped_files(self.skipped),
            vectors=BacklogProgress.from_progress(self.backlog.progress()),
            storage=EmbeddedStorage(str(self.data_dir)),
            line_vectors_pending=self._lines_pending_count(),
        )

    def _lines_pending_count(self) -> int | None:
        """Chunks without line vectors (None: not filled here — read-only, or turned off); 0 at once when
        the fill found none left, else counted on a reader at most every :data:`LINES_COUNT_EVERY_S`."""
        if self.line_fill is None or self.read_only:
            return None
        if not self.line_fill.pending:
            return 0
        return self.line_fill.recount(lambda: self._count_lines_pending(), LINES_COUNT_EVERY_S)

    def _count_lines_pending(self) -> int:
        with self.readers.connection() as conn:
            return count_without_lines(conn)

    def close(self) -> None:
        with contextlib.suppress(StoreError):
            self.save()
        self.readers.close()
        self.store.close()
        if self.local_cache.machine is not None:
            self.local_cache.machine.close()

    def maintain(self) -> dict[str, Any]:
        """The periodic upkeep, on the writing thread: trim the embedding cache, checkpoint the WAL,
        let SQLite refresh its statistics. Returns what it did (for the log)."""
        evicted = self.evict_cache()
        # A background rebuild reads a snapshot in one long read transaction: TRUNCATE would
        # wait for it (up to the busy timeout, on the worker); PASSIVE copies what it can.
        mode = "PASSIVE" if self.faiss.rebuilding else "TRUNCATE"
        self.sqlite.conn.execute(f"PRAGMA wal_checkpoint({mode})")
        self.sqlite.conn.execute("PRAGMA optimize")
        return {"cache_evicted": evicted, "checkpoint": mode.lower()}


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
