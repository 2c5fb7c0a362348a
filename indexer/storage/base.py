"""The storage interface: what the index above storage uses, whatever the backend.

Three parts, each a :class:`typing.Protocol` so that the embedded backend's
classes implement it as they are (no adapter, no behaviour change) and a type
checker proves it (``tests/test_storage_interface.py``):

* :class:`ChunkStore`: meta and identity, roots, files, chunks and their
  keyword terms, and transactions (every file update is one transaction);
* :class:`CacheStore`: the embedding cache (text hash → vector), written in the
  store's transaction so that a chunk never exists without its vector;
* :class:`VectorStore`: nearest-neighbour search over the chunks' vectors.

Connections are typed ``Any`` on purpose: a transaction's connection is only
handed from the store to the cache of the *same* backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memoryd.indexer.errors import StoreError

if TYPE_CHECKING:
    import numpy as np

    from memoryd.indexer.rows import FileChange, FileRow, NewChunk
    from memoryd.indexer.types import FloatArray


class StorageUnavailableError(StoreError):
    """The storage backend cannot be reached (a database down or unreachable); the message names
    it without credentials. Searches fail fast with it; files stay the source of truth.

    ``backend`` and ``where`` (the database, password-free) travel to the client as the
    JSON-RPC error's ``data``, so that a caller can tell this outage from any other error.
    """

    def __init__(self, message: str, *, backend: str = "postgres", where: str = "") -> None:
        super().__init__(message)
        self.backend = backend
        self.where = where

    def data(self) -> dict[str, str]:
        """What a client is told besides the message (never the DSN itself)."""
        return {"backend": self.backend, "where": self.where}


class SiteLockedError(StoreError):
    """Another daemon already indexes this (site, root): exactly one may at a time."""


class SchemaTooNewError(StoreError):
    """The database was migrated by a newer memoryd: this one refuses to touch it."""


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

    def search(self, query: FloatArray, k: int) -> list[tuple[int, float]]: ...
    def scores_for(self, query: FloatArray, ids: Iterable[int]) -> dict[int, float]: ...
    def add(self, ids: Iterable[int], vectors: FloatArray) -> None: ...
    def remove(self, ids: Iterable[int]) -> int: ...
