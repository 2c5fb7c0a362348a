"""The storage interface as the index holds it: one opened backend (store, cache, vectors, query
legs) that declares what it can do, on both backends; no backend skips the index's constructor."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.base import EMBEDDED
from tests.helpers import CountingEmbedder
from tests.indexer.test_storage_backends import BACKENDS, CORPUS, FILTER, storage_config


@pytest.fixture(params=BACKENDS)
def opened(request: pytest.FixtureRequest, tmp_path: Path,
           monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path, MemoryIndex, list[str]]]:
    """An index of either backend over CORPUS, and a log of MemoryIndex.__init__ calls."""
    from memoryd.indexer.embedding.hash_embedder import HashEmbedder

    backend = str(request.param)
    dsn = request.getfixturevalue("pg_dsn") if backend == "postgres" else None
    root = tmp_path / "root"
    for rel, text in CORPUS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    inits: list[str] = []
    original = MemoryIndex.__init__

    def counted(self: MemoryIndex, *args: Any, **kw: Any) -> None:
        inits.append(type(self).__name__)
        original(self, *args, **kw)

    monkeypatch.setattr(MemoryIndex, "__init__", counted)
    idx = open_index(storage_config(backend, root, tmp_path / "data", dsn), CountingEmbedder(HashEmbedder(64)))
    yield backend, root, idx, inits
    idx.close()


def test_every_backend_runs_the_index_constructor_once(opened: Any) -> None:
    _, _, idx, inits = opened
    assert inits == [type(idx).__name__]  # the PostgreSQL index no longer re-sets the parent's attributes itself


def test_a_backend_declares_what_it_can_do(opened: Any) -> None:
    backend, root, idx, _ = opened
    caps = idx.capabilities
    assert caps == EMBEDDED if backend == "embedded" else (caps.sites and caps.keyword_first)
    assert (idx.site is not None) == caps.sites
    # keyword first on both: asked to defer, chunks are committed first and their vectors queued
    stats = idx.index_files([(root, rel) for rel in sorted(CORPUS)], defer_at=1)
    assert stats.files_indexed == len(CORPUS)
    assert (len(idx.backlog) > 0) == caps.keyword_first


def test_the_store_reads_rows_by_id_on_both_backends(opened: Any) -> None:
    """What the vector backlog reads its texts through (it used the SQLite connection directly)."""
    _, root, idx, _ = opened
    reconcile(idx, [root], FILTER)
    hits = idx.query(Query("violin", k=3, mode="keyword")).hits
    rows = idx.store.chunks([h.chunk_id for h in hits] + [10**9])
    assert set(rows) == {h.chunk_id for h in hits} and hits
    assert all(rows[h.chunk_id].text == h.text and rows[h.chunk_id].path == h.path for h in hits)
    assert {r.site for r in rows.values()} == {idx.site}  # None on the embedded index: one site
