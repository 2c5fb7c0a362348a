"""What keeps a PostgreSQL search cheap at 100k chunks: the session settings, the postings key that
BM25 reads alone, corpus figures read again only after a change, and the keyword leg running while
the query's embedding is computed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.postgres import connect, schema
from memoryd.indexer.storage.postgres.search import StatsCache
from tests.indexer.test_storage_backends import storage_config
from tests.postgres.test_pg_backend import FILTER, write_corpus


def _session_settings(dsn: str, *names: str) -> tuple[str, ...]:
    """The values a pooled session of memoryd's runs with."""
    pool = connect.open_pool(dsn, "disable")
    try:
        with pool.connection() as conn:
            row = conn.execute("SELECT " + ", ".join(f"current_setting('{n}')" for n in names)).fetchone()
    finally:
        pool.close()
    assert row is not None
    return tuple(str(v) for v in row)


def test_sessions_run_without_jit(pg_dsn: str) -> None:
    connect.prepare(pg_dsn, "disable")
    assert _session_settings(pg_dsn, "jit", "hnsw.ef_search") == ("off", str(schema.EF_SEARCH))


def test_the_search_breadth_grows_with_the_table_as_the_embedded_index_s_does(pg_dsn: str) -> None:
    assert [schema.session_ef_search(n) for n in (0, 100_000, 300_000, 5_000_000)] == [128, 128, 300, 1000]
    connect.prepare(pg_dsn, "disable")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE memoryd_totals SET chunks = 500000")  # as the writes would have counted them
    assert _session_settings(pg_dsn, "hnsw.ef_search") == ("500",)


def test_a_version_1_database_keeps_its_postings_and_bm25_reads_only_the_index(pg_dsn: str) -> None:
    # a database as the first schema left it, with one chunk and its postings
    with psycopg.connect(pg_dsn, autocommit=True) as conn, conn.transaction():
        conn.execute(schema.MIGRATIONS[0])
        conn.execute("CREATE TABLE memoryd_meta (key text PRIMARY KEY, value text NOT NULL)")
        conn.execute("INSERT INTO memoryd_meta VALUES ('schema_version', '1')")
        conn.execute("INSERT INTO memoryd_roots (site, path) VALUES ('s', '/r')")
        conn.execute("INSERT INTO memoryd_files (root_id, path, size, mtime_ns, sha256)"
                     " VALUES (1, 'a.md', 1, 1, 'x')")
        conn.execute("INSERT INTO memoryd_chunks (file_id, start_line, end_line, heading, text, sha256, embed_key,"
                     " terms, n_terms, embedding) VALUES (1, 1, 1, '', 'violin', 'x', 'k', 'violin', 1, '[1,0]')")
        conn.execute("INSERT INTO memoryd_postings VALUES ('violin', 1, 3, 7)")
    assert connect.prepare(pg_dsn, "disable") == 1
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SELECT term, chunk_id, tf, dl FROM memoryd_postings").fetchall() == [("violin", 1, 3, 7)]
        conn.execute("VACUUM memoryd_postings, memoryd_chunks")  # index-only scans need the visibility map
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT chunk_id, tf, dl FROM memoryd_postings WHERE term = ANY(%s)", (["violin"],)).fetchall())
        figures = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN SELECT count(*), sum(n_terms), max(id) FROM memoryd_chunks").fetchall())
    assert "Index Only Scan using memoryd_postings_pkey" in plan, plan
    assert "Index Only Scan using memoryd_chunks_terms" in figures, figures


class CountingConn:
    """A connection that counts the statements it is given."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn, self.sql = conn, []

    def execute(self, sql: str, params: Any = None) -> Any:
        self.sql.append(sql)
        return self.conn.execute(sql, params)


def test_corpus_figures_are_read_again_only_after_the_table_changed(pg_dsn: str, tmp_path: Path) -> None:
    root = write_corpus(tmp_path / "root")
    idx = open_index(storage_config("postgres", root, tmp_path / "data", pg_dsn), HashEmbedder(64))
    try:
        reconcile(idx, [root], FILTER)
        stats = StatsCache(ttl_s=0.0)  # probe on every call
        with idx.backend.pg.connection() as raw:
            conn = CountingConn(raw)
            first = stats.table(conn), stats.doc_frequencies(conn, ["pgvector"])  # type: ignore[arg-type]
            reads = len(conn.sql)
            again = stats.table(conn), stats.doc_frequencies(conn, ["pgvector"])  # type: ignore[arg-type]
            assert again == first and len(conn.sql) == reads + 2  # unchanged: only the totals, twice
            assert all("FROM memoryd_totals" in sql for sql in conn.sql[reads:])
        (root / "new.md").write_text("# New\n\npgvector again, in a note of its own.\n", encoding="utf-8")
        reconcile(idx, [root], FILTER)
        with idx.backend.pg.connection() as raw:
            conn = CountingConn(raw)
            table, df = stats.table(conn), stats.doc_frequencies(conn, ["pgvector"])  # type: ignore[arg-type]
        assert table[0] == first[0][0] + 1 and table[2] > first[0][2]
        assert df["pgvector"] == first[1]["pgvector"] + 1
    finally:
        idx.close()


def test_the_keyword_leg_runs_while_the_query_vector_is_computed(pg_dsn: str, tmp_path: Path) -> None:
    root = write_corpus(tmp_path / "root")
    emb = HashEmbedder(64)
    idx = open_index(storage_config("postgres", root, tmp_path / "data", pg_dsn), emb)
    try:
        reconcile(idx, [root], FILTER)
        seen: list[str] = []
        original = psycopg.Connection.execute

        def execute(self: psycopg.Connection[Any], sql: Any, params: Any = None, **kw: Any) -> Any:
            seen.append("bm25" if "FROM memoryd_postings p JOIN unnest" in str(sql) else "other")
            return original(self, sql, params, **kw)

        def vector() -> np.ndarray:
            seen.append("vector wanted")
            return np.asarray(emb.embed_query("pgvector memory"))

        psycopg.Connection.execute = execute  # type: ignore[method-assign,assignment]
        try:
            with_wait = idx.query(Query("pgvector memory", k=3, mode="hybrid", query_vector=vector))
        finally:
            psycopg.Connection.execute = original  # type: ignore[method-assign]
        inline = idx.query(Query("pgvector memory", k=3, mode="hybrid"))
    finally:
        idx.close()
    assert "bm25" in seen and seen.index("bm25") < seen.index("vector wanted")
    assert [h.chunk_id for h in with_wait.hits] == [h.chunk_id for h in inline.hits] and inline.hits


def test_a_deep_vector_search_widens_the_breadth_for_its_own_transaction_only(pg_dsn: str, tmp_path: Path) -> None:
    root = write_corpus(tmp_path / "root")
    emb = HashEmbedder(64)
    idx = open_index(storage_config("postgres", root, tmp_path / "data", pg_dsn), emb)
    try:
        reconcile(idx, [root], FILTER)
        n = idx.status().chunks
        deep = idx.vectors.search(emb.embed_query("pgvector"), 100)  # 2k = 200 > the session's 128
        with idx.backend.pg.connection() as conn:  # type: ignore[attr-defined]
            row = conn.execute("SELECT current_setting('hnsw.ef_search')").fetchone()
    finally:
        idx.close()
    assert len(deep) == n and row == (str(schema.EF_SEARCH),)


def test_a_deep_search_needs_no_second_connection(pg_dsn: str, tmp_path: Path) -> None:
    """A vector leg deeper than the session's breadth runs on the search's own connection: with a
    pool of one, it would otherwise wait for itself until the pool's timeout."""

    root = write_corpus(tmp_path / "root")
    connect.prepare(pg_dsn, "disable")
    pool = connect.open_pool(pg_dsn, "disable", min_size=1, max_size=1, timeout_s=2)
    try:
        idx = open_index(storage_config("postgres", root, tmp_path / "data", pg_dsn), HashEmbedder(64), pool=pool)
        try:
            reconcile(idx, [root], FILTER)
            assert idx.query(Query("pgvector memory", k=70, mode="hybrid")).hits  # 70 candidates: 2k > 128
        finally:
            idx.close()
    finally:
        pool.close()
