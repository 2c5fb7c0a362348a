"""``memoryd migrate-storage``: an embedded index moves to PostgreSQL with 0 model calls, searches unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from memoryd.daemon.client.cli import main
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.query import Query
from tests.helpers import CountingEmbedder
from tests.indexer.test_storage_backends import storage_config
from tests.postgres.test_pg_backend import dialogue, write_corpus

FILTER = PathFilter(("*.md",), (".git/*",))
QUERIES = ("which editor does the user prefer", "violin garden", "寿司", "pgvector shared memory", "Rex camping")


def test_migrate_storage_copies_vectors_and_cache_so_nothing_is_embedded_again(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    root = write_corpus(tmp_path / "root", {f"log/{n}.md": dialogue(10 + n, n) for n in range(1, 6)})
    data = tmp_path / "data"
    emb = HashEmbedder(64)
    embedded = open_index(storage_config("embedded", root, data, None), emb)
    reconcile(embedded, [root], FILTER)
    before = {q: [(h.path, h.start_line) for h in embedded.query(Query(q, k=5)).hits] for q in QUERIES}
    chunks = embedded.status().chunks
    embedded.close()

    toml = tmp_path / "memoryd.toml"
    toml.write_text('[embedding]\nprovider = "hash"\n[storage]\nsslmode = "disable"\n', encoding="utf-8")
    monkeypatch.setenv("MEMORYD_PG_DSN", pg_dsn)
    assert main(["migrate-storage", "--config", str(toml), "--data-dir", str(data)]) == 0
    assert f"{chunks} chunks" in capsys.readouterr().err

    counting = CountingEmbedder(emb)
    pg = open_index(storage_config("postgres", root, data, pg_dsn), counting)
    try:
        again = reconcile(pg, [root], FILTER)
        assert again.files_indexed == 0 and counting.embedded == 0 and pg.status().chunks == chunks
        after = {q: [(h.path, h.start_line) for h in pg.query(Query(q, k=5)).hits] for q in QUERIES}
        assert after == before
    finally:
        pg.close()
    # a second run finds every file already there and changes nothing
    assert main(["migrate-storage", "--config", str(toml), "--data-dir", str(data)]) == 0
    pg = open_index(storage_config("postgres", root, data, pg_dsn), counting)
    try:
        assert pg.status().chunks == chunks
    finally:
        pg.close()


def test_migrate_storage_without_a_dsn_says_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("MEMORYD_PG_DSN", raising=False)
    toml = tmp_path / "memoryd.toml"
    toml.write_text("", encoding="utf-8")
    assert main(["migrate-storage", "--config", str(toml), "--data-dir", str(tmp_path / "d")]) != 0
    assert "MEMORYD_PG_DSN" in capsys.readouterr().err
