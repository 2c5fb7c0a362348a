"""Storage backends behind one interface (:mod:`memoryd.indexer.storage.base`).

``embedded`` (the default) is SQLite + FTS5 + FAISS in the data directory:
:class:`memoryd.indexer.store.Store`, :class:`memoryd.indexer.cache.EmbeddingCache`
and :class:`memoryd.indexer.vectors.VectorIndex` implement the interface as they
are. ``postgres`` (:mod:`memoryd.indexer.storage.postgres`) keeps the same rows in
PostgreSQL + pgvector, shared by several daemons ("sites").
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memoryd.indexer.config import Config
    from memoryd.indexer.engine import MemoryIndex
    from memoryd.indexer.types import Embedder


def site_id(configured: str, data_dir: Path, hostname: str | None = None) -> str:
    """This daemon's site id in a shared database: the configured one, else ``host:data_dir``.

    The data directory is part of the default so that two daemons on one machine
    (two data dirs) are two sites, and the host name so that the same path on two
    machines never collides.
    """
    if configured:
        return configured
    return f"{hostname or socket.gethostname()}:{data_dir}"


def open_index(cfg: Config, embedder: Embedder, read_only: bool = False,
               background_rebuilds: bool = False) -> MemoryIndex:
    """The :class:`~memoryd.indexer.engine.MemoryIndex` for ``cfg.storage.backend``.

    The PostgreSQL backend is imported only when chosen (its drivers are an extra).
    """
    if cfg.storage.backend == "postgres":
        from memoryd.indexer.storage.postgres.index import PgMemoryIndex

        return PgMemoryIndex(cfg, embedder, read_only=read_only)
    from memoryd.indexer.engine import MemoryIndex

    return MemoryIndex(cfg, embedder, read_only=read_only, background_rebuilds=background_rebuilds)
