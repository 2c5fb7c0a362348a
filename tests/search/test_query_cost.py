"""The query path's own cost: what it used to do for nothing, now done once (bench/query_ratio.py measures it)."""

from __future__ import annotations

import random
import sqlite3
import statistics
import threading
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pytest

from memoryd.indexer.search import lineblend
from memoryd.indexer.storage.embedded.vectors import VectorIndex


@pytest.mark.parametrize("seed", range(6))
def test_the_blend_spread_is_exactly_statistics_pstdev(seed: int) -> None:
    """The blend's z-scores rank hits: its spread must be the very float ``statistics.pstdev`` gives."""
    rnd = random.Random(seed)
    cases = [[rnd.random() for _ in range(rnd.randint(1, 60))] for _ in range(300)]
    cases += [[round(rnd.random(), rnd.randint(0, 6)) for _ in range(rnd.randint(1, 40))] for _ in range(300)]
    cases += [[rnd.gauss(0, 1) * 10 ** rnd.randint(-8, 8) for _ in range(rnd.randint(1, 40))] for _ in range(300)]
    cases += [[0.25] * 7, [0.1, 0.2, 0.3], [1e-300, 1e300, -0.0], [3.0]]
    for values in cases:
        assert lineblend.pstdev(values).hex() == statistics.pstdev(values).hex(), values


def test_the_blend_spread_of_nothing_is_statistics_error() -> None:
    with pytest.raises(statistics.StatisticsError):
        lineblend.pstdev([])


class _Recording:
    """A FAISS index stand-in that notes the OpenMP thread count each search ran with."""

    def __init__(self, inner: object) -> None:
        self._inner = inner
        self.threads: list[int] = []

    def search(self, *args: object, **kwargs: object) -> object:
        self.threads.append(faiss.omp_get_max_threads())
        return self._inner.search(*args, **kwargs)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_a_search_on_any_thread_runs_faiss_on_that_thread_alone(kind: str) -> None:
    """OpenMP's thread count is per thread: the daemon's main-thread setting never reached the
    connection threads, whose every search woke an OpenMP team that then spun ~4 ms on a core."""
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((64, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = VectorIndex(16)
    index.maybe_switch(1, kind)
    index.add(list(range(1, 65)), vectors)
    recording = _Recording(index._index)
    index._index = recording
    seen: dict[str, Any] = {}

    def search() -> None:
        faiss.omp_set_num_threads(4)  # what a thread of its own starts with on a 4-core machine
        seen["hits"] = index.search(vectors[3], 5)
        seen["after"] = faiss.omp_get_max_threads()

    worker = threading.Thread(target=search)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert recording.threads == [1]
    assert seen["after"] == 4  # the thread's own setting is back: a build there keeps its cores
    assert seen["hits"][0][0] == 4


def test_one_query_reads_the_chunk_count_once() -> None:
    """The keyword plan, both proximity passes, the IDFs and the features each asked for it: five reads."""
    from memoryd.indexer.search.keyword_plan import DocFrequencies
    from memoryd.indexer.storage.embedded.hybrid import SqliteTerms

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE chunks (id INTEGER PRIMARY KEY)")
    conn.executemany("INSERT INTO chunks (id) VALUES (?)", [(i,) for i in (1, 2, 7)])
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    terms = SqliteTerms(conn, DocFrequencies())
    assert [terms.n_docs() for _ in range(4)] == [7, 7, 7, 7]
    assert sum("max(id)" in s for s in statements) == 1
    assert SqliteTerms(conn, DocFrequencies()).n_docs() == 7  # the next query reads it afresh
    assert sum("max(id)" in s for s in statements) == 2


def _index(tmp_path: Path) -> Any:
    from memoryd.indexer.embedding import load_embedder
    from memoryd.indexer.engine import open_index
    from tests.helpers import make_config

    cfg = make_config(tmp_path / "root", tmp_path / "data")
    return open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))


def _coverage(index: Any, query: str) -> tuple[int, float]:
    from memoryd.indexer.search.query import Query

    result = index.query(Query(query, k=1, mode="keyword", explain=True))
    return result.hits[0].chunk_id, result.explanations[0]["calibration"]["coverage"]


def test_kept_terms_are_dropped_when_a_write_replaces_the_chunk(tmp_path: Path) -> None:
    """The terms kept across queries belong to one generation of the index: a save that gives the same
    chunk id new words must be read anew (chunk ids are reused), or coverage would score the old text."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "MEMORY.md").write_text("# Notes\n\n- the quarterly report mentions walrus budgets\n", encoding="utf-8")
    index = _index(tmp_path)
    try:
        index.index_files([(root, "MEMORY.md")])
        first_id, before = _coverage(index, "walrus narwhal")
        assert 0.0 < before < 1.0  # one of the two words
        (root / "MEMORY.md").unlink()
        index.index_files([(root, "MEMORY.md")])  # the chunk goes; the next one takes its id again
        (root / "MEMORY.md").write_text("# Notes\n\n- the quarterly report mentions walrus narwhal\n",
                                        encoding="utf-8")
        index.index_files([(root, "MEMORY.md")])
        second_id, after = _coverage(index, "walrus narwhal")
        assert second_id == first_id  # the same id, other words: only the generation tells them apart
        assert after == 1.0
    finally:
        index.close()


def test_kept_terms_are_bounded_oldest_first() -> None:
    from memoryd.indexer.storage.embedded.chunk_terms import ChunkTerms

    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE chunks_fts USING fts5(terms)")
    conn.executemany("INSERT INTO chunks_fts (rowid, terms) VALUES (?, ?)", [(i, f"word{i}") for i in range(1, 6)])
    kept = ChunkTerms(max_entries=3)
    assert kept.terms(conn, [1, 2, 3, 4, 5], epoch=1) == {i: f"word{i}" for i in range(1, 6)}
    statements: list[str] = []
    conn.set_trace_callback(lambda sql: statements.append(sql) if sql.startswith("SELECT rowid") else None)
    assert kept.word_sets(conn, [5, 4, 3], epoch=1) == {i: frozenset({f"word{i}"}) for i in (5, 4, 3)}
    assert statements == []  # the three newest were kept
    assert kept.terms(conn, [1], epoch=1) == {1: "word1"} and len(statements) == 1  # the oldest were not
    assert kept.terms(conn, [5], epoch=2) == {5: "word5"} and len(statements) == 2  # another generation


def test_keyword_candidates_rows_are_read_while_the_vector_is_computed(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows of the keyword leg's candidates do not wait for the model; the answer is the same."""
    from memoryd.indexer.search.query import Query
    from memoryd.indexer.search.querytext import clean_query
    from memoryd.indexer.storage.embedded import hybrid

    root = tmp_path / "root"
    root.mkdir()
    for n in range(6):
        (root / f"n{n}.md").write_text(f"# Note {n}\n\n- the walrus budget review {n} is on Friday\n", encoding="utf-8")
    index = _index(tmp_path)
    try:
        index.index_files([(root, f"n{n}.md") for n in range(6)])
        query = "when is the walrus budget review"
        vector = index.embedder.embed_query(clean_query(query))
        order: list[str] = []
        real = hybrid.fetch_chunks

        def fetch(conn: Any, ids: Any) -> Any:
            order.append(f"rows {len(ids)}")
            return real(conn, ids)

        def pending() -> Any:
            order.append("vector")
            return vector

        ready = index.query(Query(query, k=4, mode="hybrid", explain=True)).to_json()  # embedded first: no wait
        monkeypatch.setattr(hybrid, "fetch_chunks", fetch)
        waited = index.query(Query(query, k=4, mode="hybrid", explain=True, query_vector=pending)).to_json()
        assert order[:2] == ["rows 6", "vector"]  # every keyword candidate's row before the wait
        ready.pop("took_ms"), waited.pop("took_ms")
        assert waited == ready
    finally:
        index.close()
