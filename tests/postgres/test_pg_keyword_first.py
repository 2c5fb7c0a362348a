"""Keyword first on PostgreSQL (issue #31): chunks committed with a NULL embedding are keyword-searchable
at once, the vector leg skips them, the query path gives them the neutral cosine exactly as on the
embedded backend, ``status`` reports the backlog, the backlog's steps write the vectors
(``PgVectors.add``), and a restart finds the unfinished backlog in the database and resumes it.

The library tests run both backends side by side on the same files; the daemon test is
tests/daemon/test_keyword_first.py's main one on a real PostgreSQL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

import memoryd.indexer.embedding as embedding
from memoryd.daemon.app import Daemon
from memoryd.daemon.client.rpc_client import Client
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.query import Query
from tests.daemon.test_keyword_first import FILES, SECTIONS, WAIT_S, BulkGate, _all_found, _folder, _found
from tests.helpers import CountingEmbedder, ready, wait_for
from tests.indexer.test_storage_backends import CORPUS, FILTER, storage_config

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")


def _write(root: Path) -> None:
    for rel, text in CORPUS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")


def _open(backend: str, tmp_path: Path, dsn: str | None, emb: Any) -> MemoryIndex:
    return open_index(storage_config(backend, tmp_path / "root", tmp_path / f"data-{backend}", dsn), emb)


def _items(root: Path) -> list[tuple[Path, str]]:
    return [(root, rel) for rel in sorted(CORPUS)]


def _vectorless(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM memoryd_chunks WHERE embedding IS NULL").fetchone()
    assert row is not None
    return int(row[0])


@pytest.fixture
def pg(tmp_path: Path, pg_dsn: str) -> Iterator[tuple[MemoryIndex, CountingEmbedder, Path]]:
    """A PostgreSQL index over CORPUS, nothing indexed yet."""
    _write(tmp_path / "root")
    emb = CountingEmbedder(HashEmbedder(64))
    idx = _open("postgres", tmp_path, pg_dsn, emb)
    yield idx, emb, tmp_path / "root"
    idx.close()


def test_chunks_are_committed_before_their_vectors_and_found_by_keyword(pg: Any, pg_dsn: str) -> None:
    idx, emb, root = pg
    stats = idx.index_files(_items(root), defer_at=1)
    chunks = stats.chunks_added
    assert chunks > 0 and emb.embedded == 0  # not one vector computed
    assert _vectorless(pg_dsn) == chunks == len(idx.backlog)
    st = idx.status()
    assert st.index.vectors == 0 and st.vectors.pending == chunks
    assert idx.vectors.size == 0
    hits = idx.query(Query("violin", k=3, mode="keyword")).hits
    assert hits and "violin" in hits[0].text
    assert idx.query(Query("violin", k=3, mode="vector")).hits == []  # the vector leg skips NULL rows
    why = idx.query(Query("violin", k=3, mode="hybrid", explain=True))
    assert why.hits and why.explanations is not None and why.explanations[0].get("vector") == "pending"
    assert idx.fill_vectors(limit=10_000) == chunks
    assert _vectorless(pg_dsn) == 0 and not idx.backlog
    st = idx.status()
    assert st.index.vectors == chunks and st.vectors.pending == 0
    assert emb.embedded == chunks
    assert "violin" in idx.query(Query("Caroline plays the violin every evening", k=1, mode="vector")).hits[0].text


def test_a_restart_resumes_the_backlog_from_the_database(tmp_path: Path, pg_dsn: str) -> None:
    _write(tmp_path / "root")
    emb = CountingEmbedder(HashEmbedder(64))
    idx = _open("postgres", tmp_path, pg_dsn, emb)
    try:
        chunks = idx.index_files(_items(tmp_path / "root"), defer_at=1).chunks_added
        assert idx.fill_vectors(limit=2) == 2  # the process stops with the rest still pending
        pending = {i for i in idx.store.chunk_ids().tolist() if i in idx.backlog}
    finally:
        idx.close()
    assert _vectorless(pg_dsn) == chunks - 2
    again = CountingEmbedder(HashEmbedder(64))
    idx = _open("postgres", tmp_path, pg_dsn, again)
    try:
        assert len(idx.backlog) == chunks - 2  # found in the database, not re-indexed
        assert {i for i in idx.store.chunk_ids().tolist() if i in idx.backlog} == pending
        assert idx.status().vectors.pending == chunks - 2
        assert idx.fill_vectors(limit=10_000) == chunks - 2
        assert again.embedded == chunks - 2 and _vectorless(pg_dsn) == 0  # only the unfinished part embedded
    finally:
        idx.close()


def test_a_half_filled_backlog_ranks_as_on_the_embedded_backend(tmp_path: Path, pg_dsn: str) -> None:
    """Pending chunks get the candidates' mean cosine on both backends: the same hits, the same scores."""
    _write(tmp_path / "root")
    answers = {}
    for backend in ("embedded", "postgres"):
        idx = _open(backend, tmp_path, pg_dsn if backend == "postgres" else None, HashEmbedder(64))
        try:
            chunks = idx.index_files(_items(tmp_path / "root"), defer_at=1).chunks_added
            assert idx.fill_vectors(limit=chunks // 2) == chunks // 2
            res = idx.query(Query("who plays the violin and likes sushi", k=6, mode="hybrid", explain=True))
            assert res.explanations is not None
            answers[backend] = [(h.path, h.start_line, h.score, h.vector_score, why.get("vector"))
                                for h, why in zip(res.hits, res.explanations, strict=True)]
        finally:
            idx.close()
    assert any(row[4] == "pending" for row in answers["postgres"])  # the comparison covers pending chunks
    assert any(row[4] != "pending" for row in answers["postgres"])  # and ones with a vector
    assert answers["postgres"] == answers["embedded"]


def test_a_warm_index_writes_each_vector_with_its_row(pg: Any, pg_dsn: str) -> None:
    """Indexing without deferral writes each vector with its row (and not again through PgVectors.add,
    which would leave such a row alone anyway)."""
    idx, emb, root = pg
    calls: list[list[int]] = []
    real_add = idx.vectors.add
    idx.vectors.add = lambda ids, vectors: calls.append(list(ids))  # type: ignore[method-assign]
    reconcile(idx, [root], FILTER)
    idx.vectors.add = real_add  # type: ignore[method-assign]
    assert calls == []  # Capabilities.vectors_in_rows: the commit wrote them
    assert _vectorless(pg_dsn) == 0 and not idx.backlog and emb.embedded > 0
    ids = idx.store.chunk_ids().tolist()[:2]

    def stored() -> list[str]:
        with psycopg.connect(pg_dsn) as conn:
            return [str(r[0]) for r in conn.execute(
                "SELECT embedding::text FROM memoryd_chunks WHERE id = ANY(%s) ORDER BY id", (ids,))]

    before = stored()
    idx.vectors.add(ids, np.zeros((2, 64), dtype=np.float32))
    assert stored() == before and len(before) == 2


def _on_postgres(cfg: Any, dsn: str) -> Any:
    return dataclasses.replace(cfg, storage=dataclasses.replace(cfg.storage, backend="postgres", dsn=dsn,
                                                                sslmode="disable"))


@pytest.mark.slow
def test_a_daemon_on_postgres_is_keyword_searchable_before_any_vector(
        tmp_path: Path, short_dir: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.helpers import make_config

    root = tmp_path / "root"
    root.mkdir()
    words = _folder(root)
    real = embedding.load_embedder
    gates: list[BulkGate] = []

    def gated(*args: Any, **kwargs: Any) -> BulkGate:
        gates.append(BulkGate(real(*args, **kwargs)))
        return gates[-1]

    monkeypatch.setattr(embedding, "load_embedder", gated)
    cfg = _on_postgres(make_config(root, tmp_path / "data", debounce_ms=50, max_delay_ms=500), pg_dsn)
    cfg = dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, socket=short_dir / "pgkw.sock"))
    d = Daemon(cfg, env={})
    d.startup()
    client = Client(cfg.socket_path, timeout=WAIT_S)
    try:
        gate = gates[-1]
        wait_for(lambda: _all_found(client, words), WAIT_S, "every file keyword-searchable")
        st = client.call("status")
        assert gate.computed == 0  # not one vector computed: the model is held
        assert st["files"] == FILES and st["chunks"] == FILES * SECTIONS
        assert st["index"]["vectors"] == 0 and st["vectors"]["pending"] == FILES * SECTIONS
        assert st["reconciling"] and not st["fresh"]
        assert _vectorless(pg_dsn) == FILES * SECTIONS
        gate.open()
        wait_for(lambda: ready(client), WAIT_S, "the vectors filled in")
        st = client.call("status")
        assert st["index"]["vectors"] == FILES * SECTIONS and st["vectors"]["pending"] == 0
        assert gate.computed == FILES * SECTIONS and _vectorless(pg_dsn) == 0
        assert _found(client, words[7], mode="vector")
    finally:
        for g in gates:
            g.open()
        client.close()
        d.shutdown()


def test_migration_5_lets_an_existing_database_take_keyword_first_chunks(tmp_path: Path, pg_dsn: str) -> None:
    from memoryd.indexer.storage.postgres import connect, schema

    _write(tmp_path / "root")
    idx = _open("postgres", tmp_path, pg_dsn, HashEmbedder(64))
    try:
        reconcile(idx, [tmp_path / "root"], FILTER)
        chunks = idx.status().chunks
    finally:
        idx.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn, conn.transaction():  # back to how schema 4 left it
        conn.execute("DROP INDEX memoryd_chunks_vectorless")
        conn.execute("ALTER TABLE memoryd_chunks ALTER COLUMN embedding SET NOT NULL")
        conn.execute("UPDATE memoryd_meta SET value = '4' WHERE key = 'schema_version'")
    assert connect.prepare(pg_dsn, "disable") == 4 and schema.SCHEMA_VERSION >= 5
    (tmp_path / "root" / "new.md").write_text("# New\n\nThe harbour opens at dawn.\n", encoding="utf-8")
    idx = _open("postgres", tmp_path, pg_dsn, HashEmbedder(64))
    try:
        assert idx.status().index.vectors == chunks  # the rows kept their vectors
        assert idx.index_files([(tmp_path / "root", "new.md")], defer_at=1).chunks_added == 1
        assert _vectorless(pg_dsn) == 1 and idx.query(Query("harbour", k=1, mode="keyword")).hits
    finally:
        idx.close()
