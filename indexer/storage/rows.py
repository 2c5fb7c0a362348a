"""The rows every storage backend reads and writes, in no backend's module.

:mod:`memoryd.indexer.storage.embedded.store` (SQLite) and :mod:`memoryd.indexer.storage.postgres`
both produce and take these; the search pipeline, the ingest step and the storage
Protocols (:mod:`memoryd.indexer.storage.base`) name them without importing either
backend. Pure dataclasses: no imports beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FileRow:
    id: int
    root_id: int
    path: str
    size: int
    mtime_ns: int
    sha256: str


@dataclass(frozen=True)
class ChunkRow:
    """A stored chunk as a query reads it; ``site`` is the site whose file it is (PostgreSQL; None:
    the embedded index), so that the same root and path on two sites never merge into one hit."""

    id: int
    root: str
    path: str
    start_line: int
    end_line: int
    heading: str
    text: str
    mtime_ns: int = 0
    site: str | None = None


@dataclass(frozen=True)
class NewChunk:
    """A chunk about to be stored: its place, text, hash and cache key, and FTS terms."""

    start_line: int
    end_line: int
    heading: str
    text: str
    sha256: str
    embed_key: bytes
    terms: str


@dataclass(frozen=True)
class FileChange:
    """What a file replacement did to the chunk set (for the vector index)."""

    added: list[tuple[int, bytes]]  # (chunk id, embed key)
    removed: list[int]
    kept: int
