"""The chunks' line vectors on PostgreSQL: :class:`PgLineRows`, the :class:`~memoryd.indexer.fill.line_vectors.LineRows`
of table ``memoryd_line_vectors`` (schema 6).

Each site fills the rows of its own chunks (its files under its roots): another site's daemon
fills theirs, and every search reads whichever rows exist. The rows are written through the
store's transactions, so they take the same road as every other write: the identity
generation is checked inside the transaction (a daemon of older settings writes nothing
after a re-index), and an unreachable database raises
:class:`~memoryd.indexer.storage.base.StorageUnavailableError` (the daemon's line steps log
it and try again later).
"""

from __future__ import annotations

from collections.abc import Sequence

from memoryd.indexer.storage.line_codec import LineRow, PendingChunk
from memoryd.indexer.storage.postgres.store import PgStore

_MINE = ("FROM memoryd_chunks c JOIN memoryd_files f ON f.id = c.file_id JOIN memoryd_roots r ON r.id = f.root_id"
         " WHERE r.site = %s AND NOT EXISTS (SELECT 1 FROM memoryd_line_vectors l WHERE l.chunk_id = c.id)")


class PgLineRows:
    """This site's line-vector rows in the shared database."""

    def __init__(self, store: PgStore) -> None:
        self._store = store

    def next_chunks(self, limit: int, floor: int) -> list[PendingChunk]:
        """Up to ``limit`` of this site's oldest chunks without line vectors (ids from ``floor`` up)."""
        with self._store.connection() as c:
            rows = c.execute(f"SELECT c.id, c.sha256, c.text {_MINE} AND c.id >= %s ORDER BY c.id LIMIT %s",
                             (self._store.site, floor, int(limit))).fetchall()
        return [(int(i), str(sha), str(text)) for i, sha, text in rows]

    def write(self, rows: Sequence[LineRow]) -> None:
        """One transaction, fenced by the identity generation like every write; a chunk deleted or replaced
        since it was read (its id gone, or holding another text) gets no row."""
        with self._store.transaction() as t:
            self._store.check_generation(t)
            with t.cursor() as cur:
                cur.executemany(
                    "INSERT INTO memoryd_line_vectors (chunk_id, vectors) SELECT id, %s FROM memoryd_chunks"
                    " WHERE id = %s AND sha256 = %s ON CONFLICT (chunk_id) DO UPDATE SET vectors = EXCLUDED.vectors",
                    [(blob, chunk_id, sha) for chunk_id, sha, blob in rows])

    def count(self) -> int:
        """This site's chunks without a row: one anti-join over this site's chunks (status and progress lines)."""
        with self._store.connection() as c:
            row = c.execute(f"SELECT count(*) {_MINE}", (self._store.site,)).fetchone()
        return int(row[0]) if row else 0
