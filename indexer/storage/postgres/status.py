"""The PostgreSQL index's ``storage`` block of ``status``, typed (:class:`PgStorage`).

Two kinds of figure meet here: what the index knows without the database (reachability
and since when, the last error, the (site, root) locks, why it writes nothing) is always
current; what it reads from the database (the sites, every site's files and chunks) is
the last read, and absent until the database first answered (:class:`PgFigures`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memoryd.indexer.storage.index_status import StorageStatus
from memoryd.indexer.storage.postgres.sites import SiteInfo


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
