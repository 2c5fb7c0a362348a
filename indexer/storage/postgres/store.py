"""The PostgreSQL side of the storage interface: roots, files, chunks (with their vectors), meta.

Implements :class:`memoryd.indexer.storage.base.ChunkStore` for one site. Roots
are keyed by (site, path), so files are keyed by (site, root, path). A chunk row
carries its keyword terms (with postings rows, see :mod:`.terms`) and its vector: the vector
comes from the shared embedding cache *inside the same transaction* (the engine's
``in_transaction`` hook writes the cache first), so nothing else has to be kept in step
with the table. A chunk whose vector the cache lacks (keyword-first indexing: the engine
queued it on its vector backlog) is committed with a NULL embedding, which
:meth:`~memoryd.indexer.storage.postgres.search.PgVectors.add` writes later;
:meth:`PgStore.chunks_without_vectors` finds them again after a restart.

Every call borrows a connection from the pool for its own duration, and every
change is one transaction. An unreachable database raises
:class:`~memoryd.indexer.storage.base.StorageUnavailableError` within
``storage.connect_timeout_s``, naming the database without its password, and
:attr:`PgStore.health` records since when. While it is down, each call first tries
one direct connection (refused at once by a stopped server) instead of waiting on
the pool, whose own reconnection backs off for up to minutes; once that
succeeds, a fresh pool replaces the old one, so the daemon resumes within one call.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import psycopg_pool

from memoryd.indexer.errors import StoreError
from memoryd.indexer.storage.base import StorageUnavailableError
from memoryd.indexer.storage.postgres import corpus
from memoryd.indexer.storage.postgres.connect import READ_ONLY, closed_by_server, read_only_error
from memoryd.indexer.storage.postgres.schema import GENERATION_KEY, MIGRATION_LOCK
from memoryd.indexer.storage.postgres.terms import fts_tokens, term_frequencies
from memoryd.indexer.storage.rows import ChunkRow, FileChange, FileRow, NewChunk

_FILE_COLS = "id, root_id, path, size, mtime_ns, sha256"
FAST_REFUSAL_S = 0.5  # a probe refused this fast (a stopped server) is tried again after this long


class IdentityChangedError(StoreError):
    """The database was re-indexed with other settings since this daemon opened it."""


class Health:
    """Whether the database answered at the last call, the last error, and since when (for ``status``)."""

    def __init__(self) -> None:
        self.reachable = True
        self.error: str | None = None
        self.since = time.time()  # when ``reachable`` last changed (the daemon's start, at first)

    def record(self, reachable: bool, error: str | None = None) -> None:
        if reachable != self.reachable:
            self.since = time.time()
        self.reachable = reachable
        if error is not None:
            self.error = error

    def to_json(self) -> dict[str, Any]:
        return {"reachable": self.reachable, "last_error": self.error,
                "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.since))}


class PgStore:
    """One site's view of the shared database (reads of other sites' rows go through the searcher).

    ``reopen`` makes a fresh pool (see the module's docstring); ``probe`` opens one plain
    connection. Without them (a pool handed in by a test) the pool reconnects by itself.
    """

    def __init__(self, pool: psycopg_pool.ConnectionPool, site: str, where: str, timeout_s: float = 3.0,
                 reopen: Callable[[], psycopg_pool.ConnectionPool] | None = None,
                 probe: Callable[[], psycopg.Connection[Any]] | None = None) -> None:
        self.pool = pool
        self.site = site
        self.where = where  # the database, password-free (dsn.describe)
        self.timeout_s = timeout_s
        self.health = Health()
        self._reopen = reopen
        self._probe = probe
        self._swap = threading.Lock()
        self._failed_probe = -float("inf")  # monotonic time of the last probe that found the database away
        self._probe_window = timeout_s  # how long that answer stands (short when the refusal came at once)
        self._roots: dict[Path, int] = {}
        # The identity generation this site's chunks are made for: every file write checks it in its own
        # transaction (None: no check), so a daemon of older settings cannot commit after a re-index.
        self.generation: str | None = None
        # Run before every call while opening is unfinished (the daemon started with the database away):
        # it finishes opening, or raises StorageUnavailableError (memoryd...postgres.backend._attach_later).
        self.before_use: Callable[[], None] | None = None

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled connection (autocommit); failures to reach the database become StorageUnavailableError.

        A pooled connection the server has closed (:func:`~.connect.closed_by_server`) is dropped
        and one direct connection decides: refused (the server is down) fails the call at once,
        as a query on the dead connection would have; accepted (it restarted), the next pooled
        connection serves the call."""
        hook = self.before_use
        if hook is not None:
            hook()
        if not self.health.reachable:
            self._come_back()
        try:
            for _ in range(self.pool.max_size + 1):  # each dead one is dropped; then the pool makes new ones
                with self.pool.connection(timeout=self.timeout_s) as conn:
                    if closed_by_server(conn):
                        conn.close()  # the pool discards a closed connection when it comes back
                        self._check_server()
                        continue
                    yield conn
                    break
            else:  # every connection lent was dead although the server answers: give up this call
                raise self._down(f"database {self.where} keeps closing connections")
        except psycopg_pool.PoolTimeout:
            raise self._down(f"database {self.where} is unreachable") from None
        except psycopg.errors.TransactionRollback:  # a deadlock or serialisation failure: this call's, not an outage
            raise
        except READ_ONLY as exc:  # a role (or server) that may not write: say so, not a traceback with SQL
            raise read_only_error(exc, self.where) from None
        except psycopg.OperationalError as exc:
            raise self._down(f"database {self.where} failed: {type(exc).__name__}") from None
        self.health.record(True)

    def _check_server(self) -> None:
        """After finding a connection the server closed: is it there now? (raises StorageUnavailableError)"""
        if self._probe is not None:
            self._probe_or_raise()

    def _probe_or_raise(self) -> None:
        """One direct connection; when it fails, record why and raise StorageUnavailableError."""
        assert self._probe is not None
        t0 = time.monotonic()
        try:
            self._probe().close()
        except StorageUnavailableError as exc:
            self._failed_probe = time.monotonic()
            # A silent host's probe costs the timeout: the calls behind it take its answer for that long.
            # A stopped server refuses at once: its answer stands half a second, so the writes made just
            # after it starts again are indexed (not answered "indexed: false" for the whole timeout).
            self._probe_window = self.timeout_s if self._failed_probe - t0 >= FAST_REFUSAL_S else FAST_REFUSAL_S
            self.health.record(False, str(exc))  # the detail; the error says it as every outage does
            raise StorageUnavailableError(f"database {self.where} is unreachable", where=self.where) from None

    def _down(self, message: str) -> StorageUnavailableError:
        self.health.record(False, message)
        return StorageUnavailableError(message, where=self.where)

    def _come_back(self) -> None:
        """While the database is down: one direct connection decides, within ``timeout_s``; when it
        answers, a fresh pool replaces the one whose reconnection may be backing off for minutes."""
        if self._reopen is None or self._probe is None:
            return
        with self._swap:
            if self.health.reachable:  # another thread brought it back meanwhile
                return
            if time.monotonic() - self._failed_probe < self._probe_window:  # just tried: callers queued behind a
                raise StorageUnavailableError(  # silent host's probe must not each wait in turn
                    f"database {self.where} is unreachable", where=self.where)
            self._probe_or_raise()
            old, self.pool = self.pool, self._reopen()
            old.close(timeout=1.0)  # its threads stop at once; a connection still lent out closes on return
            self.health.record(True)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        with self.connection() as conn, conn.transaction():
            yield conn

    def close(self, clean: bool = True) -> None:
        """The pool belongs to whoever opened it; closing the store only forgets cached root ids."""
        self._roots.clear()

    # -- meta -------------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        with self.connection() as c:
            row = c.execute("SELECT value FROM memoryd_meta WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, values: dict[str, str]) -> None:
        with self.transaction() as c, c.cursor() as cur:
            cur.executemany(
                "INSERT INTO memoryd_meta (key, value) VALUES (%s, %s)"
                " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", list(values.items()))

    # -- roots and files --------------------------------------------------------------

    def root_id(self, root: Path) -> int:
        if root in self._roots:
            return self._roots[root]
        with self.transaction() as c:
            c.execute("INSERT INTO memoryd_roots (site, path) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                      (self.site, str(root)))
            row = c.execute("SELECT id FROM memoryd_roots WHERE site = %s AND path = %s",
                            (self.site, str(root))).fetchone()
        assert row is not None
        self._roots[root] = int(row[0])
        return self._roots[root]

    def roots(self) -> dict[int, Path]:
        with self.connection() as c:
            rows = c.execute("SELECT id, path FROM memoryd_roots WHERE site = %s", (self.site,)).fetchall()
        return {int(i): Path(p) for i, p in rows}

    def files(self, root_id: int) -> dict[str, FileRow]:
        with self.connection() as c:
            rows = c.execute(f"SELECT {_FILE_COLS} FROM memoryd_files WHERE root_id = %s", (root_id,)).fetchall()
        return {r[2]: FileRow(*r) for r in rows}

    def file(self, root_id: int, rel: str) -> FileRow | None:
        with self.connection() as c:
            r = c.execute(f"SELECT {_FILE_COLS} FROM memoryd_files WHERE root_id = %s AND path = %s",
                          (root_id, rel)).fetchone()
        return FileRow(*r) if r else None

    def touch_file(self, file_id: int, size: int, mtime_ns: int) -> None:
        with self.transaction() as c:
            c.execute("UPDATE memoryd_files SET size = %s, mtime_ns = %s WHERE id = %s", (size, mtime_ns, file_id))

    def replace_file(
        self, root_id: int, rel: str, size: int, mtime_ns: int, sha256: str, front_matter: str,
        chunks: Sequence[NewChunk], in_transaction: Callable[[Any], None] | None = None,
    ) -> FileChange:
        """Replace a file's chunks in one transaction, keeping the ids of unchanged chunks.

        ``in_transaction`` runs first in the same transaction: it must put every new
        chunk's vector in the cache, from which the chunk rows take it.
        """
        with self.transaction() as c:
            self.check_generation(c)
            row = c.execute(
                "INSERT INTO memoryd_files (root_id, path, size, mtime_ns, sha256, front_matter)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (root_id, path) DO UPDATE SET size = EXCLUDED.size,"
                " mtime_ns = EXCLUDED.mtime_ns, sha256 = EXCLUDED.sha256, front_matter = EXCLUDED.front_matter"
                " RETURNING id", (root_id, rel, size, mtime_ns, sha256, front_matter)).fetchone()
            assert row is not None
            if in_transaction is not None:
                in_transaction(c)
            return _replace_chunks(c, int(row[0]), chunks)

    def check_generation(self, c: psycopg.Connection[Any]) -> None:
        """Inside a write: the generation row, share-locked, so a re-index either waits for this
        transaction (and then drops what it wrote) or has committed and this write is refused."""
        if self.generation is None:
            return
        row = c.execute("SELECT value FROM memoryd_meta WHERE key = %s FOR SHARE", (GENERATION_KEY,)).fetchone()
        found = str(row[0]) if row else "0"
        if found != self.generation:
            raise IdentityChangedError(
                f"database {self.where} was re-indexed with other settings (identity generation {found}, "
                f"this daemon's {self.generation}): nothing is written until memoryd is upgraded and restarted here")

    def delete_file(self, root_id: int, rel: str) -> list[int]:
        with self.transaction() as c:
            self.check_generation(c)
            row = c.execute("SELECT id FROM memoryd_files WHERE root_id = %s AND path = %s FOR UPDATE",
                            (root_id, rel)).fetchone()
            if not row:
                return []
            gone = corpus.drop_postings(c, "c.file_id = %s", [row[0]])
            ids = [int(r[0]) for r in c.execute("DELETE FROM memoryd_chunks WHERE file_id = %s RETURNING id",
                                                (row[0],))]
            c.execute("DELETE FROM memoryd_files WHERE id = %s", (row[0],))
            corpus.apply(c, gone)
            return ids

    def move_file(self, root_id: int, rel: str, dest_root_id: int, dest_rel: str) -> bool:
        with self.transaction() as c:
            self.check_generation(c)
            row = c.execute("SELECT id FROM memoryd_files WHERE root_id = %s AND path = %s FOR UPDATE",
                            (root_id, rel)).fetchone()
            if not row:
                return False
            dest = [int(r[0]) for r in c.execute("SELECT id FROM memoryd_files WHERE root_id = %s AND path = %s"
                                                 " FOR UPDATE", (dest_root_id, dest_rel))]
            gone = corpus.drop_postings(c, "c.file_id = ANY(%s)", [dest])
            c.execute("DELETE FROM memoryd_files WHERE id = ANY(%s)", (dest,))
            c.execute("UPDATE memoryd_files SET root_id = %s, path = %s WHERE id = %s",
                      (dest_root_id, dest_rel, row[0]))
            corpus.apply(c, gone)
            return True

    def forget_everything(self) -> None:
        """Drop this site's files and chunks (the shared cache and other sites stay)."""
        with self.transaction() as c:
            self.check_generation(c)
            ids = [int(r[0]) for r in c.execute(
                "SELECT id FROM memoryd_files WHERE root_id IN (SELECT id FROM memoryd_roots WHERE site = %s)"
                " FOR UPDATE", (self.site,))]
            gone = corpus.drop_postings(c, "c.file_id = ANY(%s)", [ids])
            c.execute("DELETE FROM memoryd_files WHERE id = ANY(%s)", (ids,))
            corpus.apply(c, gone)

    def ensure_generation(self) -> str:
        """The identity generation, its row created ("0") if missing: writes share-lock that row,
        which only serialises them with a re-index if it exists."""
        with self.transaction() as c:
            c.execute("INSERT INTO memoryd_meta (key, value) VALUES (%s, '0') ON CONFLICT (key) DO NOTHING",
                      (GENERATION_KEY,))
            row = c.execute("SELECT value FROM memoryd_meta WHERE key = %s", (GENERATION_KEY,)).fetchone()
        assert row is not None
        return str(row[0])

    def reset_all_sites(self, identity: str, drop_cache: bool) -> tuple[int, int, int]:
        """Drop every site's files, chunks and postings and record ``identity``, in one transaction
        under the migration lock; returns (files, chunks, new generation).

        The meta row is updated first: a concurrent write holds it share-locked (:meth:`check_generation`),
        so this waits for that write instead of deadlocking with it on the tables. Roots stay
        (their ids and the site locks are unchanged); the embedding cache stays unless ``drop_cache``
        (another model or dimension: its vectors would be of no use)."""
        with self.transaction() as c:
            c.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            row = c.execute(
                "INSERT INTO memoryd_meta (key, value) VALUES (%s, '1') ON CONFLICT (key)"
                " DO UPDATE SET value = (memoryd_meta.value::bigint + 1)::text RETURNING value",
                (GENERATION_KEY,)).fetchone()
            assert row is not None
            counts = c.execute("SELECT (SELECT count(*) FROM memoryd_files), (SELECT count(*) FROM memoryd_chunks)"
                               ).fetchone()
            assert counts is not None
            c.execute("TRUNCATE memoryd_line_vectors, memoryd_postings, memoryd_chunks, memoryd_files, memoryd_terms")
            c.execute("UPDATE memoryd_totals SET chunks = 0, terms = 0, writes = writes + 1")
            if drop_cache:
                c.execute("TRUNCATE memoryd_embed_cache")
            c.execute("INSERT INTO memoryd_meta (key, value) VALUES ('identity', %s)"
                      " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (identity,))
        self.generation = str(row[0])
        return int(counts[0]), int(counts[1]), int(row[0])

    # -- chunks -------------------------------------------------------------------------

    def chunk_ids(self) -> np.ndarray:
        with self.connection() as c:
            rows = c.execute(
                "SELECT c.id FROM memoryd_chunks c JOIN memoryd_files f ON f.id = c.file_id"
                " JOIN memoryd_roots r ON r.id = f.root_id WHERE r.site = %s ORDER BY c.id", (self.site,)).fetchall()
        return np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))

    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """The rows of ``ids`` (ids that vanished are absent), each with its site."""
        with self.connection() as c:
            rows = c.execute("SELECT c.id, r.path, f.path, c.start_line, c.end_line, c.heading, c.text, f.mtime_ns,"
                             " r.site FROM memoryd_chunks c JOIN memoryd_files f ON f.id = c.file_id"
                             " JOIN memoryd_roots r ON r.id = f.root_id WHERE c.id = ANY(%s)", (list(ids),)).fetchall()
        return {int(r[0]): ChunkRow(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7], site=r[8]) for r in rows}

    def chunk_ids_of(self, root_id: int, rel: str) -> list[int]:
        """The chunk ids of one file (empty if it is not indexed)."""
        with self.connection() as c:
            rows = c.execute("SELECT c.id FROM memoryd_chunks c JOIN memoryd_files f ON f.id = c.file_id"
                             " WHERE f.root_id = %s AND f.path = %s", (root_id, rel)).fetchall()
        return [int(r[0]) for r in rows]

    def chunk_mtimes(self, ids: Sequence[int]) -> dict[int, int]:
        """chunk id → its file's mtime (ns), for ``ids`` (ids that vanished are absent)."""
        with self.connection() as c:
            rows = c.execute("SELECT c.id, f.mtime_ns FROM memoryd_chunks c JOIN memoryd_files f ON f.id = c.file_id"
                             " WHERE c.id = ANY(%s)", (list(ids),)).fetchall()
        return {int(i): int(m) for i, m in rows}

    def chunks_without_vectors(self) -> dict[int, int]:
        """This site's chunks committed before their vector (keyword first): chunk id → its file's mtime (ns),
        so that a restart resumes the vector backlog in its order (newest files first)."""
        with self.connection() as c:
            rows = c.execute("SELECT c.id, f.mtime_ns FROM memoryd_chunks c JOIN memoryd_files f ON f.id = c.file_id"
                             " JOIN memoryd_roots r ON r.id = f.root_id WHERE c.embedding IS NULL AND r.site = %s",
                             (self.site,)).fetchall()
        return {int(i): int(m) for i, m in rows}

    def embed_keys(self, ids: Sequence[int]) -> dict[int, bytes]:
        with self.connection() as c:
            rows = c.execute("SELECT id, embed_key FROM memoryd_chunks WHERE id = ANY(%s)", (list(ids),)).fetchall()
        return {int(i): bytes(k) for i, k in rows}

    def counts(self) -> tuple[int, int]:
        """(files, chunks) of this site."""
        with self.connection() as c:
            row = c.execute(
                "SELECT count(DISTINCT f.id), count(c.id) FROM memoryd_files f"
                " JOIN memoryd_roots r ON r.id = f.root_id LEFT JOIN memoryd_chunks c ON c.file_id = f.id"
                " WHERE r.site = %s", (self.site,)).fetchone()
        assert row is not None
        return int(row[0]), int(row[1])


def _replace_chunks(c: psycopg.Connection[Any], file_id: int, chunks: Sequence[NewChunk]) -> FileChange:
    """The chunk rows of one file, in as few round trips as psycopg's pipelined ``executemany`` allows."""
    old: dict[tuple[str, bytes], list[int]] = {}
    for cid, sha, key in c.execute("SELECT id, sha256, embed_key FROM memoryd_chunks WHERE file_id = %s FOR UPDATE",
                                   (file_id,)):
        old.setdefault((sha, bytes(key)), []).append(int(cid))
    kept: list[tuple[int, int, str, int]] = []
    new: list[NewChunk] = []
    for ch in chunks:
        same = old.get((ch.sha256, ch.embed_key))
        if same:
            kept.append((ch.start_line, ch.end_line, ch.heading, same.pop()))
        else:
            new.append(ch)
    delta = corpus.CorpusDelta()
    with c.cursor() as cur:
        if kept:
            cur.executemany("UPDATE memoryd_chunks SET start_line = %s, end_line = %s, heading = %s WHERE id = %s",
                            kept)
        added = _insert_chunks(cur, file_id, new, delta) if new else []
    removed = [cid for ids in old.values() for cid in ids]
    if removed:
        delta.merge(corpus.drop_postings(c, "c.id = ANY(%s)", [removed]))
        c.execute("DELETE FROM memoryd_chunks WHERE id = ANY(%s)", (removed,))
    corpus.apply(c, delta)  # last: its row locks are held until the commit
    return FileChange(added=added, removed=removed, kept=len(kept))


def _insert_chunks(cur: psycopg.Cursor[Any], file_id: int, chunks: Sequence[NewChunk],
                   delta: corpus.CorpusDelta) -> list[tuple[int, bytes]]:
    """Insert the chunk rows (pipelined) and then all their postings (one statement); ``delta`` gets what
    they add to the corpus counts. Each row takes its vector from the cache; one the cache lacks (its
    chunk is on the engine's vector backlog) is NULL until :meth:`PgVectors.add` writes it."""
    tokens = [fts_tokens(ch.terms) for ch in chunks]
    cur.executemany(
        "INSERT INTO memoryd_chunks (file_id, start_line, end_line, heading, text, sha256, embed_key,"
        " terms, n_terms, embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s,"
        " (SELECT e.vector FROM memoryd_embed_cache e WHERE e.key = %s)) RETURNING id",
        [(file_id, ch.start_line, ch.end_line, ch.heading, ch.text, ch.sha256, ch.embed_key, ch.terms, len(tok),
          ch.embed_key) for ch, tok in zip(chunks, tokens, strict=True)], returning=True)
    added: list[tuple[int, bytes]] = []
    for ch in chunks:
        row = cur.fetchone()
        assert row is not None  # an INSERT ... VALUES returns its row
        added.append((int(row[0]), ch.embed_key))
        cur.nextset()
    terms: list[str] = []
    ids: list[int] = []
    tfs: list[int] = []
    dls: list[int] = []
    for (cid, _), tok in zip(added, tokens, strict=True):
        distinct, counts = term_frequencies(tok)
        delta.add_chunk(distinct, len(tok))
        terms += distinct
        tfs += counts
        ids += [cid] * len(distinct)
        dls += [len(tok)] * len(distinct)
    if terms:
        cur.execute("INSERT INTO memoryd_postings (term, chunk_id, tf, dl)"
                    " SELECT * FROM unnest(%s::text[], %s::bigint[], %s::int[], %s::int[])", (terms, ids, tfs, dls))
    return added
