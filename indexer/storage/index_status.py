"""The index's own figures, typed: :class:`IndexStatus` and its parts.

Both backends' ``status()`` return one (:meth:`memoryd.indexer.engine.MemoryIndex.status`,
:meth:`memoryd.indexer.storage.postgres.backend.PostgresBackend.status`); the daemon spreads
:meth:`IndexStatus.to_json` into its ``status`` answer after ``uptime_s``. That wire shape is
a contract (the CLI, the MCP server, the editor hooks and scripts read it), and it is not the
same on both backends: the PostgreSQL index reports fewer model and cache figures, and its
``storage`` block comes before ``skipped`` and ``vectors`` where the embedded one's comes last.
Each ``to_json`` writes its keys in the order that backend has always answered in, so the
types change nothing a client sees.

The backend's own ``storage`` block is a :class:`StorageStatus`: :class:`EmbeddedStorage`
here, the PostgreSQL one in :mod:`memoryd.indexer.storage.postgres.status` (this module knows
nothing of PostgreSQL).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class ModelStatus:
    """The embedding model: its id, vector width and query precision. ``passages``, ``provider`` and
    ``server`` (an embedding server's health, its own shape) are written only when set: the
    PostgreSQL index has never reported them."""

    id: str
    dim: int
    queries: str
    passages: str | None = None
    provider: str | None = None
    server: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "dim": self.dim, "queries": self.queries}
        if self.passages is not None:
            out["passages"] = self.passages
        if self.provider is not None:
            out["provider"] = self.provider
        if self.server is not None:
            out["server"] = dict(self.server)
        return out


@dataclass(frozen=True)
class CacheStatus:
    """The embedding cache: stored entries (None: never read, the database away since start-up),
    this process's hits and misses, and its bound."""

    entries: int | None
    hits: int
    misses: int
    capacity: int

    def to_json(self) -> dict[str, Any]:
        return {"entries": self.entries, "hits": self.hits, "misses": self.misses, "capacity": self.capacity}


@dataclass(frozen=True)
class LocalCacheStatus(CacheStatus):
    """The embedded index's cache, which also says where the machine-wide cache file is (None: none)."""

    machine: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "machine": self.machine}


@dataclass(frozen=True)
class VectorIndexStatus:
    """The vector index: its kind (``flat``, ``hnsw``, ``pgvector-hnsw``), the vectors it holds (None:
    never read), deleted ones it still carries, and the kind a background rebuild is making (None: none)."""

    type: str
    vectors: int | None
    tombstones: int
    rebuilding: str | None

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "vectors": self.vectors, "tombstones": self.tombstones,
                "rebuilding": self.rebuilding}


@dataclass(frozen=True)
class SkippedFile:
    """A file the index does not hold, and why (until it is indexed or removed)."""

    path: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True)
class BacklogProgress:
    """Keyword-first indexing: chunks still waiting for their vector, the rate they get them and the
    time left (None while not measurable)."""

    pending: int
    per_s: float | None
    eta_s: float | None

    @classmethod
    def from_progress(cls, progress: Mapping[str, Any]) -> BacklogProgress:
        """From :meth:`memoryd.indexer.fill.backlog.Backlog.progress`."""
        return cls(int(progress["pending"]), progress.get("per_s"), progress.get("eta_s"))

    def to_json(self) -> dict[str, Any]:
        return {"pending": self.pending, "per_s": self.per_s, "eta_s": self.eta_s}


class StorageStatus(ABC):
    """Where the index lives, a block each backend describes in its own terms.

    ``leads``: whether the block comes before ``skipped`` and ``vectors`` in :meth:`IndexStatus.to_json`
    (the PostgreSQL index's order) or after them (the embedded one's)."""

    leads: ClassVar[bool] = False

    @abstractmethod
    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class EmbeddedStorage(StorageStatus):
    """The embedded index: its data directory, always reachable. The keys ``backend``, ``where`` and
    ``reachable`` are those the PostgreSQL block has too, so a client can tell which one answers."""

    where: str

    def to_json(self) -> dict[str, Any]:
        return {"backend": "embedded", "where": self.where, "reachable": True}


@dataclass(frozen=True)
class IndexStatus:
    """The index's figures for ``status``. ``files`` and ``chunks`` are this site's (None: never read,
    the database away since start-up)."""

    files: int | None
    chunks: int | None
    model: ModelStatus
    cache: CacheStatus
    index: VectorIndexStatus
    skipped: tuple[SkippedFile, ...]
    vectors: BacklogProgress
    storage: StorageStatus
    line_vectors_pending: int | None = None  # chunks still without line vectors; None: the backend keeps none

    def to_json(self) -> dict[str, Any]:
        """The wire form, key for key in the order this backend's clients have always seen; a backend
        with line vectors adds ``line_vectors: {pending}`` last."""
        head = {"files": self.files, "chunks": self.chunks, "model": self.model.to_json(),
                "cache": self.cache.to_json(), "index": self.index.to_json()}
        tail = {"skipped": [s.to_json() for s in self.skipped], "vectors": self.vectors.to_json()}
        storage = {"storage": self.storage.to_json()}
        out = {**head, **storage, **tail} if self.storage.leads else {**head, **tail, **storage}
        if self.line_vectors_pending is not None:
            out["line_vectors"] = {"pending": self.line_vectors_pending}
        return out


def skipped_files(skipped: Mapping[str, str]) -> tuple[SkippedFile, ...]:
    """An index's ``path -> reason`` map of skipped files, sorted by path."""
    return tuple(SkippedFile(path, reason) for path, reason in sorted(skipped.items()))
