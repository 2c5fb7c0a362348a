"""The composition root of storage: the backend ``cfg.storage.backend`` names, opened.

:func:`memoryd.indexer.engine.open_index` calls it and builds the index over what it returns; nothing
else names a backend's class. A backend's package is imported only when chosen (the PostgreSQL
drivers are an extra). Adding a backend: its package under ``storage/``, one branch here, its
name in ``[storage] backend`` (docs/backends.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memoryd.indexer.config import Config
    from memoryd.indexer.storage.base import Backend
    from memoryd.indexer.types import Embedder

__all__ = ["open_backend"]


def open_backend(cfg: Config, embedder: Embedder, identity: dict[str, str], *, read_only: bool = False,
                 background_rebuilds: bool = False, reindex: bool = False, pool: Any = None) -> Backend:
    """Open the configured backend for rows of ``identity`` (what this memoryd makes them with).

    ``background_rebuilds``: the caller is the daemon (it has threads for background work: vector
    rebuilds off the writing thread; a shared database may be away at start). ``reindex``: when the
    stored identity differs, drop the rows instead of refusing (a shared database refuses by default;
    the embedded index always drops its own). ``pool``: an open PostgreSQL connection pool to reuse (tests).
    """
    if cfg.storage.backend == "postgres":
        from memoryd.indexer.storage.postgres.backend import PostgresBackend

        return PostgresBackend(cfg, embedder, identity, read_only=read_only, background_rebuilds=background_rebuilds,
                               pool=pool, reindex=reindex)
    from memoryd.indexer.storage.embedded.backend import EmbeddedBackend

    return EmbeddedBackend(cfg, embedder, identity, read_only=read_only, background_rebuilds=background_rebuilds)
