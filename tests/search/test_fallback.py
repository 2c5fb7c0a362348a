"""Weak-result fallback: when it runs, with which threshold, and that --explain says so."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from memoryd.daemon.client.render import render_hits
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.config import SearchConfig
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.fallback import threshold, wider
from memoryd.indexer.search.hits import Hit
from memoryd.indexer.search.query import Query
from tests.indexer.test_storage_backends import BACKENDS, storage_config


def _hits(scores: list[float]) -> list[Hit]:
    """Hits with these calibrated scores; the cosine is high on purpose: only the score counts."""
    return [Hit(i, "/r", f"{i}.md", 1, 2, "", "", s, 0.99, 0.0) for i, s in enumerate(scores)]


def test_weak_when_fewer_than_three_hits_reach_the_threshold() -> None:
    cfg = SearchConfig(fallback_candidates=40)
    weak = wider(cfg, 4, 4, _hits([0.9, 0.9, 0.5, 0.4]), 0.8)
    assert weak is not None and weak["candidates"] == 40 and "2 hit(s)" in weak["reason"]
    assert wider(cfg, 4, 4, _hits([0.9, 0.9, 0.8, 0.4]), 0.8) is None


def test_no_fallback_when_off_when_the_legs_ran_out_or_without_a_threshold() -> None:
    assert wider(SearchConfig(fallback_candidates=0), 4, 4, _hits([0.1] * 4), 0.8) is None
    assert wider(SearchConfig(fallback_candidates=4), 4, 4, _hits([0.1] * 4), 0.8) is None
    assert wider(SearchConfig(fallback_candidates=40), 4, 3, _hits([0.1] * 3), 0.8) is None
    assert wider(SearchConfig(fallback_candidates=40), 4, 4, _hits([0.1] * 4), 0.0) is None  # never abstains


def test_the_query_threshold_wins_over_the_configured_one() -> None:
    cfg = SearchConfig(min_score=0.6)
    assert threshold(cfg, None) == 0.6 and threshold(cfg, 0.3) == 0.3


def _index(tmp_path: Path, backend: str = "embedded", dsn: str | None = None, **search: object) -> MemoryIndex:
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True, exist_ok=True)
    for day in range(1, 21):
        (root / "memory" / f"2024-03-{day:02d}.md").write_text(f"# Day {day}\n\n- Walked the dog, note {day}.\n")
    cfg = storage_config(backend, root, tmp_path / f"data{len(list(tmp_path.iterdir()))}", dsn)
    cfg = dataclasses.replace(cfg, search=dataclasses.replace(cfg.search, candidates=5, **search))
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    reconcile(idx, [root], PathFilter(("*.md",), ()))
    return idx


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_weak_result_is_searched_again_wider_and_flagged_in_explain(
        tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    dsn = request.getfixturevalue("pg_dsn") if backend == "postgres" else None
    idx = _index(tmp_path, backend, dsn, min_score=1.0, fallback_candidates=20)
    try:
        res = idx.query(Query("walked the dog", k=3, mode="hybrid", explain=True)).to_json()
        fb = res["query_analysis"]["fallback"]
        assert fb["candidates"] == 20 and fb["first_candidates"] == 5 and "fewer than 3" in fb["reason"]
        assert "fallback" in render_hits(res)
        # No threshold to miss: the first result stands.
        assert idx.query(Query("walked the dog", k=3, mode="hybrid", explain=True,
                          min_score=-1.0)).to_json()["query_analysis"]["fallback"] is None
    finally:
        idx.close()


def test_keyword_mode_and_a_disabled_fallback_run_once(tmp_path: Path) -> None:
    idx = _index(tmp_path, min_score=1.0, fallback_candidates=0)
    try:
        assert idx.query(Query("walked the dog", k=3, explain=True)).to_json()["query_analysis"]["fallback"] is None
        kw = idx.query(Query("walked the dog", k=3, mode="keyword", explain=True)).to_json()
        assert kw["query_analysis"]["fallback"] is None
    finally:
        idx.close()


def test_vector_mode_runs_once(tmp_path: Path) -> None:
    idx = _index(tmp_path, min_score=1.0, fallback_candidates=20)
    try:
        res = idx.query(Query("walked the dog", k=3, mode="vector", explain=True)).to_json()
        assert res["query_analysis"]["fallback"] is None
    finally:
        idx.close()
