"""The one query path: a Query built once, run by one pipeline on any backend's legs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import pytest

from memoryd.indexer.config import SearchConfig
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search import calibration
from memoryd.indexer.search.keyword_plan import KeywordPlan
from memoryd.indexer.search.legs import Found, QueryVector, Terms
from memoryd.indexer.search.pipeline import SearchPipeline
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.rows import ChunkRow
from tests.helpers import make_config

ROWS = {
    1: ChunkRow(1, "/r", "a.md", 1, 3, "", "the violin lesson is on monday"),
    2: ChunkRow(2, "/r", "b.md", 1, 3, "", "pasta recipe with garlic"),
    3: ChunkRow(3, "/r", "c.md", 1, 3, "", "violin strings and a violin case", site="other"),
}
BM25 = {"violin": {3: 2.0, 1: 1.0}, "pasta": {2: 1.5}}


class DictSession:
    """A backend held in dicts: everything the pipeline asks of one, and nothing more."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def snapshot(self) -> AbstractContextManager[object]:
        return nullcontext()

    def candidates(self, terms: Terms, n_keyword: int, n_vector: int, vector: QueryVector,
                   early: Callable[[dict[int, float]], None]) -> Found:
        self.asked.append("candidates")
        kw: dict[int, float] = {}
        for t in terms.expanded:
            for i, s in BM25.get(t, {}).items():
                kw[i] = kw.get(i, 0.0) + s
        ranked = dict(sorted(kw.items(), key=lambda kv: -kv[1])[:n_keyword])
        return Found(ranked, KeywordPlan((), exact=True), {}, None)

    def chunks(self, ids: Sequence[int], qvec: Any) -> dict[int, ChunkRow]:
        return {i: ROWS[i] for i in ids if i in ROWS}

    def cosines(self, qvec: Any, ids: Sequence[int]) -> dict[int, float]:
        return {}

    def chunk_terms(self, ids: Sequence[int]) -> dict[int, str]:
        return {i: ROWS[i].text for i in ids}

    def doc_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        return {t: len(BM25.get(t, {})) for t in terms}

    def n_docs(self) -> int:
        return len(ROWS)

    def features(self, ids: Sequence[int], terms: Sequence[str],
                 cosines: dict[int, float] | None) -> dict[int, calibration.Features]:
        stored = {i: set(ROWS[i].text.split()) for i in ids}
        return calibration.features_from(ids, terms, self.doc_frequencies(terms), len(ROWS), stored, cosines)

    def vectors_of(self, ids: Sequence[int]) -> Any:
        raise AssertionError("MMR is off")

    def line_cosines(self, qvec: Any, ids: Sequence[int]) -> dict[int, float]:
        self.asked.append("line_cosines")
        return {}  # no line vectors filled in: the order stays the fused one


class DictLegs:
    def __init__(self) -> None:
        self.session_of = DictSession()
        self.queries: list[Query] = []

    @contextmanager
    def session(self, query: Query, terms: Terms) -> Iterator[DictSession]:
        self.queries.append(query)
        yield self.session_of


def test_any_backend_is_a_few_legs_and_the_pipeline_does_the_rest() -> None:
    legs = DictLegs()
    result = SearchPipeline(legs, None, SearchConfig()).search(Query("violin", k=2, explain=True))
    assert result.mode == "keyword"  # no model: keyword only
    assert [h.chunk_id for h in result.hits] == [3, 1]
    assert result.hits[0].site == "other" and result.hits[1].site is None  # the rows' sites reach the hits
    assert legs.queries == [Query("violin", k=2, explain=True)]  # the backend sees the one Query
    assert result.explanations is not None and result.explanations[0]["bm25"] == 2.0


def test_optional_steps_are_decided_when_the_pipeline_is_built() -> None:
    off = SearchPipeline(DictLegs(), None, SearchConfig())
    assert (off._reorders, off._mmr, off._fallback) == ([], False, False)  # not in the query path at all
    cfg = dataclasses.replace(SearchConfig(), prior_weight=0.2, recency_half_life_days=30.0, mmr_lambda=0.5,
                              fallback_candidates=200)
    on = SearchPipeline(DictLegs(), None, cfg)
    assert len(on._reorders) == 2 and on._mmr and on._fallback


def test_a_query_is_frozen_and_search_builds_it_once(tmp_path: Path) -> None:
    from memoryd.daemon.watch.pathfilter import PathFilter
    from memoryd.indexer.embedding.hash_embedder import HashEmbedder

    root = tmp_path / "root"
    root.mkdir()
    (root / "a.md").write_text("# A\n\nThe violin lesson is on Monday.\n", encoding="utf-8")
    idx = open_index(make_config(root, tmp_path / "data"), HashEmbedder(64))
    try:
        pf = PathFilter(("*.md",), ())
        reconcile(idx, [root], pf, pf.accept_dir)
        seen: list[Query] = []
        original = idx.query

        def spy(query: Query) -> Any:
            seen.append(query)
            return original(query)

        idx.query = spy  # type: ignore[method-assign]
        hits = idx.query(Query("violin", k=3, mode="keyword", exclude_prefixes=("x/",))).hits
        assert [h.path for h in hits] == ["a.md"]
        assert seen == [Query("violin", k=3, mode="keyword", exclude_prefixes=("x/",))]
        with pytest.raises(dataclasses.FrozenInstanceError):
            seen[0].k = 5  # type: ignore[misc]
    finally:
        idx.close()
