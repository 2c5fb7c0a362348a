"""The PostgreSQL index's ``storage`` block of ``status``, typed (:class:`PgStorage`).

Two kinds of figure meet here: what the index knows without the database (reachability
and since when, the last error, the (site, root) locks, why it writes nothing) is always
current; what it reads from the database (the sites, every site's files and chunks) is
the last read, and absent until the database first answered (:class:`PgFigures`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memoryd.indexer.storage.base import CacheStore
from memoryd.indexer.storage.index_status import (
    BacklogProgress,
    CacheStatus,
    IndexStatus,
    ModelStatus,
    SkippedFile,
    StorageStatus,
    VectorIndexStatus,
)
from memoryd.indexer.storage.postgres import sites
from memoryd.indexer.storage.postgres.sites import SiteInfo
from memoryd.indexer.storage.postgres.store import PgStore
from memoryd.indexer.types import Embedder


@dataclass(frozen=True)
class LostRoot:
    """A root this daemon may not write: its lock went to another daemon, or writes are refused."""

    root: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {"root": self.root, "why": self.why}


@dataclass(frozen=True)
class SiteLocks:
    """The (site, root) locks: the roots held, and those lost (sorted by path)."""

    held: tuple[str, ...]
    lost: tuple[LostRoot, ...]

    def to_json(self) -> dict[str, Any]:
        return {"held": list(self.held), "lost": [r.to_json() for r in self.lost]}


@dataclass(frozen=True)
class PgFigures:
    """What the database held at the last read: how many sites have roots, every site's files and
    chunks, and each site's record (``memoryd sites list``)."""

    sites: int
    all_files: int
    all_chunks: int
    all_sites: tuple[SiteInfo, ...]

    def to_json(self) -> dict[str, Any]:
        return {"sites": self.sites, "all_files": self.all_files, "all_chunks": self.all_chunks,
                "all_sites": [s.to_json() for s in self.all_sites]}


@dataclass(frozen=True)
class PgStorage(StorageStatus):
    """The shared database as this daemon sees it. ``database`` is written twice, also as ``where``
    (the key every backend's block has); ``error`` is the last error while unreachable, None while
    reachable, where ``last_error`` keeps it. ``figures``: None until the database first answered."""

    leads = True  # the block comes before ``skipped`` and ``vectors`` (see IndexStatus.to_json)

    database: str
    site: str
    reachable: bool
    last_error: str | None
    since: str  # UTC ISO-8601: when ``reachable`` last changed
    identity_changed: str | None
    refused: str | None
    locks: SiteLocks
    figures: PgFigures | None = None

    def to_json(self) -> dict[str, Any]:
        figures = self.figures.to_json() if self.figures is not None else {}
        return {"backend": "postgres", "database": self.database, "site": self.site, "reachable": self.reachable,
                **figures, "where": self.database, "error": None if self.reachable else self.last_error,
                "identity_changed": self.identity_changed, "refused": self.refused,
                "last_error": self.last_error, "since": self.since, "locks": self.locks.to_json()}


def read_figures(pg: PgStore) -> tuple[PgFigures, int, int]:
    """What the database holds now: the figures, the cache's entries, and every site's chunks with a
    vector (a chunk committed keyword first has none yet). Raises StorageUnavailableError when away."""
    with pg.connection() as c:
        row = c.execute("SELECT (SELECT count(*) FROM memoryd_files), (SELECT count(*) FROM memoryd_chunks),"
                        " (SELECT count(*) FROM memoryd_embed_cache),"
                        " (SELECT count(DISTINCT site) FROM memoryd_roots),"
                        " (SELECT count(*) FROM memoryd_chunks WHERE embedding IS NULL)").fetchone()
    assert row is not None
    with pg.connection() as c:
        all_sites = tuple(sites.list_sites(c))
    figures = PgFigures(sites=int(row[3]), all_files=int(row[0]), all_chunks=int(row[1]), all_sites=all_sites)
    return figures, int(row[2]), int(row[1]) - int(row[4])


def index_status(embedder: Embedder, cache: CacheStore, files: int | None, chunks: int | None, entries: int | None,
                 vectors: int | None, storage: PgStorage, *, skipped: tuple[SkippedFile, ...],
                 backlog: BacklogProgress) -> IndexStatus:
    """The PostgreSQL index's :class:`IndexStatus` (fewer model and cache figures than the embedded one's)."""
    return IndexStatus(
        files=files, chunks=chunks,
        model=ModelStatus(embedder.model_id, embedder.dimension, getattr(embedder, "query_precision", "exact")),
        cache=CacheStatus(entries, cache.hits, cache.misses, cache.capacity),
        index=VectorIndexStatus("pgvector-hnsw", vectors, tombstones=0, rebuilding=None),
        skipped=skipped, vectors=backlog, storage=storage)
