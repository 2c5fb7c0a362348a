"""The embedded index's line vectors: table ``line_vectors`` of the SQLite database.

:class:`SqliteLineRows` is the :class:`~memoryd.indexer.fill.line_vectors.LineRows` the fill writes
through (the writer's connection); :func:`read_best_cosines` and :func:`read_line_texts` are what
readers ask (any connection: a search's, the context excerpts').
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from memoryd.indexer.storage.embedded.store import Store, select_in
from memoryd.indexer.storage.line_codec import LineRow, PendingChunk, best_cosines, decode_lines

_PENDING = "FROM chunks c WHERE NOT EXISTS (SELECT 1 FROM line_vectors l WHERE l.chunk_id = c.id)"


def read_best_cosines(conn: sqlite3.Connection, qvec: Any, ids: Sequence[int]) -> dict[int, float]:
    """:func:`~memoryd.indexer.fill.line_vectors.best_cosines` of the chunks among ``ids`` that have their rows.
    An index an older memoryd wrote and opened read-only (``search --offline``) has no table yet: none."""
    try:
        rows = list(select_in(conn, "SELECT chunk_id, vectors FROM line_vectors WHERE chunk_id IN ({})", ids))
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return {}
        raise
    return best_cosines(rows, qvec)


def read_line_texts(conn: sqlite3.Connection, ids: Sequence[int], dimension: int) -> dict[str, Any]:
    """The stored line vectors of the chunks among ``ids``, by line text (context excerpts)."""
    out: dict[str, Any] = {}
    sql = "SELECT c.text, l.vectors FROM line_vectors l JOIN chunks c ON c.id = l.chunk_id WHERE l.chunk_id IN ({})"
    for text, blob in select_in(conn, sql, ids):
        out.update(decode_lines(str(text), bytes(blob), dimension))
    return out


def count_without_lines(conn: sqlite3.Connection) -> int:
    """Chunks without line vectors (one anti-join over the chunks: callers keep its answer a while)."""
    return int(conn.execute(f"SELECT count(*) {_PENDING}").fetchone()[0])


class SqliteLineRows:
    """:class:`~memoryd.indexer.fill.line_vectors.LineRows` on the writer's connection."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def next_chunks(self, limit: int, floor: int) -> list[PendingChunk]:
        """Up to ``limit`` of the oldest chunks without line vectors (ids from ``floor`` up)."""
        rows = self._store.conn.execute(f"SELECT c.id, c.sha256, c.text {_PENDING} AND c.id >= ? ORDER BY c.id LIMIT ?",
                                        (floor, limit)).fetchall()
        return [(int(i), str(sha), str(text)) for i, sha, text in rows]

    def write(self, rows: Sequence[LineRow]) -> None:
        """The rows, in one transaction, for the chunks that still hold the text read."""
        with self._store.transaction() as t:
            t.executemany("INSERT OR REPLACE INTO line_vectors(chunk_id, vectors)"
                          " SELECT id, ? FROM chunks WHERE id = ? AND sha256 = ?",
                          [(blob, chunk_id, sha) for chunk_id, sha, blob in rows])

    def count(self) -> int:
        """Chunks without line vectors."""
        return count_without_lines(self._store.conn)
