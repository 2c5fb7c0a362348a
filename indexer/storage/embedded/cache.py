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

A row that is not a finite vector of the index's width reads as a miss (:func:`usable`): it is
embedded again and overwritten, so an index poisoned by a bad answer heals.

"Used" is stored or read. A read (:meth:`EmbeddingCache.get_many`) writes
nothing — it may run on a request's thread that must not take the write lock —
so the keys it found are remembered in memory and stamped in the cache's next
write transaction (``put_many`` or ``evict``, which stamps before it chooses).

Behind the index's own table sits one :class:`MachineCache` per machine (a SQLite
file in ``$XDG_CACHE_HOME/memoryd/embeddings``, or ``embedding.cache_dir``), shared by
every data dir, daemon and ``memoryd index``: a key the index's table lacks is looked
up there before the model is asked, and every vector the index stores is written
there too. So a folder embedded under one data dir costs no model call under another.
The index's table stays what the vector index is rebuilt from (one transaction covers
a file's chunks and their vectors); the machine cache is a best-effort layer that no
correctness depends on: a write it cannot make within its busy timeout is dropped.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import structlog

from memoryd.indexer.storage.embedded.sqlite_wal import enable_wal

if TYPE_CHECKING:
    from memoryd.indexer.types import FloatArray

log = structlog.get_logger(__name__)


#: An eviction brings the cache down to this share of its capacity (live vectors always stay).
LOW_WATER = 0.9
#: Read keys remembered until the next write; past this many, further reads are not remembered
#: (they only refine the eviction order, and a reader without writes must not grow without bound).
TOUCHED_MAX = 100_000


def evict_count(total: int, capacity: int) -> int:
    """How many entries an eviction removes from a cache of ``total`` entries (before live
    vectors are spared): none up to ``capacity``, else down to ``LOW_WATER`` of it."""
    return 0 if total <= capacity else total - int(capacity * LOW_WATER)


def usable(vec: FloatArray) -> bool:
    """Whether a cached vector may be used: every component finite. One NaN row (stored by a memoryd
    before every embedder's answer was checked, :mod:`memoryd.indexer.embedding.checked`) made every
    hybrid search fail; read as a miss, it is embedded again and replaced."""
    return bool(np.isfinite(vec).all())


def cache_key(model_id: str, text: str) -> bytes:
    """The cache key of an embedded text: binds the vector to its model."""
    return hashlib.sha256(f"{model_id}\x00{text}".encode()).digest()


class EmbeddingCache:
    """Get/put vectors by key, with hit/miss counters (persisted by the owner)."""

    def __init__(self, conn: sqlite3.Connection, dimension: int, capacity: int,
                 machine: MachineCache | None = None) -> None:
        self._conn = conn
        self.dimension = dimension
        self.capacity = capacity
        self.machine = machine  # the per-machine layer behind this table (see the module docstring)
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
                if vec.shape[0] == self.dimension and usable(vec):
                    found[bytes(key)] = vec
        if self.machine is not None and len(found) < len(unique):
            found.update(self.machine.get_many([k for k in unique if k not in found], self.dimension))
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
        if self.machine is not None:
            self.machine.put_many(vectors)

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


class SqliteLineStore:
    """The embedded index's cache table as a :class:`~memoryd.indexer.storage.base.LineStore`, through a
    connection of its own.

    The indexer writes the same table through the store's connection, inside its own transactions;
    this connection is separate (SQLite's WAL lets them take turns: a read never waits) and serialised
    by a lock. A write waits ``wait_ms`` for the indexer's transaction, then is dropped."""

    def __init__(self, db_path: Path, dimension: int, wait_ms: int) -> None:
        from memoryd.indexer.storage.embedded.store import connect

        self._conn = connect(db_path)
        self._conn.execute(f"PRAGMA busy_timeout={int(wait_ms)}")
        self._cache = EmbeddingCache(self._conn, dimension, capacity=0)  # the bound is the indexer's job
        self._lock = threading.Lock()

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, FloatArray]:
        with self._lock:
            return self._cache.get_many(keys, count=False)  # hit/miss counters are the indexer's

    def lines_of_chunks(self, ids: Sequence[int]) -> dict[str, FloatArray]:
        from memoryd.indexer.storage.embedded.store_lines import read_line_texts

        with self._lock:
            try:
                return read_line_texts(self._conn, ids, self._cache.dimension)
            except sqlite3.Error:  # a miss, whatever went wrong (the contract)
                return {}

    def put_many(self, vectors: Mapping[bytes, FloatArray]) -> str | None:
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
                self._cache.put_many(self._conn, vectors)
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                return str(exc)
        return None

    def close(self) -> None:
        with self._lock:
            self._conn.close()


MACHINE_DB = "embeddings.sqlite3"
BUSY_TIMEOUT_MS = 5000  # a writer waits this long for another process's write, then drops its own
_MACHINE_SCHEMA = """
CREATE TABLE IF NOT EXISTS embed_cache (key BLOB PRIMARY KEY, vector BLOB NOT NULL, last_used REAL NOT NULL);
CREATE INDEX IF NOT EXISTS embed_cache_lru ON embed_cache(last_used);
"""


class MachineCache:
    """One embedding cache per machine: ``<dir>/embeddings.sqlite3``, shared by every process of the user.

    Concurrent writers (two daemons, a daemon and ``memoryd index``) are SQLite's to order: WAL
    (readers never wait for a writer) and a busy timeout (a writer waits for the other one's short
    transaction). Each call is its own short transaction; a call that still finds the file busy, or
    any other SQLite error, is logged and skipped (a miss, or a vector not shared) — the index's own
    table has the vectors either way. Bounded like :class:`EmbeddingCache` (LRU down to
    :data:`LOW_WATER` of ``capacity``), checked after every tenth of ``capacity`` of new vectors.
    Thread-safe (one connection behind a lock); keys bind a vector to its model id, as everywhere.
    """

    def __init__(self, directory: Path, capacity: int) -> None:
        self.path = directory / MACHINE_DB
        self.capacity = capacity
        self._lock = threading.Lock()
        self._since_bound = 0
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                               check_same_thread=False)
        with contextlib.suppress(OSError):
            os.chmod(self.path, 0o600)  # vectors say something about the user's texts
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        enable_wal(conn, BUSY_TIMEOUT_MS / 1000)
        conn.execute("PRAGMA synchronous = NORMAL")  # a lost tail after a power cut costs re-embedding only
        conn.executescript(_MACHINE_SCHEMA)
        self._conn = conn

    def get_many(self, keys: Sequence[bytes], dimension: int) -> dict[bytes, FloatArray]:
        """The vectors of ``keys`` present (of width ``dimension``); {} when the file cannot be read now."""
        found: dict[bytes, FloatArray] = {}
        try:
            with self._lock:
                for start in range(0, len(keys), 500):
                    part = list(keys[start : start + 500])
                    rows = self._conn.execute(
                        f"SELECT key, vector FROM embed_cache WHERE key IN ({','.join('?' * len(part))})", part)
                    for key, blob in rows:
                        vec = np.frombuffer(blob, dtype=np.float32)
                        if vec.shape[0] == dimension and usable(vec):
                            found[bytes(key)] = vec
        except sqlite3.Error as exc:
            log.warning("machine_cache.read_failed", path=str(self.path), error=str(exc), action="treated as misses")
            return {}
        return found

    def put_many(self, vectors: Mapping[bytes, FloatArray]) -> bool:
        """Store (or mark used) ``vectors`` in one short transaction; False when it had to be skipped."""
        if not vectors:
            return True
        now = time.time()
        rows = [(k, np.ascontiguousarray(v, dtype=np.float32).tobytes(), now) for k, v in vectors.items()]
        try:
            with self._lock:
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    self._conn.executemany(
                        "INSERT INTO embed_cache(key, vector, last_used) VALUES (?, ?, ?)"
                        # the vector too: a row poisoned by an older memoryd reads as a miss, and is healed here
                        " ON CONFLICT(key) DO UPDATE SET vector = excluded.vector, last_used = excluded.last_used",
                        rows)
                    self._conn.execute("COMMIT")
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._since_bound += len(rows)
                due = self._since_bound >= max(1, self.capacity // 10)
                if due:
                    self._since_bound = 0
        except sqlite3.Error as exc:
            log.warning("machine_cache.write_failed", path=str(self.path), error=str(exc), vectors=len(rows),
                        action="not shared; the index keeps them")
            return False
        if due:
            try:
                self.evict()
            except sqlite3.Error as exc:
                log.warning("machine_cache.evict_failed", path=str(self.path), error=str(exc), action="next time")
        return True

    def entries(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT count(*) FROM embed_cache").fetchone()[0])

    def seed(self, local: sqlite3.Connection, batch: int = 2000) -> int:
        """Copy a data dir's own cache (table ``embed_cache`` of ``local``) in, once, so that what an
        older memoryd embedded there is shared too. Returns how many vectors were offered."""
        offered = 0
        rows = local.execute("SELECT key, vector FROM embed_cache")
        while part := rows.fetchmany(batch):
            self.put_many({bytes(k): np.frombuffer(v, dtype=np.float32) for k, v in part})
            offered += len(part)
        return offered

    def evict(self) -> int:
        """Over capacity, drop the least recently used down to ``LOW_WATER`` of it; returns how many."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                total = int(self._conn.execute("SELECT count(*) FROM embed_cache").fetchone()[0])
                n = evict_count(total, self.capacity)
                removed = 0
                if n:
                    removed = int(self._conn.execute(
                        "DELETE FROM embed_cache WHERE key IN"
                        " (SELECT key FROM embed_cache ORDER BY last_used LIMIT ?)", (n,)).rowcount)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        if removed:
            log.info("machine_cache.evicted", evicted=removed, entries_before=total, capacity=self.capacity)
        return removed

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def open_machine_cache(directory: Path, capacity: int) -> MachineCache | None:
    """The machine cache in ``directory``; None (logged: each data dir then keeps only its own) when
    ``capacity`` is 0 or the file cannot be opened."""
    if capacity <= 0:
        return None
    try:
        return MachineCache(directory, capacity)
    except (OSError, sqlite3.Error) as exc:
        log.warning("machine_cache.unavailable", path=str(directory / MACHINE_DB), error=str(exc),
                    action="each data dir keeps only its own embedding cache")
        return None
