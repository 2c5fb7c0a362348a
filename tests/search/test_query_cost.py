"""The query path's own cost: what it used to do for nothing, now done once (bench/query_ratio.py measures it)."""

from __future__ import annotations

import random
import sqlite3
import statistics
import threading
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
