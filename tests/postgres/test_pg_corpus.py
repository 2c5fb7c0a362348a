"""BM25's corpus counts on PostgreSQL (schema 3): every write keeps them exact, migration 3 builds them,
and a daemon older than schema 3 (which would not keep them) stops writing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.errors import StoreError
from memoryd.indexer.ingestion.identity import rows_identity
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.postgres import connect, corpus, schema
from memoryd.indexer.storage.postgres.backend import PostgresBackend
from tests.indexer.test_storage_backends import storage_config
from tests.postgres.test_pg_backend import FILTER, dialogue, write_corpus


def counts_drift(dsn: str) -> dict[str, Any]:
    """Where the kept counts differ from a recount of the postings and chunks (empty: exact)."""
    with psycopg.connect(dsn) as conn:
        real = {str(t): int(n) for t, n in conn.execute("SELECT term, count(*) FROM memoryd_postings GROUP BY term")}
        kept = {str(t): int(n) for t, n in conn.execute("SELECT term, df FROM memoryd_terms WHERE df <> 0")}
        totals = conn.execute("SELECT chunks, terms FROM memoryd_totals").fetchone()
        recount = conn.execute("SELECT count(*), coalesce(sum(n_terms), 0) FROM memoryd_chunks").fetchone()
    drift: dict[str, Any] = {t: (kept.get(t), real.get(t)) for t in real.keys() | kept.keys()
                             if kept.get(t) != real.get(t)}
    if tuple(totals or ()) != tuple(recount or ()):
        drift["<totals>"] = (totals, recount)
    return drift


def test_every_kind_of_write_keeps_the_counts_exact(pg_dsn: str, tmp_path: Path) -> None:
    root_a = write_corpus(tmp_path / "a", {"talk.md": dialogue(30, 3)})
    root_b = write_corpus(tmp_path / "b")
    a = open_index(storage_config("postgres", root_a, tmp_path / "da", pg_dsn, site="a"), HashEmbedder(64))
    b = open_index(storage_config("postgres", root_b, tmp_path / "db", pg_dsn, site="b"), HashEmbedder(64))
    try:
        reconcile(a, [root_a], FILTER)
        reconcile(b, [root_b], FILTER)
        assert counts_drift(pg_dsn) == {}
        (root_a / "talk.md").write_text(dialogue(40, 5), encoding="utf-8")  # some chunks kept, some replaced
        a.index_files([(root_a, "talk.md")])
        assert counts_drift(pg_dsn) == {}
        (root_a / "MEMORY.md").rename(root_a / "memory" / "2023-05-01.md")  # a move onto an indexed file
        assert a.move_file(root_a, "MEMORY.md", root_a, "memory/2023-05-01.md")
        assert counts_drift(pg_dsn) == {}
        (root_a / "talk.md").unlink()
        assert a.remove_file(root_a, "talk.md") > 0
        assert counts_drift(pg_dsn) == {}
        with psycopg.connect(pg_dsn) as conn:
            before = corpus.totals(conn)
        a.backend.pg.forget_everything()  # site a's rows go, site b's stay
        with psycopg.connect(pg_dsn) as conn:
            after = corpus.totals(conn)
            b_chunks = conn.execute("SELECT count(*) FROM memoryd_chunks").fetchone()
        assert counts_drift(pg_dsn) == {} and b_chunks is not None and after[0] == b_chunks[0] > 0
        assert after[3] > before[3]  # every write bumps the counter that searches check
        b.backend.pg.reset_all_sites(json.dumps(b.identity(), sort_keys=True), drop_cache=False)
        assert counts_drift(pg_dsn) == {}
    finally:
        a.close()
        b.close()


def test_search_reads_the_kept_counts_not_the_postings(pg_dsn: str, tmp_path: Path) -> None:
    root = write_corpus(tmp_path / "root")
    idx = open_index(storage_config("postgres", root, tmp_path / "data", pg_dsn), HashEmbedder(64))
    try:
        reconcile(idx, [root], FILTER)
        seen: list[str] = []
        original = psycopg.Connection.execute

        def execute(self: psycopg.Connection[Any], sql: Any, params: Any = None, **kw: Any) -> Any:
            seen.append(str(sql))
            return original(self, sql, params, **kw)

        psycopg.Connection.execute = execute  # type: ignore[method-assign,assignment]
        try:
            res = idx.query(Query("pgvector memory", k=3, mode="keyword"))
        finally:
            psycopg.Connection.execute = original  # type: ignore[method-assign]
    finally:
        idx.close()
    assert res.hits
    assert any("FROM memoryd_terms" in s for s in seen)
    assert not any("count(" in s and "memoryd_postings" in s for s in seen)  # no term is counted at query time


def test_migration_3_counts_an_existing_corpus_and_fences_older_writers(pg_dsn: str, tmp_path: Path) -> None:
    root = write_corpus(tmp_path / "root", {"talk.md": dialogue(20, 2)})
    idx = open_index(storage_config("postgres", root, tmp_path / "data", pg_dsn), HashEmbedder(64))
    try:
        reconcile(idx, [root], FILTER)
    finally:
        idx.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn, conn.transaction():  # back to how schema 2 left it
        conn.execute("DROP TABLE memoryd_terms, memoryd_totals")
        conn.execute("UPDATE memoryd_meta SET value = '2' WHERE key = 'schema_version'")
        conn.execute("UPDATE memoryd_meta SET value = (value::jsonb - 'pg_writers')::text WHERE key = 'identity'")
        generation = conn.execute("SELECT value FROM memoryd_meta WHERE key = %s", (schema.GENERATION_KEY,)).fetchone()
    assert connect.prepare(pg_dsn, "disable") == 2
    assert counts_drift(pg_dsn) == {}
    with psycopg.connect(pg_dsn) as conn:
        meta = dict(conn.execute("SELECT key, value FROM memoryd_meta").fetchall())
    assert json.loads(meta["identity"])["pg_writers"] == corpus.WRITERS_SINCE
    assert f'"pg_writers": "{corpus.WRITERS_SINCE}"' in schema.FENCE_OLDER_WRITERS
    assert generation is not None and int(meta[schema.GENERATION_KEY]) == int(generation[0]) + 1


class OldWriter(PostgresBackend):
    """A daemon of schema 2: its identity has no ``pg_writers`` (it does not keep the counts)."""

    def stored_identity(self, rows: dict[str, str]) -> dict[str, str]:
        return {k: v for k, v in super().stored_identity(rows).items() if k != "pg_writers"}


def test_a_daemon_older_than_the_counts_stops_writing_when_a_newer_one_migrates(pg_dsn: str, tmp_path: Path) -> None:
    root = write_corpus(tmp_path / "root")
    cfg, emb = storage_config("postgres", root, tmp_path / "data", pg_dsn, site="old"), HashEmbedder(64)
    old = MemoryIndex(cfg, emb, OldWriter(cfg, emb, rows_identity(cfg, emb)))
    try:
        reconcile(old, [root], FILTER)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:  # what migration 3 does to the meta rows
            conn.execute(schema.FENCE_OLDER_WRITERS)
        (root / "late.md").write_text("# Late\n\nWritten without the counts.\n", encoding="utf-8")
        stats = old.index_files([(root, "late.md")])
        assert stats.files_indexed == 0  # refused: it would have left the counts wrong
        why = old.status().storage.to_json()["identity_changed"]
        assert why is not None and "pg_writers" in why and "upgrade memoryd" in why
    finally:
        old.close()
    assert counts_drift(pg_dsn) == {}


def test_a_read_only_open_of_an_older_schema_says_to_migrate_it_first(pg_dsn: str, tmp_path: Path) -> None:
    root = write_corpus(tmp_path / "root")
    cfg = storage_config("postgres", root, tmp_path / "data", pg_dsn)
    idx = open_index(cfg, HashEmbedder(64))
    idx.close()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE memoryd_meta SET value = '2' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match=r"schema version 2.*start an upgraded daemon"):
        open_index(cfg, HashEmbedder(64), read_only=True)  # no migration, and no advice to drop every chunk
