"""The embedded backend's legs (SQLite FTS5 + FAISS) for the one query path.

:mod:`memoryd.indexer.search.pipeline` runs every query; this module answers its
:mod:`~memoryd.indexer.search.legs` calls on the embedded index: the keyword leg is FTS5's
``bm25()`` (negative and unbounded, so it is negated), its work bounded at any corpus size
by :mod:`memoryd.indexer.search.keyword_plan`; the vector leg is the FAISS index; rows,
stored terms and document frequencies come from a read-only SQLite connection of the
:class:`ReaderPool`. The index's write lock is the legs' snapshot: holding it while reading
both legs means a search never sees a file half-replaced between SQLite and FAISS.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from queue import Empty, Queue
from typing import Any

from memoryd.indexer.errors import StoreClosedError
from memoryd.indexer.search import calibration, keyword, keyword_plan
from memoryd.indexer.search.legs import Found, QueryVector, Terms
from memoryd.indexer.search.pipeline import SearchError
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.embedded.chunk_terms import ChunkTerms
from memoryd.indexer.storage.embedded.store import fetch_chunks
from memoryd.indexer.storage.embedded.store_lines import read_best_cosines
from memoryd.indexer.storage.embedded.vectors import VectorIndex
from memoryd.indexer.storage.rows import ChunkRow

__all__ = ["QUERY_TIME_LIMIT_S", "EmbeddedLegs", "EmbeddedSession", "ReaderPool", "SearchError", "SqliteTerms"]

QUERY_TIME_LIMIT_S = 2.0


class ReaderPool:
    """A few read-only SQLite connections shared by searching threads."""

    def __init__(self, factory: Callable[[], sqlite3.Connection], size: int = 4) -> None:
        self._factory = factory
        self._idle: Queue[sqlite3.Connection] = Queue()
        self._size = size
        self._closed = False

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        if self._closed:
            raise StoreClosedError("searcher is closed")
        try:
            conn = self._idle.get_nowait()
        except Empty:
            conn = self._factory()
        deadline = time.monotonic() + QUERY_TIME_LIMIT_S
        conn.set_progress_handler(lambda: int(time.monotonic() > deadline), 10_000)
        try:
            yield conn
        finally:
            conn.set_progress_handler(None, 0)
            if self._closed or self._idle.qsize() >= self._size:
                conn.close()
            else:
                self._idle.put(conn)

    def close(self) -> None:
        self._closed = True
        while True:
            try:
                self._idle.get_nowait().close()
            except Empty:
                return


class EmbeddedLegs:
    """The query side of the embedded index: :class:`EmbeddedSession` per query."""

    def __init__(self, readers: ReaderPool, vectors: VectorIndex, lock: threading.Lock) -> None:
        self._readers = readers
        self._vectors = vectors
        self._lock = lock
        self._df = keyword_plan.DocFrequencies()
        self._terms = ChunkTerms()  # kept across queries while no commit is seen (chunk_terms.py)

    @contextmanager
    def session(self, query: Query, terms: Terms) -> Iterator[EmbeddedSession]:
        """A reader connection for one query; a query stopped by the time limit is a :class:`SearchError`."""
        try:
            with self._readers.connection() as conn:
                yield EmbeddedSession(conn, self._df, self._vectors, self._lock, query, self._terms)
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                raise SearchError(f"query took longer than {QUERY_TIME_LIMIT_S:.0f} s and was stopped") from None
            raise


class SqliteTerms:
    """Corpus figures and chunks' stored terms on one SQLite connection, for one query; the terms read
    are kept in ``shared`` (:class:`ChunkTerms`, the index's: across queries of one generation) or, without
    it, for the rest of this query (proximity reads them, calibration reads the hits' again)."""

    def __init__(self, conn: sqlite3.Connection, df: keyword_plan.DocFrequencies,
                 shared: ChunkTerms | None = None) -> None:
        self._conn = conn
        self._df = df
        self._terms = shared if shared is not None else ChunkTerms()
        self._epoch: int | None = None
        self._n_docs: int | None = None

    def _generation(self) -> int:
        """The index generation this query reads (commits noticed once per query, at its first read)."""
        if self._epoch is None:
            self._df.sync(self._conn)
            self._epoch = self._df.epoch
        return self._epoch

    def n_docs(self) -> int:
        """The highest chunk id, read once per query: the keyword plan, both proximity passes, the IDFs of
        the matched lines and the calibration features all ask (five reads of one figure a query), and one
        query's figures belong together (the first read is the plan's, under the index lock)."""
        if self._n_docs is None:
            self._n_docs = int(self._conn.execute("SELECT max(id) FROM chunks").fetchone()[0] or 0)
        return self._n_docs

    def doc_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        return self._df.lookup(self._conn, terms)

    def chunk_terms(self, ids: Sequence[int]) -> dict[int, str]:
        return self._terms.terms(self._conn, ids, self._generation())


class EmbeddedSession(SqliteTerms):
    """One query's legs on the embedded index (:class:`memoryd.indexer.search.legs.LegSession`)."""

    def __init__(self, conn: sqlite3.Connection, df: keyword_plan.DocFrequencies, vectors: VectorIndex,
                 lock: threading.Lock, query: Query, shared: ChunkTerms | None = None) -> None:
        super().__init__(conn, df, shared)
        self._vectors = vectors
        self._lock = lock
        self._query = query
        self._rows: dict[int, ChunkRow] = {}  # the keyword candidates' rows, read while the model worked

    def snapshot(self) -> threading.Lock:
        return self._lock

    def candidates(self, terms: Terms, n_keyword: int, n_vector: int, vector: QueryVector,
                   early: Callable[[dict[int, float]], None]) -> Found:
        """The keyword leg, then (while a pending query vector is computed) ``early`` on its best
        ``n_vector``, then the vector leg."""
        q = self._query
        allowed = _allowed_ids(self._conn, q.path_prefix, q.exclude_prefixes) \
            if q.path_prefix or q.exclude_prefixes else None
        plan = self._keyword_plan(terms.expanded)
        kw_deep = _keyword_leg(self._conn, plan, n_keyword, allowed)
        best = dict(list(kw_deep.items())[:n_vector])
        early(best)
        if vector.ready is None and vector.pending is not None:
            # The model is still at work: read the keyword candidates' rows now, not after it.
            self._rows = fetch_chunks(self._conn, list(best))
        qvec = vector.ready if vector.ready is not None else vector.pending() if vector.pending is not None else None
        return Found(kw_deep, plan, self._vector_leg(qvec, n_vector, allowed), qvec)

    def chunks(self, ids: Sequence[int], qvec: Any) -> dict[int, ChunkRow]:
        """The rows of ``ids``: those :meth:`candidates` read while the query vector was computed (under the
        same lock: the same snapshot), and the others."""
        known = self._rows
        if not known:
            return fetch_chunks(self._conn, ids)
        out = {i: known[i] for i in ids if i in known}
        out.update(fetch_chunks(self._conn, [i for i in ids if i not in known]))
        return out

    def cosines(self, qvec: Any, ids: Sequence[int]) -> dict[int, float]:
        return self._vectors.scores_for(qvec, ids)

    def features(self, ids: Sequence[int], terms: Sequence[str],
                 cosines: dict[int, float] | None) -> dict[int, calibration.Features]:
        """Read outside the index lock: only FTS terms and document frequencies, and a chunk replaced
        meanwhile merely loses its coverage (the terms proximity read are not read again)."""
        if not terms:
            return calibration.features_from(ids, terms, {}, self.n_docs(), {}, cosines)
        df = self._df.lookup(self._conn, terms)
        words = self._terms.word_sets(self._conn, ids, self._generation())
        return calibration.features_from(ids, terms, df, self.n_docs(), words, cosines)

    def vectors_of(self, ids: Sequence[int]) -> Any:
        with self._lock:
            return self._vectors.vectors_of(ids)

    def line_cosines(self, qvec: Any, ids: Sequence[int]) -> dict[int, float]:
        return read_best_cosines(self._conn, qvec, ids)

    def _keyword_plan(self, terms: list[str]) -> keyword_plan.KeywordPlan:
        """The FTS5 passes for ``terms``, without the terms no chunk holds: they add nothing to any BM25
        and match no row, yet each costs FTS5 a lookup in every index segment and a turn of its OR for
        every row (a pasted Chinese dialogue has ~100 such character bigrams: ~5 ms of a ~6 ms leg).
        Called under the index lock, so no commit lands between the check and the search."""
        if not terms:
            return keyword_plan.KeywordPlan((), exact=True)
        self._generation()  # notices a commit: cached zeros and the kept terms are read again
        df = self._df.lookup(self._conn, terms)
        present = [t for t in terms if df[t] > 0]
        absent = tuple(t for t in terms if df[t] == 0)
        if not present:
            return keyword_plan.KeywordPlan((), exact=True, absent=absent)
        plan = keyword_plan.plan(present, df, self.n_docs(), keyword_plan.ROW_BUDGET, keyword_plan.SCAN_BUDGET)
        return replace(plan, absent=absent)

    def _vector_leg(self, qvec: Any, n: int, allowed: set[int] | None) -> dict[int, float]:
        if qvec is None:
            return {}
        if allowed is None:
            return dict(self._vectors.search(qvec, n))
        scores = self._vectors.scores_for(qvec, allowed)
        return dict(sorted(scores.items(), key=lambda kv: -kv[1])[:n])


def _keyword_leg(
    conn: sqlite3.Connection, plan: keyword_plan.KeywordPlan, n: int, allowed: set[int] | None,
) -> dict[int, float]:
    """The ``n`` best chunks by (negated) BM25, best first; a chunk found by several passes keeps its
    best score (each pass is a lower bound of the exact BM25, see :mod:`memoryd.indexer.search.keyword_plan`)."""
    limit = n if allowed is None else max(n * 20, 1000)
    best: dict[int, float] = {}
    for p in plan.passes:
        rows = conn.execute(
            "SELECT rowid, bm25(chunks_fts) FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid >= ?"
            " ORDER BY rank LIMIT ?", (keyword.match_any(p.terms), p.min_rowid, limit),
        ).fetchall()
        for i, s in rows:
            if allowed is None or int(i) in allowed:
                best[int(i)] = max(best.get(int(i), float("-inf")), -float(s))
    if len(plan.passes) == 1:
        return dict(list(best.items())[:n])  # already in rank order
    return dict(sorted(best.items(), key=lambda kv: -kv[1])[:n])


def _starts(column: str, n: int) -> str:
    """SQL: ``column`` starts with parameter ``?n``, exactly (``LIKE`` would fold ASCII case and treat ``_``
    and ``%`` as wildcards: peer ``bob`` would see ``peers/Bob/``)."""
    return f"substr({column}, 1, length(?{n})) = ?{n}"


def _allowed_ids(conn: sqlite3.Connection, prefix: str | None, exclude: Sequence[str] = ()) -> set[int]:
    """Chunk ids whose path (relative, or absolute with its root) starts with ``prefix``,
    and whose relative path starts with none of ``exclude``."""
    absolute = "r.path || '/' || f.path"
    sql = ("SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id JOIN roots r ON r.id = f.root_id"
           f" WHERE (?1 IS NULL OR {_starts('f.path', 1)} OR {_starts(absolute, 1)})")
    args: list[str | None] = [prefix or None]
    for ex in exclude:
        sql += f" AND NOT {_starts('f.path', len(args) + 1)}"
        args.append(ex)
    return {int(r[0]) for r in conn.execute(sql, args)}
