"""The storage interface: what the index above storage uses, whatever the backend.

Three parts, each a :class:`typing.Protocol` so that the embedded backend's
classes implement it as they are (no adapter, no behaviour change) and a type
checker proves it (:mod:`memoryd.indexer.storage.conformance`):

* :class:`ChunkStore`: meta and identity, roots, files, chunks and their
  keyword terms, and transactions (every file update is one transaction);
* :class:`CacheStore`: the embedding cache (text hash → vector), written in the
  store's transaction so that a chunk never exists without its vector;
* :class:`VectorStore`: nearest-neighbour search over the chunks' vectors.

An opened backend is a :class:`Backend`: those three, its query side
(:mod:`memoryd.indexer.search.legs`), the :class:`Capabilities` it declares and the
runtime hooks where backends differ (guard before a write, save, status, upkeep,
rebuilds, line rows, close). :class:`memoryd.indexer.engine.MemoryIndex` holds one and
is typed against these Protocols only; ``storage/embedded/backend.py`` and
``storage/postgres/backend.py`` implement it side by side (docs/backends.md: adding a
third). The storage errors every backend raises live here too.

Connections are typed ``Any`` on purpose: a transaction's connection is only
handed from the store to the cache of the *same* backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from memoryd.indexer.errors import StoreError

if TYPE_CHECKING:
    import threading

    import numpy as np

    from memoryd.indexer.fill.backlog import VectorBacklog
    from memoryd.indexer.search.legs import SearchLegs
    from memoryd.indexer.search.query import Query
    from memoryd.indexer.storage.index_status import IndexStatus
    from memoryd.indexer.storage.line_codec import LineRow, PendingChunk
    from memoryd.indexer.storage.rows import ChunkRow, FileChange, FileRow, NewChunk
    from memoryd.indexer.types import FloatArray

__all__ = ["EMBEDDED", "LINE_WAIT_MS", "Backend", "CacheStore", "Capabilities", "ChunkStore", "LineRows",
           "LineStore", "RebuildJob", "SchemaTooNewError", "SiteLockedError", "StorageUnavailableError", "VectorStore"]

LINE_WAIT_MS = 50
"""How long storing line vectors waits for the indexer's write: a line not stored now is embedded again
later, which is cheaper than holding a ``context`` answer behind a long indexing write."""


class ChunkStore(Protocol):
    """Meta/identity, roots, files, chunks, transactions."""

    def meta(self, key: str) -> str | None: ...
    def set_meta(self, values: dict[str, str]) -> None: ...
    def transaction(self) -> AbstractContextManager[Any]: ...
    def root_id(self, root: Path) -> int: ...
    def roots(self) -> dict[int, Path]: ...
    def files(self, root_id: int) -> dict[str, FileRow]: ...
    def file(self, root_id: int, rel: str) -> FileRow | None: ...
    def touch_file(self, file_id: int, size: int, mtime_ns: int) -> None: ...

    def replace_file(
        self, root_id: int, rel: str, size: int, mtime_ns: int, sha256: str, front_matter: str,
        chunks: Sequence[NewChunk], in_transaction: Callable[[Any], None] | None = None,
    ) -> FileChange: ...

    def delete_file(self, root_id: int, rel: str) -> list[int]: ...
    def move_file(self, root_id: int, rel: str, dest_root_id: int, dest_rel: str) -> bool: ...
    def forget_everything(self) -> None: ...
    def chunk_ids(self) -> np.ndarray: ...
    def chunk_ids_of(self, root_id: int, rel: str) -> list[int]: ...
    def chunk_mtimes(self, ids: Sequence[int]) -> dict[int, int]: ...
    def chunks(self, ids: Sequence[int]) -> dict[int, ChunkRow]: ...
    def embed_keys(self, ids: Sequence[int]) -> dict[int, bytes]: ...
    def counts(self) -> tuple[int, int]: ...
    def close(self, clean: bool = True) -> None: ...


class CacheStore(Protocol):
    """The embedding cache; ``put_many``/``evict`` run in a :meth:`ChunkStore.transaction`."""

    hits: int
    misses: int
    capacity: int

    def get_many(self, keys: Sequence[bytes], count: bool = True) -> dict[bytes, FloatArray]: ...
    def put_many(self, conn: Any, vectors: Mapping[bytes, FloatArray]) -> None: ...
    def entries(self) -> int: ...
    def evict(self, conn: Any) -> int: ...


class VectorStore(Protocol):
    """Nearest neighbours by cosine (vectors are L2-normalised), and scores of given chunks."""

    @property
    def size(self) -> int: ...

    def search(self, query: FloatArray, k: int) -> list[tuple[int, float]]: ...
    def scores_for(self, query: FloatArray, ids: Iterable[int]) -> dict[int, float]: ...
    def add(self, ids: Iterable[int], vectors: FloatArray) -> None: ...
    def remove(self, ids: Iterable[int]) -> int: ...


class LineStore(Protocol):
    """The embedding cache as the context excerpts' line vectors use it, from a request's thread.

    Keys are :func:`memoryd.indexer.storage.embedded.cache.cache_key` s, as for chunks (a line's vector is the vector
    of a chunk of that text). Best effort, never in the indexer's way: a read that cannot be made is
    a miss; a write the indexer holds up for more than :data:`LINE_WAIT_MS`, or that cannot be made
    at all, is dropped and ``put_many`` says why (None: stored). Thread-safe. Lines stored are not
    live chunks: the cache's LRU bound may evict them like any unused vector."""

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, FloatArray]: ...
    def put_many(self, vectors: Mapping[bytes, FloatArray]) -> str | None: ...

    def lines_of_chunks(self, ids: Sequence[int]) -> dict[str, FloatArray]:
        """The line vectors the index filled in for these chunks (:mod:`memoryd.indexer.fill.line_vectors`), by
        line text; {} for those it has not (or when it cannot be read now)."""
        ...

    def close(self) -> None: ...


class LineRows(Protocol):
    """Where a backend keeps the chunks' line vectors: what :class:`~memoryd.indexer.fill.line_vectors.LineVectorFill`
    asks of it."""

    def next_chunks(self, limit: int, floor: int) -> list[PendingChunk]:
        """Up to ``limit`` of the oldest chunks (of this index's site) without line vectors, ids ``floor`` up."""
        ...

    def write(self, rows: Sequence[LineRow]) -> None:
        """In one transaction, the rows of the chunks that still hold the text hashed (a chunk deleted or
        replaced meanwhile gets none)."""
        ...

    def count(self) -> int:
        """Chunks (of this index's site) without line vectors."""
        ...


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, declared by it (callers ask this, never probe attributes).

    ``sites``: rows carry the site whose files they are, and searches may name sites.
    ``keyword_first``: chunks may be committed before their vectors (the vector backlog of
    a cold start). ``vector_rebuilds``: the vector structure is rebuilt by the owner
    (FAISS: the flat -> HNSW switch, compaction); pgvector maintains its index itself.
    ``line_cache``: the context excerpts' line vectors may be kept in the index's embedding
    cache (``MemoryIndex.open_line_store``).
    ``line_vectors``: each chunk's lines get vectors of their own, filled in after the chunk
    vectors (:mod:`memoryd.indexer.fill.line_vectors`), which the ranking reads.
    ``vectors_in_rows``: a chunk row carries its vector, taken from the cache in the row's own
    commit (pgvector): :meth:`VectorStore.add` is then needed only for the chunks committed
    without one (keyword first), not for every chunk committed (FAISS).
    """

    sites: bool
    keyword_first: bool
    vector_rebuilds: bool
    line_cache: bool
    line_vectors: bool
    vectors_in_rows: bool


EMBEDDED = Capabilities(sites=False, keyword_first=True, vector_rebuilds=True, line_cache=True,
                        line_vectors=True, vectors_in_rows=False)


class RebuildJob(Protocol):
    """A planned rebuild of a backend's vector structure (``Capabilities.vector_rebuilds``), as its
    owner runs it: planned under the lock, built on any thread without it, handed back."""

    kind: str
    reason: str
    vectors: int

    def build(self, should_stop: Callable[[], bool] = ..., on_batch: Callable[[int], None] | None = None) -> bool:
        ...


class Backend(Protocol):
    """One opened backend, as :class:`memoryd.indexer.engine.MemoryIndex` runs it: the storage parts,
    the query side, what it can do, and the hooks where backends differ (opening, the guard before a
    write, snapshots, upkeep, status, vector rebuilds, line rows, closing).

    Built before the index (:func:`memoryd.indexer.storage.factory.open_backend`); it owns the lock
    its commits and searches share (the legs read under it) and the vector backlog it recovered on
    opening (chunks committed without a vector). ``identity`` is what the stored rows were made with,
    as stored: opening checked it against the one it was given (and dropped or refused the rows)."""

    @property
    def store(self) -> ChunkStore: ...
    @property
    def cache(self) -> CacheStore: ...
    @property
    def vectors(self) -> VectorStore: ...
    @property
    def legs(self) -> SearchLegs: ...
    @property
    def capabilities(self) -> Capabilities: ...
    @property
    def lock(self) -> threading.Lock: ...
    @property
    def backlog(self) -> VectorBacklog: ...
    @property
    def site(self) -> str | None: ...  # this daemon's site in a shared database; None: one site
    @property
    def identity(self) -> dict[str, str]: ...

    def guard_write(self, roots: Iterable[Path]) -> list[Path]:
        """Before a write: make sure this process may still write (a shared database's locks), and
        return those of ``roots`` whose rows it may change now (raises StorageUnavailableError when away)."""
        ...

    def claim_root(self, root: Path) -> bool:
        """Whether this process may change ``root``'s rows (asked before removing a root no longer configured)."""
        ...

    def may_write(self, idle: bool = False) -> bool:
        """Whether this process writes at all now; ``idle``: also not while the storage was last found away
        (an idle step waits for a call that reaches it)."""
        ...

    def take_reconcile_wanted(self) -> bool:
        """True once when the rows changed under this process (a shared database re-indexed): reconcile now."""
        ...

    def scope(self, query: Query) -> Query:
        """The query as this backend runs it (which sites' rows a confined session may see)."""
        ...

    def save(self, force: bool = False) -> bool:
        """Make what is only in memory durable (snapshot, counters); whether anything was written."""
        ...

    def maintain(self, cache_evicted: int) -> dict[str, Any]:
        """The periodic upkeep after the cache was trimmed; what it did, for the log."""
        ...

    def status(self, skipped: Mapping[str, str], lines_pending: Callable[[], int | None]) -> IndexStatus:
        """The index's figures, safe from any thread; ``skipped`` files and the line backlog are the index's."""
        ...

    def line_rows(self) -> LineRows:
        """Where the chunks' line vectors are kept (asked only when ``capabilities.line_vectors``)."""
        ...

    def count_lines_pending(self) -> int:
        """Chunks without line vectors, counted off the writer's connection."""
        ...

    def open_line_store(self) -> LineStore | None:
        """The context excerpts' line cache on a connection of its own, or None; the caller closes it."""
        ...

    def set_background_rebuilds(self, on: bool) -> None: ...
    def rebuild_wanted(self) -> bool: ...
    def start_rebuild(self) -> RebuildJob | None: ...
    def finish_rebuild(self, job: RebuildJob) -> bool: ...
    def cancel_rebuild(self, job: RebuildJob) -> None: ...
    def close(self) -> None: ...


class StorageUnavailableError(StoreError):
    """The storage backend cannot be reached (a database down or unreachable); the message names
    it without credentials. Searches fail fast with it; files stay the source of truth.

    ``backend`` and ``where`` (the database, password-free) travel to the client as the
    JSON-RPC error's ``data``, so that a caller can tell this outage from any other error.
    """

    rpc_code: ClassVar[int] = -32031  # STORAGE_UNAVAILABLE (daemon/rpc/errors.py)

    def __init__(self, message: str, *, backend: str = "postgres", where: str = "") -> None:
        super().__init__(message)
        self.backend = backend
        self.where = where

    def data(self) -> dict[str, str]:
        """What a client is told besides the message (never the DSN itself)."""
        return {"backend": self.backend, "where": self.where}

    def rpc_data(self) -> dict[str, Any] | None:
        return dict(self.data())


class SiteLockedError(StoreError):
    """Another daemon already indexes this (site, root): exactly one may at a time."""


class SchemaTooNewError(StoreError):
    """The database was migrated by a newer memoryd: this one refuses to touch it."""
