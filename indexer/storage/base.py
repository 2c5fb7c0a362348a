"""The storage errors every backend raises, and the storage interface re-exported.

The interface itself (the Protocols, :class:`Capabilities`, :class:`Backend`) lives in
:mod:`memoryd.indexer.backend`, outside this package, so that the index can name it
without running this package's ``__init__`` (whose ``open_index`` imports the index).
"""

from __future__ import annotations

from typing import Any, ClassVar

from memoryd.indexer.backend import EMBEDDED, Backend, CacheStore, Capabilities, ChunkStore, VectorStore
from memoryd.indexer.errors import StoreError

__all__ = ["EMBEDDED", "Backend", "CacheStore", "Capabilities", "ChunkStore", "SchemaTooNewError", "SiteLockedError",
           "StorageUnavailableError", "VectorStore"]


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
