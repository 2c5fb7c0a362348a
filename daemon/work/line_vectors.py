"""Line vectors for ``context`` excerpts: memoised in memory, and kept in the index's embedding cache.

``context`` ranks the lines of the spans it must trim by their cosine with the
query (:mod:`memoryd.indexer.search.context`); each line is one short passage
for the model. A line's vector depends only on its text and the model — it is
exactly the vector a chunk of that text gets — so the lines the index embedded
when it was idle (:mod:`memoryd.indexer.fill.line_vectors`) are read first, by the
block's chunks (:meth:`LineVectors.preload`); the rest are looked up, like
chunks, in the embedding cache (sha256 of model id + text) and the new ones are
stored there: a line is embedded once, across restarts, not once per process,
on either backend (the index opens the cache for it:
:meth:`~memoryd.indexer.engine.MemoryIndex.open_line_store`, a
:class:`~memoryd.indexer.storage.base.LineStore`; on PostgreSQL the shared table, so a
line one site embedded is not embedded again by another). A bounded in-memory LRU
in front spares the database for the lines of popular memories. Handlers run on
several connection threads, hence the lock (the model call runs outside it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import structlog

from memoryd.indexer.storage.embedded.cache import cache_key

if TYPE_CHECKING:
    from memoryd.daemon.work.ports import WritableIndex
    from memoryd.indexer.storage.base import LineStore

log = structlog.get_logger(__name__)

MEMO_LINES = 4096
"""Vectors kept in memory: 4096 x 384 float32 is 6 MB, the lines of a few hundred recent passages."""


class LineCache:
    """Line vectors by line text in an index's embedding cache (keys bind each to ``model_id``).

    Best effort, as its :class:`~memoryd.indexer.storage.base.LineStore`: a line that cannot be stored now
    (the indexer is busy writing, the database is away) is logged and embedded again by a later process."""

    def __init__(self, store: LineStore, model_id: str) -> None:
        self._store = store
        self._model_id = model_id

    def get_many(self, lines: Sequence[str]) -> dict[str, Any]:
        """The stored vectors of those ``lines`` the cache holds."""
        keys = {cache_key(self._model_id, line): line for line in lines}
        return {keys[k]: v for k, v in self._store.get_many(list(keys)).items()}

    def put_many(self, vectors: dict[str, Any]) -> None:
        """Store new line vectors; skipped (logged) when they cannot be stored now."""
        rows = {cache_key(self._model_id, line): v for line, v in vectors.items()}
        why = self._store.put_many(rows)
        if why is not None:
            log.info("context.line_vectors_unsaved", lines=len(rows), reason=why)

    def lines_of_chunks(self, ids: Sequence[int]) -> dict[str, Any]:
        """The line vectors the index filled in for these chunks, by line text."""
        return self._store.lines_of_chunks(ids)

    def close(self) -> None:
        self._store.close()


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

    def preload(self, chunk_ids: Sequence[int]) -> None:
        """Put the line vectors the index filled in for these chunks (a block's hits) in the memo, so a
        block embeds only lines the index has not (one read; nothing without a :class:`LineCache`)."""
        if self._store is not None and chunk_ids:
            self._remember(self._store.lines_of_chunks(chunk_ids))

    def _remember(self, vectors: dict[str, Any]) -> None:
        if not vectors:
            return
        with self._lock:
            self._memo.update(vectors)
            while len(self._memo) > self._size:
                self._memo.popitem(last=False)


def line_cache_of(index: WritableIndex) -> LineCache | None:
    """A :class:`LineCache` on ``index``'s embedding cache; None for an index opened read-only or whose
    backend keeps none (line vectors then live in memory only)."""
    store = index.open_line_store()
    return None if store is None else LineCache(store, index.embedder.model_id)
