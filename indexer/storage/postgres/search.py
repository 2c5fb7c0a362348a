"""Hybrid search on PostgreSQL: the same legs, scores and fusion as the embedded backend.

* Keyword leg: BM25 computed in SQL exactly as FTS5's ``bm25()`` does (k1 = 1.2,
  b = 0.75, idf = ln((N - n + 0.5) / (n + 0.5)) floored at 1e-6, N and the average
  length over the whole table) on the terms memoryd's analyser produced, then the
  same proximity bonus (:mod:`memoryd.indexer.search.proximity`).
* Vector leg: pgvector's HNSW index (cosine); a filtered query (path prefix,
  excluded folders, chosen sites) uses pgvector's iterative index scan.
* Fusion, date boost, recency, MMR, abstention and merging: inherited unchanged
  from :class:`memoryd.indexer.search.hybrid.HybridSearcher`.

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
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg

from memoryd.indexer import keyword
from memoryd.indexer.config import SearchConfig, SearchMode
from memoryd.indexer.search import calibration, fallback, intent, keyword_plan
from memoryd.indexer.search.hits import MAX_MERGED_CHUNKS, Hit, SearchResult
from memoryd.indexer.search.hybrid import HybridSearcher
from memoryd.indexer.search.proximity import idf as proximity_idf
from memoryd.indexer.search.proximity import pair_terms, proximity_scores, word_terms
from memoryd.indexer.search.querytext import clean_query
from memoryd.indexer.search.shaping import calibrated, checked
from memoryd.indexer.storage.postgres import corpus
from memoryd.indexer.storage.postgres.fetch import JOIN, Candidates, fetch_candidates
from memoryd.indexer.storage.postgres.schema import EF_SEARCH, EF_SEARCH_MAX, hnsw_cast
from memoryd.indexer.storage.postgres.store import PgStore
from memoryd.indexer.storage.postgres.terms import fts_tokens
from memoryd.indexer.types import Embedder

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
    """The vector side of the interface on pgvector: vectors live in the chunk rows, so writes are no-ops."""

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
        self._cast = hnsw_cast(dimension)

    @property
    def size(self) -> int:
        with self._store.connection() as c:
            row = c.execute("SELECT count(*) FROM memoryd_chunks").fetchone()
        return int(row[0]) if row else 0

    def add(self, ids: Iterable[int], vectors: Any) -> None:
        """Nothing to do: a chunk row got its vector in its own transaction."""

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
        sql = (f"SELECT c.id, 1 - ({dist}) AS s FROM memoryd_chunks c{join} WHERE {where[0]}"
               f" ORDER BY {dist} LIMIT {int(k)}")
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
                             " WHERE id = ANY(%s)", (q, wanted)).fetchall()
        return {int(i): float(s) for i, s in rows}

    def vectors_of(self, ids: Sequence[int]) -> Any:
        with self._store.connection() as c:
            rows = dict(c.execute("SELECT id, embedding FROM memoryd_chunks WHERE id = ANY(%s)",
                                  (list(ids),)).fetchall())
        return np.stack([np.asarray(rows[i].to_numpy(), dtype=np.float32) for i in ids])


class PgSearcher(HybridSearcher):
    """:class:`HybridSearcher` with both legs answered by PostgreSQL."""

    def __init__(self, store: PgStore, vectors: PgVectors, embedder: Embedder | None,
                 lock: threading.Lock, cfg: SearchConfig) -> None:
        super().__init__(None, vectors, embedder, lock, cfg)  # type: ignore[arg-type]  # no SQLite readers
        self._store = store
        self._pgvectors = vectors
        self._stats = StatsCache()

    def search(
        self, query: str, *, k: int | None = None, mode: SearchMode | None = None,
        path_prefix: str | None = None, min_score: float | None = None, explain: bool = False,
        exclude_prefixes: Sequence[str] = (), query_vector: Callable[[], Any] | None = None,
        path_check: Callable[[str, str], bool] | None = None, sites: Sequence[str] | None = None,
    ) -> SearchResult:
        """One query, as :meth:`HybridSearcher.search`; ``sites`` limits it to those sites' files."""
        return self._pg_search(query, k=k, mode=mode, path_prefix=path_prefix, min_score=min_score, explain=explain,
                               exclude_prefixes=exclude_prefixes, query_vector=query_vector, path_check=path_check,
                               sites=sites)

    def _pg_search(
        self, query: str, *, k: int | None, mode: SearchMode | None, path_prefix: str | None,
        min_score: float | None, explain: bool, exclude_prefixes: Sequence[str],
        query_vector: Callable[[], Any] | None, path_check: Callable[[str, str], bool] | None,
        sites: Sequence[str] | None, candidates: int | None = None, widened: dict[str, Any] | None = None,
    ) -> SearchResult:
        """:meth:`search`, with ``candidates`` per leg when given (then ``widened`` says why: the
        weak-result fallback, :mod:`memoryd.indexer.search.fallback`, as the embedded backend runs it)."""
        t0 = time.perf_counter()
        raw_query, query = query, clean_query(query)
        k = k or self._cfg.k
        mode = self._mode(mode)
        terms = keyword.query_terms(query) if mode != "vector" else []
        n_cand = max(candidates or self._cfg.candidates, k)
        expanded, added = self._synonyms.expand(query, terms) if terms else (terms, {})
        intents = intent.classify(query) if mode != "vector" else ()
        where = row_filter(path_prefix, exclude_prefixes, sites)
        feature_terms = terms or keyword.query_terms(query)
        with self._store.connection() as conn:
            # The corpus figures and every document frequency this query reads (later reads hit the
            # cache), fetched while the query's embedding, when started by the caller, is computed.
            self._stats.table(conn)
            self._stats.doc_frequencies(conn, [*_tokens(expanded), *word_terms(terms), *_tokens(feature_terms),
                                               *terms])
            qvec: Any = None
            if mode != "keyword" and self._embedder is not None:
                qvec = query_vector if query_vector is not None else self._embedder.embed_query(query)
            (kw_deep, plan), vec, qvec = self._legs(conn, expanded, 4 * n_cand, n_cand, where, qvec)
            kw = dict(list(kw_deep.items())[:n_cand])
            cands = list(dict.fromkeys([*vec, *kw]))
            union = fetch_candidates(conn, cands, qvec if mode == "hybrid" else None, self._pgvectors.cast)
            kw_ranked = self._proximity(conn, terms, kw, union)
            if mode == "hybrid" and qvec is not None:
                vec.update({i: s for i, s in union.cosines.items() if i not in vec})
                deeper = {i: kw_deep[i] for i in cands if i not in kw and i in kw_deep}
                kw.update(deeper)
                kw_ranked.update(self._proximity(conn, terms, deeper, union))
            rows = union.rows
            if path_check is not None:
                rows = checked(rows, path_check)
            ranked = self._rerank(self._fuse(mode, cands, vec, kw_ranked, rows, query, intents), rows, k,
                                  qvec is not None)
            head = ranked[: k * MAX_MERGED_CHUNKS]  # nothing below can be returned, even after merging
            # whose file each is: the same root and path on two sites are two files, never merged into one hit
            head = [replace(h, site=union.sites.get(h.chunk_id)) for h in head]
            fitted = qvec is not None and self._embedder is not None \
                and calibration.fitted_for(self._embedder.model_id)
            feats = self._pg_features(conn, head, feature_terms, vec if fitted else None, union)
            idfs = self._pg_idfs(conn, terms)
        hits = calibrated(head, feats)
        weak = fallback.wider(self._cfg, n_cand, len(ranked), hits, fallback.threshold(self._cfg, min_score)) \
            if candidates is None and mode == "hybrid" and qvec is not None else None
        if weak is not None:
            wide = self._pg_search(raw_query, k=k, mode=mode, path_prefix=path_prefix, min_score=min_score,
                                   explain=explain, exclude_prefixes=exclude_prefixes, query_vector=lambda: qvec,
                                   path_check=path_check, sites=sites, candidates=weak["candidates"], widened=weak)
            return replace(wide, took_ms=(time.perf_counter() - t0) * 1000)  # both passes
        hits, reason, explanations = self._finish(
            hits, head, feats, k=k, min_score=min_score, idfs=idfs, vec=vec, kw=kw, rows=rows, cands=cands,
            mode=mode, has_vectors=qvec is not None, explain=explain)
        return SearchResult(
            mode=mode, hits=hits, abstained=reason is not None, reason=reason,
            keyword_plan=plan.describe() if explain and terms else None,
            query_searched=query if explain and query != raw_query else None,
            explanations=explanations, took_ms=(time.perf_counter() - t0) * 1000,
            query_analysis={"intent": list(intents), "synonyms": added, "fallback": widened} if explain else None,
        )

    def _legs(self, conn: psycopg.Connection[Any], terms: Sequence[str], n_kw: int, n_vec: int, where: Filter,
              qvec: Any) -> tuple[tuple[dict[int, float], keyword_plan.KeywordPlan], dict[int, float], Any]:
        """The keyword leg (``n_kw`` deep) and the vector leg (``n_vec``); also returns the query vector.

        ``qvec`` is the query vector, None (no vector leg) or a callable that waits for it (the
        caller computes it on another thread): then the keyword passes run first, while it is
        computed, and the vector leg after; at 100k chunks the keyword leg's server time is as
        long as the embedding. Otherwise all go out together in a psycopg pipeline: the
        statements leave back to back and their results come back together, one round trip.
        A vector leg deeper than the session's ``ef_search`` needs its own transaction, and a
        libpq without pipelines runs them one by one; the results are the same.
        """
        stmts, kplan = self._keyword_statements(conn, terms, n_kw, where)
        kw_rows: list[list[Any]] | None = None
        if callable(qvec):
            kw_rows = _run(conn, stmts) if stmts else []
            stmts, qvec = [], qvec()
        pipelined = qvec is None or 2 * n_vec <= EF_SEARCH
        if pipelined and qvec is not None:
            stmts.append(self._pgvectors.search_sql(qvec, n_vec, where))
        results = _run(conn, stmts)
        vec: dict[int, float] = {}
        if qvec is not None:
            vec = dict(ranked_by_score(results.pop()) if pipelined
                       else self._pgvectors.search(qvec, n_vec, where, conn))
        return (_best_of(results if kw_rows is None else kw_rows, n_kw), kplan), vec, qvec

    def _pg_features(self, conn: psycopg.Connection[Any], hits: Sequence[Hit], terms: Sequence[str],
                     cosines: dict[int, float] | None, union: Candidates) -> dict[int, calibration.Features]:
        """The calibration features of ``hits``, from the query tokens each holds in the postings
        table (read with the candidates; the embedded backend reads FTS5's stored terms, and both
        hold the same analyser terms)."""
        ids = [h.chunk_id for h in hits]
        if not ids:
            return {}
        tokens = _tokens(terms)
        df = self._stats.doc_frequencies(conn, tokens) if tokens else {}
        return calibration.features_from(ids, tokens, df, self._stats.table(conn)[2], union.held(ids, tokens),
                                         cosines)

    def _pg_idfs(self, conn: psycopg.Connection[Any], terms: Sequence[str]) -> dict[str, float]:
        """Each query term's IDF, for naming the lines that matched (as the embedded backend does)."""
        if not terms:
            return {}
        df = self._stats.doc_frequencies(conn, list(terms))
        n_docs = self._stats.table(conn)[2]
        return {t: proximity_idf(n, n_docs) for t, n in df.items()}

    def keyword_scores(self, conn: psycopg.Connection[Any], terms: Sequence[str], n: int,
                       where: Filter = ("TRUE", [])) -> tuple[dict[int, float], keyword_plan.KeywordPlan]:
        """The ``n`` best chunks by BM25 (FTS5's formula, positive), best first, and the plan that bounded it.

        The work is bounded exactly as the embedded leg bounds it
        (:func:`memoryd.indexer.search.keyword_plan.plan`): one exact pass when few rows can
        match, else a pass over the rare terms and one over the newest chunks, each a lower
        bound of the exact score; a chunk found by both keeps its better score.
        """
        stmts, kplan = self._keyword_statements(conn, terms, n, where)
        return _best_of([conn.execute(sql, args).fetchall() for sql, args in stmts], n), kplan

    def _keyword_statements(self, conn: psycopg.Connection[Any], terms: Sequence[str], n: int,
                            where: Filter) -> tuple[list[tuple[str, list[Any]]], keyword_plan.KeywordPlan]:
        """One BM25 statement per pass of the keyword plan (rows: chunk id, score; best first)."""
        tokens = _tokens(terms)
        if not tokens:
            return [], keyword_plan.KeywordPlan((), exact=True)
        n_docs, avgdl, max_id = self._stats.table(conn)
        df = self._stats.doc_frequencies(conn, tokens)
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

    def _proximity(self, conn: psycopg.Connection[Any], terms: list[str], kw: dict[int, float],
                   union: Candidates) -> dict[int, float]:
        """``kw`` plus the proximity bonus, as :func:`memoryd.indexer.search.rescore.keyword_with_proximity`
        (the chunks' terms come from ``union``, which holds every candidate)."""
        out = dict(kw)
        weight = self._cfg.proximity_weight
        words = word_terms(terms)
        if weight <= 0 or not kw or len(words) < 2:
            return out
        _, _, n_docs = self._stats.table(conn)  # max(id), as the embedded rescoring counts documents
        df = self._stats.doc_frequencies(conn, words)
        idfs = {t: proximity_idf(df.get(t, 0), n_docs) for t in words}
        if len(pair_terms(words, idfs)) < 2:
            return out
        docs = {i: union.terms[i] for i in kw if i in union.terms}
        for cid, bonus in proximity_scores(words, idfs, docs).items():
            if bonus > 0:
                out[cid] += weight * bonus
        return out


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
