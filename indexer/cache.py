"""The embedding cache: sha256(model id + embedded text) → float32 vector.

It lives in the index database (table ``embed_cache``) so that one transaction
can cover a file's chunks and their vectors, and it survives restarts. It is
LRU-bounded: when it holds more than ``capacity`` entries, the least recently
used 10 % are evicted — but never an entry that a live chunk still points to,
because the vector index must always be rebuildable from SQLite + this cache
without embedding anything again. (With more live chunks than ``capacity`` the
cache therefore holds exactly the live vectors.)
"""

from __future__ import annotations

import hashlib
import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from memoryd.indexer.types import FloatArray


def cache_key(model_id: str, text: str) -> bytes:
    """The cache key of an embedded text: binds the vector to its model."""
    return hashlib.sha256(f"{model_id}\x00{text}".encode()).digest()


class EmbeddingCache:
    """Get/put vectors by key, with hit/miss counters (persisted by the owner)."""

    def __init__(self, conn: sqlite3.Connection, dimension: int, capacity: int) -> None:
        self._conn = conn
        self.dimension = dimension
        self.capacity = capacity
        self.hits = 0
        self.misses = 0

    def get_many(self, keys: Sequence[bytes], count: bool = True) -> dict[bytes, FloatArray]:
        """Vectors for the keys present; marks them used. ``count`` updates hit/miss counters."""
        found: dict[bytes, FloatArray] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):
            part = unique[start : start + 500]
            marks = ",".join("?" * len(part))
            for key, blob in self._conn.execute(
                f"SELECT key, vector FROM embed_cache WHERE key IN ({marks})", part
            ):
                vec = np.frombuffer(blob, dtype=np.float32)
                if vec.shape[0] == self.dimension:
                    found[bytes(key)] = vec
        if count:
            self.hits += sum(1 for k in unique if k in found)
            self.misses += sum(1 for k in unique if k not in found)
        return found

    def put_many(self, conn: sqlite3.Connection, vectors: Mapping[bytes, FloatArray]) -> None:
        """Store vectors (inside the caller's transaction)."""
        now = time.time()
        conn.executemany(
            "INSERT OR REPLACE INTO embed_cache(key, vector, last_used) VALUES (?, ?, ?)",
            [(k, np.ascontiguousarray(v, dtype=np.float32).tobytes(), now) for k, v in vectors.items()],
        )

    def entries(self) -> int:
        return int(self._conn.execute("SELECT count(*) FROM embed_cache").fetchone()[0])

    def evict(self, conn: sqlite3.Connection) -> int:
        """Drop the least recently used 10 % when over capacity; live entries are kept.

        Returns the number of entries evicted.
        """
        total = int(conn.execute("SELECT count(*) FROM embed_cache").fetchone()[0])
        if total <= self.capacity:
            return 0
        n = max(total - self.capacity, self.capacity // 10)
        cur = conn.execute(
            "DELETE FROM embed_cache WHERE key IN ("
            " SELECT e.key FROM embed_cache e"
            " WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.embed_key = e.key)"
            " ORDER BY e.last_used LIMIT ?)",
            (n,),
        )
        return int(cur.rowcount)
