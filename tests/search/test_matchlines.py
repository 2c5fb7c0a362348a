"""Naming the lines of a hit that matched: the line scorer, and hits that carry the lines."""

from __future__ import annotations

from pathlib import Path

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.matchlines import best_lines, line_scores, ranked_lines
from memoryd.indexer.search.query import Query
from tests.helpers import make_config

CHAT = """## Session 3
- **Caroline**: I went hiking on Sunday.
- **Melanie**: How was the weather?

- **Caroline**: I contacted an adoption agency yesterday.
- **Melanie**: The agency will call you back soon."""


def test_keyword_lines_rank_by_idf_weighted_terms() -> None:
    idfs = {"adopt": 3.0, "agenc": 2.0}
    scores = line_scores(CHAT, 10, idfs)
    assert 13 not in scores  # blank lines are never named
    assert scores[14][0] == 5.0 and scores[15][0] == 2.0 and scores[11][0] == 0.0
    assert ranked_lines(scores)[:2] == [14, 15]
    assert best_lines(scores) == [14, 15]  # only lines holding a query term, best first


def test_vector_only_match_names_the_best_sub_window() -> None:
    windows = [(10, 12, 0.2), (12, 15, 0.7)]
    scores = line_scores(CHAT, 10, {}, windows)
    assert best_lines(scores, limit=2) == [12, 14]  # the 0.7 window's first non-blank lines
    assert best_lines(line_scores(CHAT, 10, {"agenc": 2.0, "weather": 1.0})) == [14, 15, 12]


def test_keyword_score_is_exact_whatever_the_term_order() -> None:
    # Float addition is not associative: summed in set order (which follows the process's string hashes),
    # 0.1 + 0.2 + 0.3 gives 0.6 or 0.6000000000000001, and lines with the same terms could rank apart.
    idfs = {"alpha": 0.1, "bravo": 0.2, "charli": 0.3}
    scores = line_scores("alpha bravo charlie\ncharlie bravo alpha\nbravo alpha charlie", 1, idfs)
    assert [scores[n][0] for n in (1, 2, 3)] == [0.6, 0.6, 0.6]


def test_a_line_takes_the_best_cosine_of_the_windows_holding_it() -> None:
    windows = [(11, 12, -0.1), (12, 13, -0.3), (14, 20, 0.4), (15, 15, 0.9)]
    scores = line_scores(CHAT, 10, {}, windows)
    assert {n: c for n, (_, c) in scores.items()} == {10: 0.0, 11: -0.1, 12: -0.1, 14: 0.4, 15: 0.9}


def test_cjk_lines_match_the_query_bigrams() -> None:
    text = "我们去了公园。\n元旦晚会我要表演魔术！"
    scores = line_scores(text, 1, {"魔术": 4.0, "晚会": 2.0})
    assert best_lines(scores) == [2]


def test_search_hits_carry_match_lines(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    body = [f"- line {i} about the weather and the garden" for i in range(1, 9)]
    body[5] = "- the zebracorn festival tickets are booked"
    (root / "notes.md").write_text("\n".join(body) + "\n")
    cfg = make_config(root, tmp_path / "data")
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    try:
        pf = PathFilter(("*.md",), ())
        reconcile(idx, [root], pf, pf.accept_dir)
        hit = idx.query(Query("zebracorn festival")).to_json()["hits"][0]
        assert hit["match_lines"] == [6]
    finally:
        idx.close()
