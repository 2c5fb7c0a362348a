"""The composition root of storage: the index for ``cfg.storage.backend``.

Its own module (not the package's ``__init__``) so that a module of the storage package,
imported by the index, never runs an import of the index back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memoryd.indexer.config import Config
    from memoryd.indexer.engine import MemoryIndex
    from memoryd.indexer.types import Embedder

__all__ = ["open_index"]


def open_index(cfg: Config, embedder: Embedder, read_only: bool = False,
               background_rebuilds: bool = False) -> MemoryIndex:
    """The :class:`~memoryd.indexer.engine.MemoryIndex` for ``cfg.storage.backend``.

    The PostgreSQL backend is imported only when chosen (its drivers are an extra).
    ``background_rebuilds`` (the daemon) also lets it start while its database is away.
    """
    if cfg.storage.backend == "postgres":
        from memoryd.indexer.storage.postgres.index import PgMemoryIndex

        return PgMemoryIndex(cfg, embedder, read_only=read_only, background_rebuilds=background_rebuilds)
    from memoryd.indexer.engine import MemoryIndex

    return MemoryIndex(cfg, embedder, read_only=read_only, background_rebuilds=background_rebuilds)
