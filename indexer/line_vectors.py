"""Each chunk's line vectors, embedded when the index has time, read by the ranking.

A chunk's vector blurs its 10–20 lines into one; a question whose answer is one line of it
(a multi-hop question's second fact, typically) is better told by that line's own vector. So
every non-blank line of a chunk is embedded as a passage (as the context excerpts embed lines:
the same text, so the same embedding-cache keys) and the chunk keeps them as one row of
``line_vectors`` — float16, one per line, in the chunk's line order. The search reads the rows of
its first candidates and takes each chunk's best line cosine (``-1`` for a chunk without a non-blank line)
(:mod:`memoryd.indexer.search.lineblend`).

The rows are derived data with the chunk's lifetime: the foreign key drops a chunk's row with
the chunk (an edit, a removal, an identity change), and the chunks without a row *are* the
backlog — nothing to keep in memory or recover after a crash. :class:`LineVectorFill` works
through it a bounded step at a time, after the chunk vectors (the daemon's idle work): the line
texts are looked up in the embedding cache first (lines recur across overlapping chunks, and a
re-chunked file mostly keeps its lines), the rest are embedded in slices, and each slice's
chunks are written in one transaction, only if the chunk still holds the text it was read
with (the id of a deleted chunk may be reused).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from memoryd.indexer.backend import CacheStore
from memoryd.indexer.cache import EmbeddingCache, cache_key
from memoryd.indexer.store import Store, select_in
from memoryd.indexer.types import Embedder

STEP_LINES = 256  # lines a fill step embeds at most (short passages: about a second on two cores)


def chunk_lines(text: str) -> list[str]:
    """The lines of a chunk that get a vector: the non-blank ones, as the context excerpts score them."""
    return [line for line in text.split("\n") if line.strip()]


def encode(vectors: Any) -> bytes:
    """A chunk's line vectors as stored: float16 rows (half the bytes; cosines move by < 1e-3)."""
    return np.ascontiguousarray(vectors, dtype=np.float16).tobytes()


def best_cosines(rows: Sequence[tuple[int, bytes]], qvec: Any) -> dict[int, float]:
    """Each chunk's best line cosine with the unit ``qvec`` (rows: chunk id, stored blob)."""
    q = np.asarray(qvec, dtype=np.float32).ravel()
    out: dict[int, float] = {}
    for chunk_id, blob in rows:
        m = np.frombuffer(blob, dtype=np.float16)
        if m.size % q.size:
            continue  # another model's width: as if not filled
        out[int(chunk_id)] = -1.0 if m.size == 0 else float((m.reshape(-1, q.size).astype(np.float32) @ q).max())
    return out


PendingChunk = tuple[int, str, str]  # a chunk without line vectors: id, sha256 of its text, its text
LineRow = tuple[int, str, bytes]  # what a fill writes: chunk id, the sha256 it was read with, encoded vectors


class LineRows(Protocol):
    """Where a backend keeps the line vectors: what :class:`LineVectorFill` asks of it."""

    def next_chunks(self, limit: int) -> list[PendingChunk]:
        """Up to ``limit`` of the oldest chunks (of this index's site) without line vectors."""
        ...

    def write(self, rows: Sequence[LineRow], fresh: Mapping[bytes, Any]) -> None:
        """In one transaction: the rows of chunks that still hold the text hashed (a chunk replaced meanwhile
        gets none), and ``fresh`` line vectors into the embedding cache by key."""
        ...

    def count(self) -> int:
        """Chunks (of this index's site) without line vectors."""
        ...


def read_best_cosines(conn: Any, qvec: Any, ids: Sequence[int]) -> dict[int, float]:
    """:func:`best_cosines` of the chunks among ``ids`` that have their line vectors (embedded index). An
    index written by an older memoryd and opened read-only (``search --offline``) has no table yet: none."""
    try:
        rows = list(select_in(conn, "SELECT chunk_id, vectors FROM line_vectors WHERE chunk_id IN ({})", ids))
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return {}
        raise
    return best_cosines(rows, qvec)


def count_without_lines(conn: Any) -> int:
    """Chunks without line vectors, on any connection to the embedded index."""
    return int(conn.execute(
        "SELECT count(*) FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM line_vectors l WHERE l.chunk_id = c.id)"
    ).fetchone()[0])


class SqliteLineRows:
    """:class:`LineRows` of the embedded index: table ``line_vectors``, written on the writer's connection."""

    def __init__(self, store: Store, cache: EmbeddingCache) -> None:
        self._store = store
        self._cache = cache

    def next_chunks(self, limit: int) -> list[PendingChunk]:
        rows = self._store.conn.execute(
            "SELECT c.id, c.sha256, c.text FROM chunks c"
            " WHERE NOT EXISTS (SELECT 1 FROM line_vectors l WHERE l.chunk_id = c.id) ORDER BY c.id LIMIT ?",
            (limit,)).fetchall()
        return [(int(i), str(sha), str(text)) for i, sha, text in rows]

    def write(self, rows: Sequence[LineRow], fresh: Mapping[bytes, Any]) -> None:
        with self._store.transaction() as t:
            if fresh:
                self._cache.put_many(t, fresh)
            t.executemany("INSERT OR REPLACE INTO line_vectors(chunk_id, vectors)"
                          " SELECT id, ? FROM chunks WHERE id = ? AND sha256 = ?",
                          [(blob, chunk_id, sha) for chunk_id, sha, blob in rows])

    def count(self) -> int:
        return count_without_lines(self._store.conn)


@dataclass
class FillResult:
    chunks: int = 0  # chunks that got their line vectors
    embedded: int = 0  # lines computed by the model (the rest came from the cache)


class LineVectorFill:
    """The line-vector backlog: the chunks without line vectors, filled a bounded step at a time.

    Runs on the index's writing thread. ``pending`` is a hint kept in memory (True at start and
    after any indexing), so an idle daemon does not count the backlog on every turn of its loop.
    """

    def __init__(self, rows: LineRows, cache: CacheStore, model_id: str, read_only: bool) -> None:
        self._rows = rows
        self._cache = cache
        self._model_id = model_id
        self.pending = not read_only

    def count(self) -> int:
        """Chunks still without line vectors."""
        return self._rows.count()

    def fill(self, embedder: Embedder, max_lines: int = STEP_LINES, slice_lines: int = 64,
             should_yield: Callable[[], bool] | None = None) -> FillResult:
        """Give the next chunks (oldest first) their line vectors, embedding at most ``max_lines``
        new lines, ``slice_lines`` a model call; ``should_yield`` is asked between calls (True: stop,
        what is written stays). Clears ``pending`` when no chunk is left."""
        todo = self._next_chunks(max_lines)
        if not todo:
            self.pending = False
            return FillResult()
        result = FillResult()
        known: dict[str, Any] = {}
        for part in _slices(todo, slice_lines):
            lines = list(dict.fromkeys(x for _, _, text in part for x in chunk_lines(text)))
            keys = {line: cache_key(self._model_id, line) for line in lines}
            found = self._cache.get_many(list(keys.values()), count=False)
            known |= {line: found[k] for line, k in keys.items() if k in found}
            new = [line for line in lines if line not in known]
            fresh: dict[str, Any] = {}
            if new:
                fresh = dict(zip(new, np.asarray(embedder.embed_passages(new), dtype=np.float32), strict=True))
                known |= fresh
            self._rows.write(_encoded(part, known), {keys[line]: v for line, v in fresh.items()})
            result.chunks += len(part)
            result.embedded += len(fresh)
            if should_yield is not None and should_yield():
                break
        return result

    def _next_chunks(self, max_lines: int) -> list[PendingChunk]:
        """The oldest chunks without line vectors, about ``max_lines`` lines' worth (at least one chunk)."""
        out: list[PendingChunk] = []
        lines = 0
        for chunk in self._rows.next_chunks(max(1, max_lines // 8)):
            n = len(chunk_lines(chunk[2]))
            if out and lines + n > max_lines:
                break
            out.append(chunk)
            lines += n
        return out


def _encoded(part: Sequence[PendingChunk], known: Mapping[str, Any]) -> list[LineRow]:
    return [(chunk_id, sha, encode(np.stack([known[x] for x in lines]) if lines else np.zeros((0,))))
            for chunk_id, sha, text in part for lines in (chunk_lines(text),)]


def _slices(todo: Sequence[PendingChunk], slice_lines: int) -> list[list[PendingChunk]]:
    """``todo`` in runs of whole chunks of about ``slice_lines`` lines each."""
    out: list[list[PendingChunk]] = [[]]
    lines = 0
    for item in todo:
        n = len(chunk_lines(item[2]))
        if out[-1] and lines + n > slice_lines:
            out.append([])
            lines = 0
        out[-1].append(item)
        lines += n
    return out
