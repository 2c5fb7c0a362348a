"""The PostgreSQL backend's legs for the one query path: the same scores as the embedded backend.

* Keyword leg: BM25 computed in SQL exactly as FTS5's ``bm25()`` does (k1 = 1.2,
  b = 0.75, idf = ln((N - n + 0.5) / (n + 0.5)) floored at 1e-6, N and the average
  length over the whole table) on the terms memoryd's analyser produced, then the
  same proximity bonus (:mod:`memoryd.indexer.search.proximity`).
* Vector leg: pgvector's HNSW index (cosine); a filtered query (path prefix,
  excluded folders, chosen sites) uses pgvector's iterative index scan.
* Fusion, date boost, recency, MMR, calibration, abstention and merging: the one query
  path, :mod:`memoryd.indexer.search.pipeline`, as on the embedded backend (this module
  answers its legs, :mod:`memoryd.indexer.search.legs`).

Searches see every site's chunks unless ``sites`` names some.

Round trips: two per query when the corpus figures and the query's document frequencies
are cached and the query vector is at hand (the keyword passes and the vector leg go out
together in one pipeline, then one statement reads everything about the union of their
candidates, :mod:`memoryd.indexer.storage.postgres.fetch`); three when the caller computes
the vector on another thread (the keyword passes run meanwhile); up to two more reads of
the corpus figures, also while the vector is computed.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import psycopg

from memoryd.indexer.search import calibration, keyword_plan
from memoryd.indexer.search.legs import Found, QueryVector, Terms
from memoryd.indexer.search.proximity import word_terms
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.line_codec import best_cosines
from memoryd.indexer.storage.postgres import corpus
from memoryd.indexer.storage.postgres.fetch import JOIN, Candidates, fetch_candidates
from memoryd.indexer.storage.postgres.schema import EF_SEARCH, EF_SEARCH_MAX, hnsw_cast
from memoryd.indexer.storage.postgres.store import PgStore
from memoryd.indexer.storage.postgres.terms import fts_tokens
from memoryd.indexer.storage.rows import ChunkRow

K1, B = 1.2, 0.75
_JOIN = JOIN
Filter = tuple[str, list[Any]]  # SQL conditions on c/f/r (after WHERE), their parameters


def row_filter(prefix: str | None, exclude: Sequence[str], sites: Sequence[str] | None) -> Filter:
    """Conditions for the path prefix (relative, or absolute with its root), excluded folders and sites."""
    conds: list[str] = ["TRUE"]
    args: list[Any] = []
    if prefix:
        conds.append("(starts_with(f.path, %s) OR starts_with(r.path || '/' || f.path, %s))")
        args += [prefix, prefix]
    for ex in exclude:
        conds.append("NOT starts_with(f.path, %s)")
        args.append(ex)
    if sites is not None:
        conds.append("r.site = ANY(%s)")
        args.append([s for s in sites if "\x00" not in s])  # PostgreSQL text holds no NUL: no such site
    return " AND ".join(conds), args


class PgVectors:
    """The vector side of the interface on pgvector: vectors live in the chunk rows.

    A chunk row takes its vector in its own transaction when the cache holds it; one committed
    before its vector (keyword first) has a NULL embedding, which :meth:`add` writes, and which
    every read here skips (such a chunk is "pending": the query path gives it a neutral cosine)."""

    kind = "pgvector-hnsw"
    tombstones = 0
    rebuilding = None
    dirty = False
    auto_rebuild = False

    def wanted(self) -> None:
        """No rebuild is ever due: pgvector maintains its HNSW index in every write."""
        return None

    def __init__(self, store: PgStore, dimension: int) -> None:
        self._store = store
        self.dimension = dimension
        self._cast = hnsw_cast(dimension)

    @property
    def size(self) -> int:
        """Chunks with a vector, every site's (the vectorless ones are read through their partial index)."""
        with self._store.connection() as c:
            row = c.execute("SELECT (SELECT count(*) FROM memoryd_chunks)"
                            " - (SELECT count(*) FROM memoryd_chunks WHERE embedding IS NULL)").fetchone()
        return int(row[0]) if row else 0

    def add(self, ids: Iterable[int], vectors: Any) -> None:
        """Write the vectors of chunks committed without one (keyword first: the vector backlog's steps).

        A row that has its vector already is left alone, and a chunk deleted meanwhile is simply not
        updated. The engine does not call this for the chunks it commits with their vector
        (``Capabilities.vectors_in_rows``): those rows took it from the cache in their own transaction."""
        wanted = [int(i) for i in ids]
        if not wanted:
            return
        mat = np.asarray(vectors, dtype=np.float32)
        with self._store.transaction() as c, c.cursor() as cur:
            cur.executemany("UPDATE memoryd_chunks SET embedding = %s WHERE id = %s AND embedding IS NULL",
                            [(np.ascontiguousarray(mat[n]), i) for n, i in enumerate(wanted)])

    def remove(self, ids: Iterable[int]) -> int:
        """Nothing to do: deleting a chunk row deleted its vector."""
        return 0

    @property
    def cast(self) -> str:
        """The vector type the HNSW index is built on (``vector(n)`` or ``halfvec(n)``)."""
        return self._cast

    def search_sql(self, query: Any, k: int, where: Filter = ("TRUE", [])) -> tuple[str, list[Any]]:
        """The nearest-``k`` statement and its parameters (rows: id, cosine)."""
        q = np.asarray(query, dtype=np.float32)
        dist = f"c.embedding::{self._cast} <=> %s::{self._cast}"
        join = "" if where[0] == "TRUE" else _JOIN
        # LIMIT is written into the statement: as a parameter the planner cannot see that it is
        # small, and prefers a sequential scan and a sort to the HNSW index (40x slower at 3k rows).
        # (the HNSW index holds no NULL; an exact scan must skip the chunks still waiting for their vector)
        sql = (f"SELECT c.id, 1 - ({dist}) AS s FROM memoryd_chunks c{join}"
               f" WHERE c.embedding IS NOT NULL AND {where[0]} ORDER BY {dist} LIMIT {int(k)}")
        return sql, [q, *where[1], q]

    def search(self, query: Any, k: int, where: Filter = ("TRUE", []),
               conn: psycopg.Connection[Any] | None = None) -> list[tuple[int, float]]:
        """The nearest ``k`` (id, cosine), best first; on ``conn`` when given (a search already holding one
        must not wait for a second from the pool)."""
        sql, params = self.search_sql(query, k, where)
        with contextlib.nullcontext(conn) if conn is not None else self._store.connection() as c:
            if 2 * int(k) <= EF_SEARCH:  # the session settings (memoryd...connect.open_pool) suffice: one round trip
                rows = c.execute(sql, params).fetchall()
            else:
                with c.transaction():
                    # at least 2k, never below the session's own breadth (it grows with the table)
                    c.execute("SELECT set_config('hnsw.ef_search', least(%s, greatest("
                              "current_setting('hnsw.ef_search')::int, %s))::text, true)", (EF_SEARCH_MAX, 2 * int(k)))
                    rows = c.execute(sql, params).fetchall()
        return ranked_by_score(rows)

    def scores_for(self, query: Any, ids: Iterable[int]) -> dict[int, float]:
        wanted = [int(i) for i in ids]
        if not wanted:
            return {}
        q = np.asarray(query, dtype=np.float32)
        with self._store.connection() as c:
            rows = c.execute(f"SELECT id, 1 - (embedding::{self._cast} <=> %s::{self._cast}) FROM memoryd_chunks"
                             " WHERE id = ANY(%s) AND embedding IS NOT NULL", (q, wanted)).fetchall()
        return {int(i): float(s) for i, s in rows}

    def vectors_of(self, ids: Sequence[int]) -> Any:
        """The stored vectors of ``ids`` as rows (a zero row for a chunk without one, as the FAISS index gives)."""
        with self._store.connection() as c:
            rows = dict(c.execute("SELECT id, embedding FROM memoryd_chunks WHERE id = ANY(%s)"
                                  " AND embedding IS NOT NULL", (list(ids),)).fetchall())
        zero = np.zeros(self.dimension, dtype=np.float32)
        return np.stack([np.asarray(rows[i].to_numpy(), dtype=np.float32) if i in rows else zero for i in ids])


class PgLegs:
    """The query side of the PostgreSQL backend: :class:`PgSession` per query."""

    def __init__(self, store: PgStore, vectors: PgVectors) -> None:
        self._store = store
        self._vectors = vectors
        self._stats = StatsCache()

    @contextmanager
    def session(self, query: Query, terms: Terms) -> Iterator[PgSession]:
        """One pooled connection for the query. The corpus figures and every document frequency the
        query reads are fetched first (later reads hit the cache), while the query's embedding, when
        the caller computes it on another thread, is still being computed."""
        with self._store.connection() as conn:
            self._stats.table(conn)
            self._stats.doc_frequencies(conn, [*_tokens(terms.expanded), *word_terms(terms.terms),
                                               *_tokens(terms.features), *terms.terms])
            yield PgSession(conn, self._stats, self._vectors,
                            row_filter(query.path_prefix, query.exclude_prefixes, query.sites))


class PgSession:
    """One query's legs on PostgreSQL (:class:`memoryd.indexer.search.legs.LegSession`).

    :meth:`chunks` reads everything about the candidates in one statement
    (:mod:`memoryd.indexer.storage.postgres.fetch`); the cosines and stored terms asked for
    afterwards come from that read."""

    def __init__(self, conn: psycopg.Connection[Any], stats: StatsCache, vectors: PgVectors, where: Filter) -> None:
        self._conn = conn
        self._stats = stats
        self._vectors = vectors
        self._where = where
        self._union = Candidates()

    def snapshot(self) -> contextlib.nullcontext[None]:
        """Nothing to hold: each statement reads one committed state of the database."""
        return contextlib.nullcontext()

    def candidates(self, terms: Terms, n_keyword: int, n_vector: int, vector: QueryVector,
                   early: Callable[[dict[int, float]], None]) -> Found:
        """The keyword leg (``n_keyword`` deep) and the vector leg (``n_vector``).

        A pending query vector (the caller computes it on another thread) makes the keyword passes
        run first, while it is computed, and the vector leg after; at 100k chunks the keyword leg's
        server time is as long as the embedding. Otherwise all go out together in a psycopg
        pipeline: the statements leave back to back and their results come back together, one
        round trip. A vector leg deeper than the session's ``ef_search`` needs its own transaction,
        and a libpq without pipelines runs them one by one; the results are the same.
        """
        conn, where = self._conn, self._where
        stmts, kplan = self._keyword_statements(terms.expanded, n_keyword)
        kw_rows: list[list[Any]] | None = None
        qvec = vector.ready
        if qvec is None and vector.pending is not None:
            kw_rows = _run(conn, stmts) if stmts else []
            stmts, qvec = [], vector.pending()
        pipelined = qvec is None or 2 * n_vector <= EF_SEARCH
        if pipelined and qvec is not None:
            stmts.append(self._vectors.search_sql(qvec, n_vector, where))
        results = _run(conn, stmts)
        vec: dict[int, float] = {}
        if qvec is not None:
            vec = dict(ranked_by_score(results.pop()) if pipelined
                       else self._vectors.search(qvec, n_vector, where, conn))
        return Found(_best_of(results if kw_rows is None else kw_rows, n_keyword), kplan, vec, qvec)

    def chunks(self, ids: Sequence[int], qvec: Any) -> dict[int, ChunkRow]:
        self._union = fetch_candidates(self._conn, ids, qvec, self._vectors.cast)
        return self._union.rows

    def cosines(self, qvec: Any, ids: Sequence[int]) -> dict[int, float]:
        """From :meth:`chunks`' read, which computed every candidate's cosine with the leg's expression."""
        wanted = set(ids)
        return {i: s for i, s in self._union.cosines.items() if i in wanted}

    def chunk_terms(self, ids: Sequence[int]) -> dict[int, str]:
        terms = self._union.terms
        return {i: terms[i] for i in ids if i in terms}

    def doc_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        return self._stats.doc_frequencies(self._conn, list(terms))

    def n_docs(self) -> int:
        return self._stats.table(self._conn)[2]  # max(id), as the embedded backend counts documents

    def features(self, ids: Sequence[int], terms: Sequence[str],
                 cosines: dict[int, float] | None) -> dict[int, calibration.Features]:
        """From the query tokens each hit holds in its terms (read with the candidates; the embedded
        backend reads FTS5's stored terms, and both hold the same analyser terms)."""
        tokens = _tokens(terms)
        df = self._stats.doc_frequencies(self._conn, tokens) if tokens else {}
        return calibration.features_from(ids, tokens, df, self._stats.table(self._conn)[2],
                                         self._union.held(ids, tokens), cosines)

    def vectors_of(self, ids: Sequence[int]) -> Any:
        return self._vectors.vectors_of(ids)

    def line_cosines(self, qvec: Any, ids: Sequence[int]) -> dict[int, float]:
        """The best line cosine of each chunk among ``ids`` whose line vectors are filled in (any site's):
        one statement on the query's connection."""
        if not ids:
            return {}
        rows = self._conn.execute("SELECT chunk_id, vectors FROM memoryd_line_vectors WHERE chunk_id = ANY(%s)",
                                  (list(ids),)).fetchall()
        return best_cosines(rows, qvec)

    def _keyword_statements(self, terms: Sequence[str], n: int,
                            ) -> tuple[list[tuple[str, list[Any]]], keyword_plan.KeywordPlan]:
        """One BM25 statement per pass of the keyword plan (rows: chunk id, score; best first).

        The work is bounded exactly as the embedded leg bounds it
        (:func:`memoryd.indexer.search.keyword_plan.plan`): one exact pass when few rows can
        match, else a pass over the rare terms and one over the newest chunks, each a lower
        bound of the exact score; a chunk found by both keeps its better score."""
        tokens = _tokens(terms)
        if not tokens:
            return [], keyword_plan.KeywordPlan((), exact=True)
        where = self._where
        n_docs, avgdl, max_id = self._stats.table(self._conn)
        df = self._stats.doc_frequencies(self._conn, tokens)
        kplan = keyword_plan.plan(tokens, df, max_id, keyword_plan.ROW_BUDGET, keyword_plan.SCAN_BUDGET)
        stmts: list[tuple[str, list[Any]]] = []
        for p in kplan.passes:
            # N never below a term's df (figures read a moment apart while others write)
            idfs = [max(math.log((max(n_docs, df[t]) - df[t] + 0.5) / (df[t] + 0.5)), 1e-6) for t in p.terms]
            # Unfiltered: an index-only scan of each term's postings. Filtered: the same, joined to
            # the chunk's file and root for the conditions.
            join = "" if where[0] == "TRUE" else f" JOIN memoryd_chunks c ON c.id = p.chunk_id{_JOIN}"
            stmts.append((
                "SELECT p.chunk_id, sum(q.idf * p.tf * %s / (p.tf + %s * (1 - %s + %s * p.dl / %s))) AS s"
                f" FROM memoryd_postings p JOIN unnest(%s::text[], %s::float8[]) AS q(term, idf) ON q.term = p.term"
                f"{join} WHERE p.term = ANY(%s) AND p.chunk_id >= %s AND {where[0]}"
                f" GROUP BY p.chunk_id ORDER BY s DESC, p.chunk_id LIMIT {int(n)}",
                [K1 + 1, K1, B, B, avgdl, list(p.terms), idfs, list(p.terms), p.min_rowid, *where[1]],
            ))
        return stmts, kplan


class StatsCache:
    """BM25's corpus figures (rows, average length, document frequencies), kept while the table is unchanged.

    Every write keeps them in the database (:mod:`memoryd.indexer.storage.postgres.corpus`), with a
    counter it bumps; every ``ttl_s`` a read of that one row (~0.1 ms) says whether anything changed
    anywhere, and then the remembered document frequencies are dropped and read again as queries
    need them (one indexed read per query for the tokens not remembered). Until that check, scores
    use figures up to ``ttl_s`` old (a few documents out of thousands: ranks barely move).
    """

    def __init__(self, ttl_s: float = 2.0) -> None:
        self.ttl_s = ttl_s
        self._checked = float("-inf")  # when the totals were last read
        self._table: tuple[int, float, int] | None = None
        self._writes: int | None = None
        self._df: dict[str, int] = {}

    def _check(self, conn: psycopg.Connection[Any]) -> None:
        """Read the totals at most once per ``ttl_s``; forget every document frequency after a write."""
        now = time.monotonic()
        if now - self._checked <= self.ttl_s and self._table is not None:
            return
        n, length, max_id, writes = corpus.totals(conn)
        self._checked = now
        self._table = (n, length / n if n else 1.0, max_id)
        if writes != self._writes:
            self._writes = writes
            self._df = {}  # a new dict: a search on another thread keeps reading the one it holds

    def table(self, conn: psycopg.Connection[Any]) -> tuple[int, float, int]:
        """(rows, average terms per row, highest chunk id)."""
        self._check(conn)
        table = self._table  # set by the first check, only ever replaced
        assert table is not None
        return table

    def doc_frequencies(self, conn: psycopg.Connection[Any], tokens: Sequence[str]) -> dict[str, int]:
        self._check(conn)
        df = self._df  # searches run on several threads: work on this one dict, whichever replaces it
        if len(df) > 50_000:
            df = self._df = {}
        missing = [t for t in dict.fromkeys(tokens) if t not in df]
        if missing:
            df.update(corpus.document_frequencies(conn, missing))
            table = self._table
            if table is not None and any(df[t] > table[0] for t in missing):
                # read after a write the remembered totals predate (N < df makes BM25's IDF a log of a
                # negative number): read the totals again now rather than at the end of the ttl
                self._checked = float("-inf")
                self._check(conn)
        return {t: df[t] for t in tokens}


def _tokens(terms: Sequence[str]) -> list[str]:
    """The postings' tokens of the analyser's ``terms``, first occurrence first."""
    return list(dict.fromkeys(t for term in terms for t in fts_tokens(term)))


def _best_of(passes: Sequence[Sequence[Any]], n: int) -> dict[int, float]:
    """The keyword passes' rows merged: a chunk found by several keeps its best score; best ``n`` first."""
    best: dict[int, float] = {}
    for rows in passes:
        for i, sc in rows:
            best[int(i)] = max(best.get(int(i), float("-inf")), float(sc))
    if len(passes) <= 1:
        return best
    return dict(sorted(best.items(), key=lambda kv: -kv[1])[:n])


def _run(conn: psycopg.Connection[Any], stmts: Sequence[tuple[str, list[Any]]]) -> list[list[Any]]:
    """Every statement's rows; several go out in one pipeline (one round trip) where libpq has them."""
    if psycopg.Pipeline.is_supported() and len(stmts) > 1:
        with conn.pipeline():
            cursors = [conn.execute(sql, args) for sql, args in stmts]
        return [cur.fetchall() for cur in cursors]
    return [conn.execute(sql, args).fetchall() for sql, args in stmts]


def ranked_by_score(rows: Sequence[Any]) -> list[tuple[int, float]]:
    """(id, cosine) rows, best first."""
    return sorted(((int(i), float(s)) for i, s in rows), key=lambda kv: -kv[1])
