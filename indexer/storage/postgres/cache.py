"""The shared embedding cache: one table for every site, keyed by the text's SHA-256.

The key is :func:`memoryd.indexer.cache.cache_key` (model id + embedded text), so two
sites with the same model share vectors and two models never mix. Eviction never
drops a vector a chunk of *any* site still uses (the chunk rows copy it anyway).
Implements :class:`memoryd.indexer.storage.base.CacheStore`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memoryd.indexer.cache import evict_count

if TYPE_CHECKING:
    from memoryd.indexer.storage.postgres.store import PgStore
    from memoryd.indexer.types import FloatArray


class PgEmbeddingCache:
    def __init__(self, store: PgStore, dimension: int, capacity: int) -> None:
        self._store = store
        self.dimension = dimension
        self.capacity = capacity
        self.hits = 0
        self.misses = 0

    def get_many(self, keys: Sequence[bytes], count: bool = True) -> dict[bytes, FloatArray]:
        """Vectors for the keys present (any site's); marks them used."""
        unique = list(dict.fromkeys(keys))
        found: dict[bytes, FloatArray] = {}
        if unique:
            with self._store.connection() as c:
                rows = c.execute("UPDATE memoryd_embed_cache SET last_used = %s WHERE key = ANY(%s)"
                                 " RETURNING key, vector", (time.time(), unique)).fetchall()
            for key, vec in rows:
                arr = np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, dtype=np.float32)
                if arr.shape[0] == self.dimension:
                    found[bytes(key)] = arr
        if count:
            self.hits += len(found)
            self.misses += len(unique) - len(found)
        return found

    def put_many(self, conn: Any, vectors: Mapping[bytes, FloatArray]) -> None:
        """Store vectors inside the caller's transaction (a concurrent insert by another site wins harmlessly)."""
        if not vectors:
            return
        now = time.time()
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO memoryd_embed_cache (key, vector, last_used) VALUES (%s, %s, %s)"
                " ON CONFLICT (key) DO UPDATE SET last_used = EXCLUDED.last_used",
                # in key order: two daemons caching the same new texts lock their rows in the same order
                [(k, np.ascontiguousarray(v, dtype=np.float32), now) for k, v in sorted(vectors.items())])

    def entries(self) -> int:
        with self._store.connection() as c:
            row = c.execute("SELECT count(*) FROM memoryd_embed_cache").fetchone()
        return int(row[0]) if row else 0

    def evict(self, conn: Any) -> int:
        """Over capacity, drop the least recently used down to ``LOW_WATER`` of it; vectors used by a chunk stay."""
        total = int(conn.execute("SELECT count(*) FROM memoryd_embed_cache").fetchone()[0])
        n = evict_count(total, self.capacity)
        if n == 0:
            return 0
        cur = conn.execute(
            "DELETE FROM memoryd_embed_cache WHERE key IN (SELECT e.key FROM memoryd_embed_cache e"
            " WHERE NOT EXISTS (SELECT 1 FROM memoryd_chunks c WHERE c.embed_key = e.key)"
            " ORDER BY e.last_used LIMIT %s)", (n,))
        return int(cur.rowcount)
