"""The SQLite side of the index: the source of truth.

One database file (WAL) holds the roots, files, chunks, the FTS5 keyword table
and the embedding cache (see :mod:`memoryd.indexer.storage.embedded.cache`). Writes go through the one
write connection of a :class:`Store`, each in ``BEGIN IMMEDIATE``; readers use
their own connections (:meth:`Store.reader`) and see only committed states, so
a file's chunks are never seen half-replaced.

Chunk ids are SQLite rowids and double as FAISS ids. A re-indexed file keeps
the ids of its unchanged chunks (matched by text hash), so the vector index
only sees the chunks that really changed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.indexer.errors import DiskFullError, StoreClosedError, StoreCorruptError, StoreError
from memoryd.indexer.storage.embedded.sqlite_wal import enable_wal
from memoryd.indexer.storage.rows import ChunkRow, FileChange, FileRow, NewChunk

__all__ = ["ChunkRow", "FileChange", "FileRow", "NewChunk", "Store", "connect", "fetch_chunks", "select_in"]

SCHEMA_VERSION = "1"
CLEAN_CLOSE_KEY = "closed_cleanly"  # "1" only between a clean close and the next open

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS roots (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS files (
    id INTEGER PRIMARY KEY,
    root_id INTEGER NOT NULL REFERENCES roots(id),
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    front_matter TEXT NOT NULL DEFAULT '',
    UNIQUE (root_id, path)
);
CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    file_id INTEGER NOT NULL REFERENCES files(id),
    start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL,
    heading TEXT NOT NULL,
    text TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    embed_key BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_by_file ON chunks(file_id);
CREATE INDEX IF NOT EXISTS chunks_by_key ON chunks(embed_key);
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(terms, tokenize = "unicode61 remove_diacritics 2");
CREATE TABLE IF NOT EXISTS embed_cache (
    key BLOB PRIMARY KEY,
    vector BLOB NOT NULL,
    last_used REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS embed_cache_lru ON embed_cache(last_used);
CREATE TABLE IF NOT EXISTS line_vectors (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    vectors BLOB NOT NULL
);
"""


def create_private(path: Path) -> None:
    """Create ``path`` empty with mode 0600 if it does not exist, whatever the process umask.

    SQLite would create the database 0644 & ~umask; it gives the ``-wal`` and
    ``-shm`` files the database file's own mode, so creating the database 0600
    first keeps all three private (the index holds the memories in clear text).
    An existing file is left as it is.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return
    except OSError as exc:
        raise StoreError(f"cannot create index database {path}: {exc.strerror or exc}") from None
    os.close(fd)  # a umask only takes bits away: the file is 0600 or stricter


def connect(path: Path, read_only: bool = False) -> sqlite3.Connection:
    """Open the database with memoryd's pragmas; raises :class:`StoreError` naming the file."""
    try:
        if read_only:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, check_same_thread=False,
                                   isolation_level=None, timeout=10.0)
        else:
            create_private(path)
            conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30.0)
            enable_wal(conn, 30.0)
            conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("PRAGMA busy_timeout=10000")
        return conn
    except sqlite3.Error as exc:
        if is_corruption(exc):
            raise StoreCorruptError(f"index database {path} is corrupt: {exc}") from None
        raise StoreError(f"cannot open index database {path}: {exc}") from None


def _closed_cleanly(conn: sqlite3.Connection) -> bool:
    """Whether the last writer closed the file itself (no crash, kill or power cut since)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (CLEAN_CLOSE_KEY,)).fetchone()
    except sqlite3.OperationalError:  # a new file, without the meta table yet
        return False
    return row is not None and row[0] == "1"


def is_corruption(exc: sqlite3.Error) -> bool:
    """SQLite's words for a damaged file (as opposed to a missing, locked or unwritable one)."""
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text or "quick_check" in text


def raise_store_error(exc: BaseException, what: str) -> None:
    """Translate a low-level failure into our error tree (disk full gets its own type)."""
    text = str(exc)
    if (isinstance(exc, sqlite3.Error) and "full" in text) or getattr(exc, "errno", None) == errno.ENOSPC:
        raise DiskFullError(f"{what}: disk full ({text})") from exc
    raise StoreError(f"{what}: {text}") from exc


class Store:
    """Owner of the write connection. Not thread-safe: one writer at a time."""

    def __init__(self, path: Path, read_only: bool = False) -> None:
        self.path = path
        self.read_only = read_only
        self._conn: sqlite3.Connection | None = connect(path, read_only)
        self.checked = False  # whether this open ran the integrity check
        if not read_only:
            try:
                # quick_check reads the whole file (0.7 s at 100k chunks, seconds at 1M): after a clean
                # close it only repeats what the last run already knew, so it runs after a crash only.
                if not _closed_cleanly(self._conn):
                    self.checked = True
                    check = self._conn.execute("PRAGMA quick_check(1)").fetchone()
                    if check is None or check[0] != "ok":
                        raise sqlite3.DatabaseError(f"quick_check: {check[0] if check else 'no answer'}")
                self._conn.executescript(_SCHEMA)
            except sqlite3.DatabaseError as exc:
                self.close(clean=False)
                if is_corruption(exc):
                    raise StoreCorruptError(f"index database {path} is corrupt: {exc}") from None
                raise StoreError(f"cannot prepare index database {path}: {exc}") from None
            self.set_meta({CLEAN_CLOSE_KEY: "0"})
            if self.meta("schema_version") is None:
                self.set_meta({"schema_version": SCHEMA_VERSION})

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreClosedError(f"store {self.path} is closed")
        return self._conn

    def close(self, clean: bool = True) -> None:
        """Close the write connection; ``clean`` records that the file needs no check at the next open."""
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                if not self.read_only and clean:
                    self._conn.execute("PRAGMA optimize")
                    self._conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, '1')", (CLEAN_CLOSE_KEY,))
            self._conn.close()
            self._conn = None

    def reader(self) -> sqlite3.Connection:
        """A new read connection (one per thread; the caller closes it)."""
        return connect(self.path, read_only=True)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self.conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise_store_error(exc, f"cannot start a write on {self.path}")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error | OSError):
                raise_store_error(exc, f"write to {self.path} failed")
            raise

    # -- meta ---------------------------------------------------------------

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, values: dict[str, str]) -> None:
        with self.transaction() as c:
            c.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", values.items())

    # -- roots and files ----------------------------------------------------

    def root_id(self, root: Path) -> int:
        c = self.conn
        row = c.execute("SELECT id FROM roots WHERE path = ?", (str(root),)).fetchone()
        if row:
            return int(row[0])
        with self.transaction() as t:
            cur = t.execute("INSERT INTO roots(path) VALUES (?)", (str(root),))
            return int(cur.lastrowid or 0)

    def roots(self) -> dict[int, Path]:
        return {int(i): Path(p) for i, p in self.conn.execute("SELECT id, path FROM roots")}

    def files(self, root_id: int) -> dict[str, FileRow]:
        rows = self.conn.execute(
            "SELECT id, root_id, path, size, mtime_ns, sha256 FROM files WHERE root_id = ?", (root_id,)
        )
        return {r[2]: FileRow(*r) for r in rows}

    def file(self, root_id: int, rel: str) -> FileRow | None:
        r = self.conn.execute(
            "SELECT id, root_id, path, size, mtime_ns, sha256 FROM files WHERE root_id = ? AND path = ?",
            (root_id, rel),
        ).fetchone()
        return FileRow(*r) if r else None

    def touch_file(self, file_id: int, size: int, mtime_ns: int) -> None:
        """Record a new mtime for a file whose content hash did not change."""
        with self.transaction() as c:
            c.execute("UPDATE files SET size = ?, mtime_ns = ? WHERE id = ?", (size, mtime_ns, file_id))

    def replace_file(
        self, root_id: int, rel: str, size: int, mtime_ns: int, sha256: str, front_matter: str,
        chunks: Sequence[NewChunk], in_transaction: Callable[[sqlite3.Connection], None] | None = None,
    ) -> FileChange:
        """Replace a file's chunks in one transaction, keeping ids of unchanged chunks.

        A chunk is unchanged when its text hash and embedding key match an old
        chunk of the same file; it keeps its id and gets its new line span.
        ``in_transaction`` runs inside the same transaction (the cache writes
        the new vectors there, so a chunk row never exists without its vector).
        """
        with self.transaction() as c:
            row = c.execute("SELECT id FROM files WHERE root_id = ? AND path = ?", (root_id, rel)).fetchone()
            if row:
                file_id = int(row[0])
                c.execute(
                    "UPDATE files SET size = ?, mtime_ns = ?, sha256 = ?, front_matter = ? WHERE id = ?",
                    (size, mtime_ns, sha256, front_matter, file_id),
                )
            else:
                cur = c.execute(
                    "INSERT INTO files(root_id, path, size, mtime_ns, sha256, front_matter) VALUES (?,?,?,?,?,?)",
                    (root_id, rel, size, mtime_ns, sha256, front_matter),
                )
                file_id = int(cur.lastrowid or 0)
            if in_transaction is not None:
                in_transaction(c)
            return _replace_chunks(c, file_id, chunks)

    def delete_file(self, root_id: int, rel: str) -> list[int]:
        """Remove a file and its chunks; returns the removed chunk ids (empty if unknown)."""
        with self.transaction() as c:
            row = c.execute("SELECT id FROM files WHERE root_id = ? AND path = ?", (root_id, rel)).fetchone()
            if not row:
                return []
            ids = _delete_chunks_of(c, int(row[0]))
            c.execute("DELETE FROM files WHERE id = ?", (int(row[0]),))
            return ids

    def move_file(self, root_id: int, rel: str, dest_root_id: int, dest_rel: str) -> bool:
        """Rename a file in the index (chunks keep ids and vectors). False if ``rel`` is unknown."""
        with self.transaction() as c:
            row = c.execute("SELECT id FROM files WHERE root_id = ? AND path = ?", (root_id, rel)).fetchone()
            if not row:
                return False
            old = c.execute(
                "SELECT id FROM files WHERE root_id = ? AND path = ?", (dest_root_id, dest_rel)
            ).fetchone()
            if old:  # moved over an indexed file: that file's chunks go
                _delete_chunks_of(c, int(old[0]))
                c.execute("DELETE FROM files WHERE id = ?", (int(old[0]),))
            c.execute("UPDATE files SET root_id = ?, path = ? WHERE id = ?", (dest_root_id, dest_rel, int(row[0])))
            return True

    def forget_everything(self) -> None:
        """Drop all files and chunks (the cache stays): used when the index identity changes."""
        with self.transaction() as c:
            c.execute("DELETE FROM chunks_fts")
            c.execute("DELETE FROM chunks")
            c.execute("DELETE FROM files")

    # -- chunks ---------------------------------------------------------------

    def chunk_ids(self) -> np.ndarray:
        """Every chunk id (int64, ascending): what the vector index must hold.

        Read as one column so that opening a 1M-chunk index does not build a
        million Python tuples; keys are fetched only for ids that need them.
        """
        cur = self.conn.execute("SELECT id FROM chunks ORDER BY id")
        return np.fromiter((r[0] for r in cur), dtype=np.int64)

    def embed_keys(self, ids: Sequence[int]) -> dict[int, bytes]:
        """chunk id → embedding key for ``ids`` (ids that vanished are absent)."""
        return {int(i): k for i, k in select_in(self.conn, "SELECT id, embed_key FROM chunks WHERE id IN ({})", ids)}

    def chunk_mtimes(self, ids: Sequence[int]) -> dict[int, int]:
        """chunk id → its file's mtime (ns), for ``ids`` (ids that vanished are absent)."""
        sql = "SELECT c.id, f.mtime_ns FROM chunks c JOIN files f ON f.id = c.file_id WHERE c.id IN ({})"
        return {int(i): int(m) for i, m in select_in(self.conn, sql, ids)}

    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]:
        """The rows of ``ids`` on the writer's connection (ids that vanished are absent)."""
        return fetch_chunks(self.conn, ids)

    def chunk_ids_of(self, root_id: int, rel: str) -> list[int]:
        """The chunk ids of one file (empty if it is not indexed)."""
        rows = self.conn.execute("SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id"
                                 " WHERE f.root_id = ? AND f.path = ?", (root_id, rel))
        return [int(r[0]) for r in rows]

    def counts(self) -> tuple[int, int]:
        files = self.conn.execute("SELECT count(*) FROM files").fetchone()[0]
        chunks = self.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
        return int(files), int(chunks)


def _replace_chunks(c: sqlite3.Connection, file_id: int, chunks: Sequence[NewChunk]) -> FileChange:
    old: dict[tuple[str, bytes], list[int]] = {}
    for cid, sha, key in c.execute("SELECT id, sha256, embed_key FROM chunks WHERE file_id = ?", (file_id,)):
        old.setdefault((sha, bytes(key)), []).append(int(cid))
    added: list[tuple[int, bytes]] = []
    kept = 0
    for ch in chunks:
        same = old.get((ch.sha256, ch.embed_key))
        if same:
            cid = same.pop()
            c.execute(
                "UPDATE chunks SET start_line = ?, end_line = ?, heading = ? WHERE id = ?",
                (ch.start_line, ch.end_line, ch.heading, cid),
            )
            kept += 1
            continue
        cur = c.execute(
            "INSERT INTO chunks(file_id, start_line, end_line, heading, text, sha256, embed_key)"
            " VALUES (?,?,?,?,?,?,?)",
            (file_id, ch.start_line, ch.end_line, ch.heading, ch.text, ch.sha256, ch.embed_key),
        )
        cid = int(cur.lastrowid or 0)
        c.execute("INSERT INTO chunks_fts(rowid, terms) VALUES (?, ?)", (cid, ch.terms))
        added.append((cid, ch.embed_key))
    removed = [cid for ids in old.values() for cid in ids]
    _delete_chunk_ids(c, removed)
    return FileChange(added=added, removed=removed, kept=kept)


def _delete_chunks_of(c: sqlite3.Connection, file_id: int) -> list[int]:
    ids = [int(r[0]) for r in c.execute("SELECT id FROM chunks WHERE file_id = ?", (file_id,))]
    _delete_chunk_ids(c, ids)
    return ids


def _delete_chunk_ids(c: sqlite3.Connection, ids: Iterable[int]) -> None:
    params = [(i,) for i in ids]
    c.executemany("DELETE FROM chunks_fts WHERE rowid = ?", params)
    c.executemany("DELETE FROM chunks WHERE id = ?", params)


def select_in(conn: sqlite3.Connection, sql: str, ids: Sequence[int]) -> Iterator[tuple[Any, ...]]:
    """Rows of ``sql`` (its ``{}`` is the IN list) for ``ids``, asked 500 at a time:
    SQLite bounds the number of parameters of one statement."""
    for start in range(0, len(ids), 500):
        part = list(ids[start : start + 500])
        yield from conn.execute(sql.format(",".join("?" * len(part))), part)


def fetch_chunks(conn: sqlite3.Connection, ids: Sequence[int]) -> dict[int, ChunkRow]:
    """Rows for the given chunk ids (ids that vanished meanwhile are simply absent)."""
    sql = ("SELECT c.id, r.path, f.path, c.start_line, c.end_line, c.heading, c.text, f.mtime_ns"
           " FROM chunks c JOIN files f ON f.id = c.file_id JOIN roots r ON r.id = f.root_id WHERE c.id IN ({})")
    return {int(r[0]): ChunkRow(*r) for r in select_in(conn, sql, ids)}
