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
(:mod:`memoryd.indexer.search.legs`) and the :class:`Capabilities` it declares.
:class:`memoryd.indexer.engine.MemoryIndex` holds one and is typed against these
Protocols only. The storage errors every backend raises live here too.

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
    import numpy as np

    from memoryd.indexer.search.legs import SearchLegs
    from memoryd.indexer.storage.rows import ChunkRow, FileChange, FileRow, NewChunk
    from memoryd.indexer.types import FloatArray

__all__ = ["EMBEDDED", "LINE_WAIT_MS", "Backend", "CacheStore", "Capabilities", "ChunkStore", "LineStore",
           "SchemaTooNewError", "SiteLockedError", "StorageUnavailableError", "VectorStore"]

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


@dataclass(frozen=True)
class Backend:
    """One opened backend, as :class:`memoryd.indexer.engine.MemoryIndex` holds it: the three
    storage parts, the query side (:mod:`memoryd.indexer.search.legs`) and its capabilities."""

    store: ChunkStore
    cache: CacheStore
    vectors: VectorStore
    legs: SearchLegs
    capabilities: Capabilities


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
