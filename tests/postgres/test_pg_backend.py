"""What only the PostgreSQL backend has: migrations, sites sharing one database and one cache,
the per-(site, root) lock, credentials kept out of every message, and a database that goes away."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.config import Config
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.errors import StoreError
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.base import SchemaTooNewError, SiteLockedError, StorageUnavailableError
from memoryd.indexer.storage.postgres import connect, schema
from memoryd.indexer.storage.postgres.dsn import describe
from tests.helpers import CountingEmbedder, wait_for
from tests.indexer.test_storage_backends import CORPUS, storage_config

FILTER = PathFilter(("*.md",), (".git/*",))
SECRET = "hunter2-not-for-logs"


def write_corpus(root: Path, extra: dict[str, str] | None = None) -> Path:
    for rel, text in {**CORPUS, **(extra or {})}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    return root


def dialogue(n: int, seed: int) -> str:
    topics = ["garden", "violin", "hiking trip", "new job", "painting class", "dog named Rex", "camping", "寿司"]
    lines = [f"# 2023-05-0{1 + seed % 9}", ""]
    for i in range(n):
        who = "Caroline" if (i + seed) % 2 else "Melanie"
        lines.append(f"- **{who}**: the {topics[(i * seed) % len(topics)]} went well, number {i % 7}.")
    return "\n".join(lines) + "\n"


def test_migrations_are_versioned_and_a_newer_schema_is_refused(pg_dsn: str) -> None:
    assert connect.prepare(pg_dsn, "disable") == 0
    assert connect.prepare(pg_dsn, "disable") == schema.SCHEMA_VERSION
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE memoryd_meta SET value = %s WHERE key = 'schema_version'",
                     (str(schema.SCHEMA_VERSION + 1),))
    with pytest.raises(SchemaTooNewError, match="newer than this memoryd"):
        connect.prepare(pg_dsn, "disable")


def test_keyword_scores_equal_the_embedded_backends_bm25(pg_dsn: str, tmp_path: Path) -> None:
    """Same analyser terms, same formula: every hit's BM25 is FTS5's, to float precision."""
    root = write_corpus(tmp_path / "root", {f"log/{n}.md": dialogue(12 + n, n) for n in range(1, 9)})
    emb = HashEmbedder(64)
    indexes = [open_index(storage_config(b, root, tmp_path / b, pg_dsn), emb) for b in ("embedded", "postgres")]
    try:
        for idx in indexes:
            reconcile(idx, [root], FILTER)
        for query in ("violin garden", "Caroline camping number 3", "寿司", "pgvector PostgreSQL memory", "Rex"):
            emb_hits, pg_hits = (idx.query(Query(query, k=20, mode="keyword", explain=True)).to_json()["hits"]
                                 for idx in indexes)
            def scores(hits: list[dict[str, Any]]) -> dict[tuple[str, int], float]:
                return {(h["path"], h["start_line"]): h["explain"]["bm25"] for h in hits}
            want, got = scores(emb_hits), scores(pg_hits)
            assert want and set(got) == set(want), query
            assert all(got[key] == pytest.approx(want[key], rel=1e-5) for key in want), query
            assert [h["path"] for h in pg_hits] == [h["path"] for h in emb_hits], query
    finally:
        for idx in indexes:
            idx.close()


def two_sites(pg_dsn: str, tmp_path: Path) -> tuple[list[Path], list[CountingEmbedder], list[MemoryIndex]]:
    roots = [write_corpus(tmp_path / name / "memory") for name in ("a", "b")]
    inner = HashEmbedder(64)
    embs = [CountingEmbedder(inner), CountingEmbedder(inner)]
    idxs = [open_index(storage_config("postgres", roots[n], tmp_path / name / "data", pg_dsn), embs[n])
            for n, name in enumerate(("a", "b"))]
    return roots, embs, idxs


def test_two_sites_share_one_memory_and_one_embedding_cache(pg_dsn: str, tmp_path: Path) -> None:
    roots, embs, (a, b) = two_sites(pg_dsn, tmp_path)
    try:
        first = reconcile(a, [roots[0]], FILTER)
        assert embs[0].embedded == first.chunks_added > 0
        second = reconcile(b, [roots[1]], FILTER)
        assert second.chunks_added == first.chunks_added and embs[1].embedded == 0  # every vector came from A
        (roots[0] / "only-a.md").write_text("# A\n\nThe staging database moved to Frankfurt.\n", encoding="utf-8")
        reconcile(a, [roots[0]], FILTER)
        hits = b.query(Query("staging database Frankfurt", k=3)).to_json()["hits"]  # B sees A's new file
        assert hits[0]["path"] == "only-a.md" and hits[0]["root"] == str(roots[0])
        same = b.query(Query("Neovim", k=10, mode="keyword")).to_json()["hits"]
        assert {h["root"] for h in same} == {str(r) for r in roots}  # same relative path, two sites, no collision
        mine = b.query(Query("Neovim", k=10, mode="keyword", sites=(b.site,))).to_json()["hits"]
        assert {h["root"] for h in mine} == {str(roots[1])}
        assert a.status().storage.to_json()["sites"] == 2 and a.status().files == len(CORPUS) + 1
    finally:
        a.close()
        b.close()


def test_one_daemon_per_site_and_root(pg_dsn: str, tmp_path: Path) -> None:
    root = write_corpus(tmp_path / "root")
    cfg = storage_config("postgres", root, tmp_path / "data", pg_dsn)
    first = open_index(cfg, HashEmbedder(64))
    try:
        with pytest.raises(SiteLockedError, match=r"already in use .* by another memoryd \(host .*pid \d+"):
            open_index(cfg, HashEmbedder(64))
        reader = open_index(cfg, HashEmbedder(64), read_only=True)  # search --offline needs no lock
        reader.close()
        other_site = dataclasses.replace(cfg, storage=dataclasses.replace(cfg.storage, site="elsewhere"))
        open_index(other_site, HashEmbedder(64)).close()
    finally:
        first.close()
    open_index(cfg, HashEmbedder(64)).close()  # released with the first daemon


def test_a_daemon_with_another_model_is_refused_not_allowed_to_wipe_other_sites(pg_dsn: str, tmp_path: Path) -> None:
    root = write_corpus(tmp_path / "root")
    cfg = storage_config("postgres", root, tmp_path / "data", pg_dsn)
    idx = open_index(cfg, HashEmbedder(64))
    reconcile(idx, [root], FILTER)
    idx.close()
    other = dataclasses.replace(cfg, storage=dataclasses.replace(cfg.storage, site="b"))
    with pytest.raises(StoreError, match="dimension=64"):
        open_index(other, HashEmbedder(32))


def secret_dsn(dsn: str) -> str:
    return f"{dsn} password={SECRET}"


def test_the_password_never_reaches_errors_status_logs_or_repr(
    pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    root = write_corpus(tmp_path / "root")
    cfg = storage_config("postgres", root, tmp_path / "data", secret_dsn(pg_dsn))  # trust auth: accepted, unused
    assert SECRET not in repr(cfg) and SECRET not in describe(cfg.storage.dsn)
    idx = open_index(cfg, HashEmbedder(64))
    try:
        reconcile(idx, [root], FILTER)
        assert SECRET not in json.dumps(idx.status().to_json())
    finally:
        idx.close()
    down = dataclasses.replace(cfg, storage=dataclasses.replace(
        cfg.storage, dsn=f"host={tmp_path}/no-such-dir user=memoryd password={SECRET} dbname=x"))
    with pytest.raises(StorageUnavailableError) as err:
        open_index(down, HashEmbedder(64))
    assert SECRET not in str(err.value) and "no-such-dir" in str(err.value)
    uri = f"postgresql://memoryd:{SECRET}@{'127.0.0.1'}:1/x"
    with pytest.raises(StorageUnavailableError) as err:
        connect.prepare(uri, "disable")
    assert SECRET not in str(err.value) and "127.0.0.1:1" in str(err.value)
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err


def test_database_down_fails_fast_then_resumes_without_a_full_reindex(restartable_pg: Any, tmp_path: Path) -> None:
    dsn = restartable_pg.server.dsn()
    root = write_corpus(tmp_path / "root")
    emb = CountingEmbedder(HashEmbedder(64))
    idx = open_index(storage_config("postgres", root, tmp_path / "data", dsn), emb)
    try:
        reconcile(idx, [root], FILTER)
        embedded = emb.embedded
        assert idx.status().storage.to_json()["reachable"] is True
        restartable_pg.stop()
        with pytest.raises(StorageUnavailableError, match="database postgresql://postgres@"):
            idx.query(Query("Neovim", k=1))
        down = idx.status().to_json()  # status says so, with the last figures it read
        assert down["storage"]["reachable"] is False and down["chunks"] > 0
        assert "postgresql://postgres@" in down["storage"]["error"]
        (root / "while-down.md").write_text("# Down\n\nWritten while the database was away.\n", encoding="utf-8")
        restartable_pg.start()
        wait_for(lambda: _reachable(idx), timeout=30, what="the pool to reconnect")
        stats = reconcile(idx, [root], FILTER)  # what the daemon runs when the database is back
        assert stats.files_indexed == 1 and stats.files_unchanged == len(CORPUS)
        assert emb.embedded == embedded + stats.chunks_added
        assert idx.query(Query("away", k=1, mode="keyword")).to_json()["hits"][0]["path"] == "while-down.md"
    finally:
        idx.close()


def _reachable(idx: MemoryIndex) -> bool:
    return bool(idx.status().storage.to_json()["reachable"])


def test_storage_section_validates_and_reads_the_dsn_from_the_environment(tmp_path: Path) -> None:
    from memoryd.indexer.config import load
    from memoryd.indexer.errors import ConfigError

    toml = tmp_path / "memoryd.toml"
    toml.write_text('[storage]\nbackend = "postgres"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"storage\.dsn"):
        load(toml, env={})
    cfg: Config = load(toml, env={"MEMORYD_PG_DSN": f"host=/x password={SECRET}"})
    assert cfg.storage.dsn.endswith(SECRET) and SECRET not in repr(cfg)
    toml.write_text('[storage]\nbackend = "mysql"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"storage\.backend"):
        load(toml, env={})


def test_one_candidate_read_matches_what_each_separate_read_returned(pg_dsn: str, tmp_path: Path) -> None:
    """The single statement over the candidates gives the vector leg's own cosines, the chunks'
    rows, and (from their terms) exactly the query tokens each chunk's postings hold."""
    from memoryd.indexer.storage.postgres.fetch import fetch_candidates

    root = write_corpus(tmp_path / "root", {f"log/{n}.md": dialogue(12 + n, n) for n in range(1, 5)})
    emb = HashEmbedder(64)
    idx = open_index(storage_config("postgres", root, tmp_path / "data", pg_dsn), emb)
    try:
        reconcile(idx, [root], FILTER)
        qvec = emb.embed_query("violin garden")
        leg = dict(idx.vectors.search(qvec, 10))
        with idx.backend.pg.connection() as conn:  # type: ignore[attr-defined]
            got = fetch_candidates(conn, [*leg, -1], qvec, idx.vectors.cast)  # type: ignore[attr-defined]
            held = conn.execute("SELECT chunk_id, term FROM memoryd_postings WHERE chunk_id = ANY(%s)"
                                " AND term = ANY(%s)", (list(leg), ["violin", "garden"])).fetchall()
        assert set(got.rows) == set(leg)  # -1 does not exist: no row, no error
        assert all(got.cosines[i] == pytest.approx(s, abs=1e-6) for i, s in leg.items())
        want: dict[int, set[str]] = {}
        for cid, term in held:
            want.setdefault(int(cid), set()).add(str(term))
        held = got.held([*leg, -1], ["violin", "garden"])
        assert want and {i: t for i, t in held.items() if t} == want and set(held) == set(leg)
        assert all(got.terms[i] for i in leg)
    finally:
        idx.close()
