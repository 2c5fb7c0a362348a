"""Indexing files into a backend: read → prepare → vectors → commit, one file's fault never the batch's.

:class:`FileIndexer` is the write path of :meth:`memoryd.indexer.engine.MemoryIndex.index_files`
and ``remove_file``, written against the storage interface only (:class:`~memoryd.indexer.storage.base.Backend`):
files are prepared (:mod:`.ingest`), gathered in groups so that embedding runs in full batches, given
their vectors (or queued for them, keyword first) by :class:`~memoryd.indexer.fill.vectorfill.VectorFill`,
and committed one file per transaction under the backend's lock (rows, cache entries and vectors together).

A file that cannot be indexed is skipped, never the batch: it is counted and named in the stats and in
the index's ``skipped`` (with the reason) until it is indexed or removed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from memoryd.indexer.config import Config
from memoryd.indexer.errors import FileSkipped
from memoryd.indexer.fill.line_vectors import LineVectorFill
from memoryd.indexer.fill.vectorfill import EMBED_GROUP, VectorFill
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
from memoryd.indexer.storage.base import Backend
from memoryd.indexer.types import Embedder

log = structlog.get_logger(__name__)

__all__ = ["FileIndexer"]


class FileIndexer:
    """Prepares and commits files for one index; ``skipped`` is the index's own map (key → reason)."""

    def __init__(self, cfg: Config, embedder: Embedder, backend: Backend, vector_fill: VectorFill,
                 line_fill: LineVectorFill | None, skipped: dict[str, str]) -> None:
        self.cfg, self.embedder, self.vector_fill, self.line_fill = cfg, embedder, vector_fill, line_fill
        self.store, self.cache, self.vectors = backend.store, backend.cache, backend.vectors
        self.lock, self.backlog, self.capabilities = backend.lock, backend.backlog, backend.capabilities
        self.skipped = skipped

    def index(self, items: Sequence[tuple[Path, str]], progress: Progress | None, defer_at: int | None,
              read_only: bool) -> IndexStats:
        """:meth:`memoryd.indexer.engine.MemoryIndex.index_files`, for items the backend lets this process write."""
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
        if stats.embedded and not read_only:
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
                self.remove(root_id, rel, stats)
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

    def remove(self, root_id: int, rel: str, stats: IndexStats) -> None:
        """Drop one file's rows and vectors (and its chunks from the backlog)."""
        if not storable(rel):
            self.skipped.pop(printable_name(f"{self.store.roots().get(root_id)}/{rel}"), None)
            return
        with self.lock:
            removed = self.store.delete_file(root_id, rel)
            self.vectors.remove(removed)
        self.backlog.discard(removed)
        stats.files_removed += 1 if removed else 0
        stats.chunks_removed += len(removed)
