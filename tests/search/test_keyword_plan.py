"""The keyword leg's work bound: plans from document frequencies, and the leg end to end."""
from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search import keyword_plan
from memoryd.indexer.search.keyword_plan import DocFrequencies, KeywordPass, plan
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.embedded.store import Store
from tests.helpers import make_config


def test_cheap_query_is_one_exact_pass_over_every_term() -> None:
    p = plan(["alpha", "beta"], {"alpha": 10, "beta": 20}, max_rowid=100_000, row_budget=100)
    assert p.exact and p.passes == (KeywordPass(("alpha", "beta")),) and p.dropped == ()


def test_expensive_query_scores_rare_terms_everywhere_and_the_rest_in_a_recent_window() -> None:
    df = {"common": 5000, "rare": 30, "mid": 400, "huge": 90_000}
    p = plan(["common", "rare", "mid", "huge"], df, max_rowid=100_000, row_budget=1000, scan_budget=10_000)
    assert not p.exact
    rare, window = p.passes
    assert rare == KeywordPass(("rare", "mid"))  # 30 + 400 <= 500; + 5000 is not
    assert window.terms == ("rare", "mid", "common") and p.dropped == ("huge",)
    # The window holds ~half the row budget of the scanned terms' 5430 postings.
    assert window.min_rowid == int(100_000 * (1 - 500 / 5430))


def test_only_common_terms_still_scan_the_rarest_one() -> None:
    p = plan(["a", "b"], {"a": 50_000, "b": 40_000}, max_rowid=200_000, row_budget=1000, scan_budget=10_000)
    assert p.passes == (KeywordPass(("b",), int(200_000 * (1 - 500 / 40_000))),) and p.dropped == ("a",)


def test_unknown_terms_count_as_rare() -> None:
    p = plan(["zebracorn", "x"], {"x": 5000}, max_rowid=10_000, row_budget=1000, scan_budget=10_000)
    assert p.passes[0] == KeywordPass(("zebracorn",))


def test_no_terms_no_passes() -> None:
    assert plan([], {}, 0).passes == ()


@pytest.fixture
def store(tmp_path: Path):
    s = Store(tmp_path / "i.sqlite3")
    with s.transaction() as c:
        for i, terms in enumerate(["alpha beta", "alpha", "cafe gpt 4", "gpt", "gpt"], 1):
            c.execute("INSERT INTO chunks_fts(rowid, terms) VALUES (?, ?)", (i, terms))
    yield s
    s.close()


def test_doc_frequencies_read_the_fts_vocabulary(store: Store) -> None:
    df = DocFrequencies().lookup(store.conn, ["alpha", "gpt-4", "café", "nothing"])
    # A multi-token term counts as its rarest token; diacritics fold as the tokenizer folds them.
    assert df == {"alpha": 2, "gpt-4": 1, "café": 1, "nothing": 0}


def test_doc_frequencies_are_cached_until_they_expire(store: Store) -> None:
    cache = DocFrequencies(ttl_s=3600)
    assert cache.lookup(store.conn, ["gpt"]) == {"gpt": 3}
    with store.transaction() as c:
        c.execute("INSERT INTO chunks_fts(rowid, terms) VALUES (9, 'gpt')")
    assert cache.lookup(store.conn, ["gpt"]) == {"gpt": 3}  # cached: only steers the plan
    assert DocFrequencies(ttl_s=0).lookup(store.conn, ["gpt"]) == {"gpt": 4}


def test_a_cached_zero_is_read_again_after_another_connection_commits(store: Store, tmp_path: Path) -> None:
    reader = sqlite3.connect(tmp_path / "i.sqlite3")
    try:
        cache = DocFrequencies(ttl_s=3600)
        cache.sync(reader)
        assert cache.lookup(reader, ["gpt", "zebracorn"]) == {"gpt": 3, "zebracorn": 0}
        cache.sync(reader)  # nothing committed since: the zero is trusted
        with store.transaction() as c:
            c.execute("INSERT INTO chunks_fts(rowid, terms) VALUES (9, 'gpt zebracorn')")
        cache.sync(reader)
        # The zero is re-read; a non-zero count only steers the plan and keeps its time to live.
        assert cache.lookup(reader, ["gpt", "zebracorn"]) == {"gpt": 3, "zebracorn": 1}
    finally:
        reader.close()


def test_a_word_saved_after_a_search_missed_it_is_found_at_once(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "2024-01-01.md").write_text("# Notes\n\n- The garden needs water.\n")
    cfg = make_config(root, tmp_path / "data")
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    try:
        reconcile(idx, [root], PathFilter(("*.md",), ()))
        before = idx.query(Query("zebracorn garden", k=3, mode="keyword", explain=True)).to_json()
        assert before["keyword_plan"]["absent_terms"] == ["zebracorn"]
        assert before["keyword_plan"]["passes"][0]["terms"] == ["garden"]
        (root / "memory" / "2024-01-02.md").write_text("# Trip\n\n- We saw a zebracorn.\n")
        reconcile(idx, [root], PathFilter(("*.md",), ()))
        after = idx.query(Query("zebracorn", k=3, mode="keyword", explain=True)).to_json()
        assert [h["path"] for h in after["hits"]] == ["memory/2024-01-02.md"]
        assert after["keyword_plan"]["absent_terms"] == []
    finally:
        idx.close()


def test_a_query_of_absent_terms_runs_no_keyword_pass(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "2024-01-01.md").write_text("# Notes\n\n- The garden needs water.\n")
    cfg = make_config(root, tmp_path / "data")
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    try:
        reconcile(idx, [root], PathFilter(("*.md",), ()))
        res = idx.query(Query("zebracorn unicornfish", k=3, mode="keyword", explain=True)).to_json()
        assert res["hits"] == [] and res["keyword_plan"]["passes"] == []
        assert res["keyword_plan"]["absent_terms"] == ["zebracorn", "unicornfish"]
    finally:
        idx.close()


def test_bounded_leg_finds_an_old_rare_term_and_ranks_common_words_among_recent_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "2020-01-01.md").write_text("# Old\n\n- The zebracorn backup job was renamed.\n")
    for day in range(1, 29):
        (root / "memory" / f"2024-02-{day:02d}.md").write_text(
            f"# Day {day}\n\n- The backup job ran at night; day {day}.\n")
    cfg = make_config(root, tmp_path / "data")
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    try:
        reconcile(idx, [root], PathFilter(("*.md",), ()))
        exact = idx.query(Query("zebracorn backup job", k=3, mode="keyword", explain=True)).to_json()
        assert exact["keyword_plan"]["exact"] and exact["hits"][0]["path"] == "memory/2020-01-01.md"
        monkeypatch.setattr(keyword_plan, "ROW_BUDGET", 10)
        monkeypatch.setattr(keyword_plan, "SCAN_BUDGET", 30)
        bounded = idx.query(Query("zebracorn backup job", k=3, mode="keyword", explain=True)).to_json()
        assert not bounded["keyword_plan"]["exact"]
        assert bounded["hits"][0]["path"] == "memory/2020-01-01.md"  # the rare term is scored everywhere
        common = idx.query(Query("backup job night", k=5, mode="keyword", explain=True)).to_json()
        assert not common["keyword_plan"]["exact"] and common["hits"]
        assert all(h["path"].startswith("memory/2024-02-") for h in common["hits"])
    finally:
        idx.close()


def test_a_small_corpus_is_always_ranked_exactly_even_for_a_long_query() -> None:
    terms = [f"t{i}" for i in range(200)]  # a pasted dialogue: many terms, each in many of few chunks
    p = plan(terms, dict.fromkeys(terms, 40), max_rowid=50, row_budget=1000)
    assert p.exact and p.passes == (KeywordPass(tuple(terms)),)


def test_explain_output_says_when_keyword_scores_were_bounded() -> None:
    from memoryd.daemon.client.render import render_hits

    hit = {"path": "a.md", "start_line": 1, "end_line": 2, "score": 1.0, "text": "x", "text_score": 0.5,
           "explain": {"fusion": "zscore", "vector_rank": 1, "keyword_rank": 2, "cosine": 0.5, "bm25": 1.0}}
    bounded = {"hits": [hit], "took_ms": 3.0, "mode": "hybrid",
               "keyword_plan": {"exact": False, "dropped_terms": ["the", "run"], "passes": []}}
    assert "too common to score: the, run" in render_hits(bounded)
    exact = {**bounded, "keyword_plan": {"exact": True, "dropped_terms": [], "passes": []}}
    assert "bounded" not in render_hits(exact)
