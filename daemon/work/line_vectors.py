"""Line vectors for ``context`` excerpts: memoised in memory, and kept in the index's embedding cache.

``context`` ranks the lines of the spans it must trim by their cosine with the
query (:mod:`memoryd.indexer.search.context`); each line is one short passage
for the model. A line's vector depends only on its text and the model — it is
exactly the vector a chunk of that text gets — so lines are looked up, like
chunks, in the embedding cache (sha256 of model id + text, table
``embed_cache``) and the new ones are stored there: a line is embedded once,
across restarts, not once per process. A bounded in-memory LRU in front spares
the database for the lines of popular memories. Handlers run on several
connection threads, hence the locks (the model call runs outside them).
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from memoryd.indexer.cache import EmbeddingCache, cache_key
from memoryd.indexer.store import connect

log = structlog.get_logger(__name__)

MEMO_LINES = 4096
"""Vectors kept in memory: 4096 x 384 float32 is 6 MB, the lines of a few hundred recent passages."""
WRITE_WAIT_MS = 50
"""How long storing new line vectors waits for the indexer's write transaction: a line not stored now is
embedded again later, which is cheaper than holding a ``context`` answer behind a long indexing write."""


class LineCache:
    """Line vectors in the embedding cache of an index database, through a connection of its own.

    The worker thread writes the same table through the store's connection, inside its own
    transactions; this connection is separate (SQLite's WAL lets them take turns) and serialised
    by a lock. Lines stored here are not live chunks, so the cache's LRU bound
    (``embedding.cache_entries``, enforced by the indexer) may evict them like any unused vector.
    """

    def __init__(self, db_path: Path, model_id: str, dimension: int) -> None:
        self._conn = connect(db_path)
        self._conn.execute(f"PRAGMA busy_timeout={WRITE_WAIT_MS}")
        self._cache = EmbeddingCache(self._conn, dimension, capacity=0)  # the bound is the indexer's job
        self._model_id = model_id
        self._lock = threading.Lock()

    def get_many(self, lines: Sequence[str]) -> dict[str, Any]:
        """The stored vectors of those ``lines`` the cache holds."""
        keys = {cache_key(self._model_id, line): line for line in lines}
        with self._lock:
            found = self._cache.get_many(list(keys), count=False)  # hit/miss counters are the indexer's
        return {keys[k]: v for k, v in found.items()}

    def put_many(self, vectors: dict[str, Any]) -> None:
        """Store new line vectors; skipped (logged) when the index is busy writing or read-only."""
        rows = {cache_key(self._model_id, line): v for line, v in vectors.items()}
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                self._cache.put_many(self._conn, rows)
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                log.info("context.line_vectors_unsaved", lines=len(rows), reason=str(exc))

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class LineVectors:
    """``embed_passages`` over lines, through an in-memory LRU and an optional :class:`LineCache`;
    callable like it."""

    def __init__(self, embed_passages: Callable[[list[str]], Any], size: int = MEMO_LINES,
                 store: LineCache | None = None) -> None:
        if size < 0:
            raise ValueError(f"line vector memo size must be >= 0, got {size}")
        self._embed = embed_passages
        self._size = size
        self._store = store
        self._memo: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, lines: Sequence[str]) -> Any:
        """Shape (len(lines), dimension), row i the vector of ``lines[i]``."""
        with self._lock:
            known = {line: self._memo[line] for line in lines if line in self._memo}
            for line in known:
                self._memo.move_to_end(line)
        missing = [line for line in dict.fromkeys(lines) if line not in known]
        stored = self._store.get_many(missing) if missing and self._store is not None else {}
        fresh: dict[str, Any] = {}
        if len(stored) < len(missing):
            todo = [line for line in missing if line not in stored]
            fresh = dict(zip(todo, np.asarray(self._embed(todo), dtype=np.float32), strict=True))
            if self._store is not None:
                self._store.put_many(fresh)
        known |= stored | fresh
        self._remember(stored | fresh)
        return np.stack([known[line] for line in lines])

    def _remember(self, vectors: dict[str, Any]) -> None:
        if not vectors:
            return
        with self._lock:
            self._memo.update(vectors)
            while len(self._memo) > self._size:
                self._memo.popitem(last=False)


def line_cache_of(index: object) -> LineCache | None:
    """A :class:`LineCache` on ``index``'s database: None for an index without an embedding cache table
    of its own (PostgreSQL) or opened read-only (line vectors then live in memory only)."""
    from memoryd.indexer.engine import MemoryIndex
    from memoryd.indexer.store import Store

    if not isinstance(index, MemoryIndex) or not isinstance(index.store, Store) or index.read_only:
        return None  # PostgreSQL: a MemoryIndex over a PgStore
    return LineCache(index.store.path, index.embedder.model_id, index.embedder.dimension)
