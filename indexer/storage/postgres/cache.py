"""The shared embedding cache: one table for every site, keyed by the text's SHA-256.

The key is :func:`memoryd.indexer.storage.embedded.cache.cache_key` (model id + embedded text), so two
sites with the same model share vectors and two models never mix. Eviction never
drops a vector a chunk of *any* site still uses (the chunk rows copy it anyway).
Implements :class:`memoryd.indexer.storage.base.CacheStore`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg

from memoryd.indexer.storage.base import StorageUnavailableError
from memoryd.indexer.storage.embedded.cache import evict_count, usable

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
            found = _vectors(rows, self.dimension)
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


class PgLineStore:
    """The shared cache as a :class:`~memoryd.indexer.storage.base.LineStore`: the context excerpts' line vectors,
    read and stored from a request's thread through the store's pool.

    The indexer may hold cache rows locked in its transaction (a file's new vectors): a read that
    would wait for them more than ``wait_ms`` (``lock_timeout``) reads without marking them used, and a
    write that would is dropped. While the database is away every line is a miss and nothing is stored."""

    def __init__(self, store: PgStore, dimension: int, wait_ms: int) -> None:
        self._store = store
        self._cache = PgEmbeddingCache(store, dimension, capacity=0)  # the bound is the indexer's job
        self._wait = f"SET LOCAL lock_timeout = '{int(wait_ms)}ms'"

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, FloatArray]:
        unique = list(dict.fromkeys(keys))
        if not unique:
            return {}
        try:
            with self._store.connection() as c:
                try:
                    with c.transaction():
                        c.execute(self._wait)
                        rows = c.execute("UPDATE memoryd_embed_cache SET last_used = %s WHERE key = ANY(%s)"
                                         " RETURNING key, vector", (time.time(), unique)).fetchall()
                except psycopg.errors.LockNotAvailable:  # the indexer holds one of them: read, unmarked
                    rows = c.execute("SELECT key, vector FROM memoryd_embed_cache WHERE key = ANY(%s)",
                                     (unique,)).fetchall()
        except (StorageUnavailableError, psycopg.Error):  # a miss, whatever went wrong (the contract)
            return {}
        return _vectors(rows, self._cache.dimension)

    def put_many(self, vectors: Mapping[bytes, FloatArray]) -> str | None:
        if not vectors:
            return None
        try:
            with self._store.connection() as c:
                try:
                    with c.transaction():
                        c.execute(self._wait)
                        self._cache.put_many(c, vectors)
                except psycopg.errors.LockNotAvailable as exc:
                    return str(exc).strip()
        except (StorageUnavailableError, psycopg.Error) as exc:  # dropped, whatever went wrong (the contract)
            return str(exc).strip()
        return None

    def lines_of_chunks(self, ids: Sequence[int]) -> dict[str, FloatArray]:
        from memoryd.indexer.storage.line_codec import decode_lines

        if not ids:
            return {}
        out: dict[str, FloatArray] = {}
        try:
            with self._store.connection() as c:
                rows = c.execute("SELECT c.text, l.vectors FROM memoryd_line_vectors l JOIN memoryd_chunks c"
                                 " ON c.id = l.chunk_id WHERE l.chunk_id = ANY(%s)", (list(ids),)).fetchall()
        except (StorageUnavailableError, psycopg.Error):  # a miss, whatever went wrong (the contract)
            return {}
        for text, blob in rows:
            out.update(decode_lines(str(text), bytes(blob), self._cache.dimension))
        return out

    def close(self) -> None:
        """Nothing of its own to close: the pool is the index's."""


def _vectors(rows: Sequence[Any], dimension: int) -> dict[bytes, FloatArray]:
    """``(key, vector)`` rows as float32 arrays by key; a vector of another width is left out."""
    found: dict[bytes, FloatArray] = {}
    for key, vec in rows:
        arr = np.asarray(vec.to_numpy() if hasattr(vec, "to_numpy") else vec, dtype=np.float32)
        if arr.shape[0] == dimension and usable(arr):  # a non-finite row is a miss (pgvector refuses NaN anyway)
            found[bytes(key)] = arr
    return found
