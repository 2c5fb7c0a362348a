"""Query-time rescoring: proximity added to BM25, and the boost for files dated as the query says."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.keyword_plan import DocFrequencies
from memoryd.indexer.search.query import Query
from memoryd.indexer.search.rescore import date_boost, keyword_with_proximity
from memoryd.indexer.storage.embedded.hybrid import EmbeddedSession, SqliteTerms
from memoryd.indexer.storage.embedded.vectors import VectorIndex
from tests.helpers import make_config


@pytest.fixture
def conn() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE chunks (id INTEGER PRIMARY KEY)")
    c.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(terms)")
    docs = {
        1: "carolin went lgbtq support group yesterday",
        2: "lgbtq carolin talk paint sunset lake hike camp trip support a b c d e f g h group",
        3: "carolin paint sunset",
        4: "carolin hike mountain",
        **{i: f"carolin filler{i} note" for i in range(5, 12)},  # so that the query's words are rare
    }
    for i, terms in docs.items():
        c.execute("INSERT INTO chunks (id) VALUES (?)", (i,))
        c.execute("INSERT INTO chunks_fts (rowid, terms) VALUES (?, ?)", (i, terms))
    return c


def test_proximity_lifts_the_chunk_holding_the_words_together(conn: sqlite3.Connection) -> None:
    kw = {1: 5.0, 2: 5.0, 3: 0.5}
    out = keyword_with_proximity(SqliteTerms(conn, DocFrequencies()), ["lgbtq", "support", "group"], kw, weight=2.0)
    assert out[1] > out[2] == 5.0 and out[3] == 0.5
    assert kw == {1: 5.0, 2: 5.0, 3: 0.5}  # the caller's BM25 is left as it was
    assert 4 not in out  # a chunk without BM25 does not gain one
    assert keyword_with_proximity(SqliteTerms(conn, DocFrequencies()), ["lgbtq", "support"], kw, weight=0.0) == kw
    assert keyword_with_proximity(SqliteTerms(conn, DocFrequencies()), ["support"], kw) == kw  # nothing to pair


def test_stored_terms_are_read_once_per_generation(conn: sqlite3.Connection) -> None:
    # A table row changed after the first read, on the same connection (no commit another connection
    # could notice), shows which source was used: the terms kept (chunk_terms.py), for both readers.
    source = EmbeddedSession(conn, DocFrequencies(), VectorIndex(4), threading.Lock(), Query("q"))
    apart = keyword_with_proximity(source, ["lgbtq", "support", "group"], {1: 5.0, 2: 5.0, 3: 0.5}, weight=2.0)
    assert apart[1] > apart[2]  # chunk 2's words are apart in the table
    conn.execute("UPDATE chunks_fts SET terms = 'lgbtq support group' WHERE rowid = 2")
    again = keyword_with_proximity(source, ["lgbtq", "support", "group"], {1: 5.0, 2: 5.0, 3: 0.5}, weight=2.0)
    assert again == apart  # the kept terms, not the table's (which now hold the words together)
    feats = source.features([1, 2, 4], ["carolin", "hike"], None)
    assert feats[2].coverage == 1.0  # kept: "lgbtq carolin talk ... hike ..." (the table's lost both words)
    assert 0.0 < feats[1].coverage < feats[4].coverage == 1.0  # 4 is read from the table


def test_date_boost_raises_matching_files_by_the_spread() -> None:
    fused = {1: 1.0, 2: 0.8, 3: 0.0, 4: -1.0}
    paths = {1: "memory/2023-05-08.md", 2: "memory/2023-10-13.md", 3: "memory/2023-10-20.md", 4: "MEMORY.md"}
    out = date_boost(fused, paths, "What did she paint on October 13, 2023?", strength=2.0)
    assert out[2] > out[1] and out[3] > out[1]  # within a week of the named day
    assert out[1] == 1.0 and out[4] == -1.0
    scaled = date_boost({i: 10 * v for i, v in fused.items()}, paths, "on October 13, 2023", strength=2.0)
    assert sorted(scaled, key=scaled.__getitem__) == sorted(out, key=out.__getitem__)  # scale-free
    assert date_boost(fused, paths, "what did she paint?") == fused
    year = date_boost(fused, paths, "in 2023", strength=2.0)  # every dated file: one shared lift
    assert year[1] - 1.0 == pytest.approx(year[2] - 0.8) == pytest.approx(year[3]) and year[4] == -1.0
    assert date_boost(fused, paths, "in 1999", strength=2.0) == fused


def test_search_prefers_the_file_dated_as_the_query_says(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    line = "- **Mel**: We painted a sunset over the lake with the kids."
    for day in ("2023-05-08", "2023-07-15", "2023-10-13"):
        (root / "memory" / f"{day}.md").write_text(f"# {day}\n\n{line}\n")
    (root / "memory" / "2023-08-01.md").write_text(
        "# 2023-08-01\n\n- We talked about support for a new group.\n- The support group met on Friday.\n")
    (root / "memory" / "2023-08-02.md").write_text(
        "# 2023-08-02\n\n- The group went hiking, no talk of support.\n- Group photo by the lake.\n")
    cfg = make_config(root, tmp_path / "data")
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    try:
        pf = PathFilter(("*.md",), ())
        reconcile(idx, [root], pf)
        for mode in ("hybrid", "keyword"):
            hits = idx.query(Query("What did Mel paint in July 2023?", k=3, mode=mode)).to_json()["hits"]
            assert hits[0]["path"] == "memory/2023-07-15.md", mode
        hits = idx.query(Query("support group", k=2, mode="keyword")).to_json()["hits"]
        assert hits[0]["path"] == "memory/2023-08-01.md"
        # vector mode stays pure similarity: it ranks by the cosine, dates or not
        hits = idx.query(Query("What did Mel paint in July 2023?", k=3, mode="vector")).to_json()["hits"]
        cosines = [h["vector_score"] for h in hits]
        assert cosines == sorted(cosines, reverse=True)
        explained = idx.query(Query("the support group", k=1, mode="hybrid", explain=True)).to_json()["hits"][0]
        assert explained["explain"]["bm25"] is not None  # raw BM25, without the proximity bonus
    finally:
        idx.close()
