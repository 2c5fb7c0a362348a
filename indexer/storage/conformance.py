"""Proof, checked by the type checker (``make lint``), that both backends implement the interface:
their parts and their runtime (:class:`~memoryd.indexer.storage.base.Backend`).

Never imported at run time: mypy (strict) verifies that each backend's classes are
accepted where :mod:`memoryd.indexer.storage.base`'s Protocols are expected, so a
method renamed or re-typed on one side fails the lint, not a user.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memoryd.indexer.storage.base import Backend, CacheStore, ChunkStore, VectorStore
    from memoryd.indexer.storage.embedded.backend import EmbeddedBackend
    from memoryd.indexer.storage.embedded.cache import EmbeddingCache
    from memoryd.indexer.storage.embedded.store import Store
    from memoryd.indexer.storage.embedded.vectors import VectorIndex
    from memoryd.indexer.storage.postgres.backend import PostgresBackend
    from memoryd.indexer.storage.postgres.cache import PgEmbeddingCache
    from memoryd.indexer.storage.postgres.search import PgVectors
    from memoryd.indexer.storage.postgres.store import PgStore

    def embedded(store: Store, cache: EmbeddingCache,
                 vectors: VectorIndex) -> tuple[ChunkStore, CacheStore, VectorStore]:
        return store, cache, vectors

    def postgres(store: PgStore, cache: PgEmbeddingCache,
                 vectors: PgVectors) -> tuple[ChunkStore, CacheStore, VectorStore]:
        return store, cache, vectors

    def runtimes(embedded: EmbeddedBackend, postgres: PostgresBackend) -> tuple[Backend, Backend]:
        return embedded, postgres
