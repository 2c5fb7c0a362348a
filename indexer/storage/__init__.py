"""Storage backends behind one interface (:mod:`memoryd.indexer.storage.base`).

``embedded`` (the default) is SQLite + FTS5 + FAISS in the data directory:
:class:`memoryd.indexer.store.Store`, :class:`memoryd.indexer.cache.EmbeddingCache`
and :class:`memoryd.indexer.vectors.VectorIndex` implement the interface as they
are. ``postgres`` (:mod:`memoryd.indexer.storage.postgres`) keeps the same rows in
PostgreSQL + pgvector, shared by several daemons ("sites").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memoryd.indexer.storage.site import SITE_FILE, foreign_site, site_id

if TYPE_CHECKING:
    from memoryd.indexer.config import Config
    from memoryd.indexer.engine import MemoryIndex
    from memoryd.indexer.types import Embedder

__all__ = ["SITE_FILE", "foreign_site", "open_index", "site_id"]


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
