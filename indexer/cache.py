"""The embedding cache: sha256(model id + embedded text) → float32 vector.

It lives in the index database (table ``embed_cache``) so that one transaction
can cover a file's chunks and their vectors, and it survives restarts. It is
LRU-bounded: when it holds more than ``capacity`` entries, the least recently
used are evicted until it holds ``LOW_WATER`` (90 %) of ``capacity`` — so a
cache 10 % over loses a fifth of its capacity's worth, not just the overflow,
and the next trim waits for a tenth of the capacity in new vectors. Never an
entry that a live chunk still points to, because the vector index must always be
rebuildable from SQLite + this cache without embedding anything again. (With
more live chunks than that the cache therefore stays above the mark, holding
exactly the live vectors.)

"Used" is stored or read. A read (:meth:`EmbeddingCache.get_many`) writes
nothing — it may run on a request's thread that must not take the write lock —
so the keys it found are remembered in memory and stamped in the cache's next
write transaction (``put_many`` or ``evict``, which stamps before it chooses).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from memoryd.indexer.types import FloatArray


#: An eviction brings the cache down to this share of its capacity (live vectors always stay).
LOW_WATER = 0.9
#: Read keys remembered until the next write; past this many, further reads are not remembered
#: (they only refine the eviction order, and a reader without writes must not grow without bound).
TOUCHED_MAX = 100_000


def evict_count(total: int, capacity: int) -> int:
    """How many entries an eviction removes from a cache of ``total`` entries (before live
    vectors are spared): none up to ``capacity``, else down to ``LOW_WATER`` of it."""
    return 0 if total <= capacity else total - int(capacity * LOW_WATER)


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
        self._touched: set[bytes] = set()  # keys read since the last write (see the module docstring)
        self._touch_lock = threading.Lock()

    def get_many(self, keys: Sequence[bytes], count: bool = True) -> dict[bytes, FloatArray]:
        """Vectors for the keys present; marks them used (stamped at the next write).
        ``count`` updates hit/miss counters."""
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
        with self._touch_lock:
            if len(self._touched) < TOUCHED_MAX:
                self._touched.update(found)
        return found

    def put_many(self, conn: sqlite3.Connection, vectors: Mapping[bytes, FloatArray]) -> None:
        """Store vectors, and stamp the keys read since the last write (inside the caller's transaction)."""
        now = time.time()
        conn.executemany(
            "INSERT OR REPLACE INTO embed_cache(key, vector, last_used) VALUES (?, ?, ?)",
            [(k, np.ascontiguousarray(v, dtype=np.float32).tobytes(), now) for k, v in vectors.items()],
        )
        self._stamp_reads(conn, now)

    def _stamp_reads(self, conn: sqlite3.Connection, now: float) -> None:
        with self._touch_lock:
            touched, self._touched = list(self._touched), set()
        for start in range(0, len(touched), 500):
            part = touched[start : start + 500]
            conn.execute(f"UPDATE embed_cache SET last_used = ? WHERE key IN ({','.join('?' * len(part))})",
                         [now, *part])

    def entries(self) -> int:
        return int(self._conn.execute("SELECT count(*) FROM embed_cache").fetchone()[0])

    def evict(self, conn: sqlite3.Connection) -> int:
        """Over capacity, drop the least recently used down to ``LOW_WATER`` of it; live
        entries are kept. Returns the number of entries evicted."""
        self._stamp_reads(conn, time.time())
        total = int(conn.execute("SELECT count(*) FROM embed_cache").fetchone()[0])
        n = evict_count(total, self.capacity)
        if n == 0:
            return 0
        cur = conn.execute(
            "DELETE FROM embed_cache WHERE key IN ("
            " SELECT e.key FROM embed_cache e"
            " WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE c.embed_key = e.key)"
            " ORDER BY e.last_used LIMIT ?)",
            (n,),
        )
        return int(cur.rowcount)
