"""Hybrid search: vector similarity and BM25, fused per query.

Each leg proposes its top candidates; every candidate then gets *both* scores
(its cosine by reconstructing its vector; its BM25 from the keyword leg's
deeper list, ``KEYWORD_DEPTH`` times the candidate count, or "no match" past
it), and :mod:`memoryd.indexer.search.fusion` combines them (z-score by default). FTS5's
``bm25()`` is negative and unbounded, so it is negated first. The keyword
leg's work is bounded at any corpus size by :mod:`memoryd.indexer.search.keyword_plan`.
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

from memoryd.indexer import keyword
from memoryd.indexer.config import SEARCH_MODES, SearchConfig, SearchMode, is_search_mode
from memoryd.indexer.errors import MemorydError, StoreClosedError
from memoryd.indexer.search import calibration, fallback, intent, keyword_plan, pending, rescore, shaping, synonyms
from memoryd.indexer.search.fusion import fuse, minmax
from memoryd.indexer.search.hits import MAX_MERGED_CHUNKS, Hit, SearchResult, merge_consecutive
from memoryd.indexer.search.prior import apply_prior
from memoryd.indexer.search.proximity import idf
from memoryd.indexer.search.querytext import clean_query
from memoryd.indexer.search.rerank import mmr_order, recency_factor
from memoryd.indexer.store import ChunkRow, fetch_chunks
from memoryd.indexer.types import Embedder
from memoryd.indexer.vectors import VectorIndex

QUERY_TIME_LIMIT_S = 2.0
KEYWORD_DEPTH = 4  # BM25 scores are read this many times deeper than the candidate count


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


class SearchError(MemorydError):
    """A query that cannot be run (bad mode, query too slow)."""


class HybridSearcher:
    """Runs queries against a store's read connections and a vector index.

    ``lock`` is the index's write lock: holding it while reading both legs
    means a search never sees a file half-replaced between SQLite and FAISS.
    """

    def __init__(
        self, readers: ReaderPool, vectors: VectorIndex, embedder: Embedder | None,
        lock: threading.Lock, cfg: SearchConfig,
    ) -> None:
        self._readers = readers
        self._vectors = vectors
        self._embedder = embedder
        self._lock = lock
        self._cfg = cfg
        self._df = keyword_plan.DocFrequencies()
        self._synonyms = synonyms.load(cfg.synonyms_path, builtin=cfg.synonyms)

    def search(
        self, query: str, *, k: int | None = None, mode: SearchMode | None = None,
        path_prefix: str | None = None, min_score: float | None = None, explain: bool = False,
        exclude_prefixes: Sequence[str] = (), query_vector: Callable[[], Any] | None = None,
        path_check: Callable[[str, str], bool] | None = None,
    ) -> SearchResult:
        """Run one query; returns the hits, best first, and how they were found.

        Each hit's ``score`` is its calibrated relevance in [0, 1], comparable across queries
        (:mod:`memoryd.indexer.search.calibration`); the ranking is the fused one. ``min_score``
        is the abstention threshold on that score: hits below it are dropped, and if none is
        left the result says ``abstained`` and why, instead of returning noise. ``explain`` adds each
        hit's ranks in both legs and its fused value. ``exclude_prefixes``
        (root-relative) drops whole folders, e.g. other namespaces. Prefixes match
        exactly (case-sensitive, no wildcards), as file names do. ``path_check``, when
        given, is asked ``(root, rel)`` once per file among the candidates, and chunks of
        files it refuses are dropped before ranking (a confined session's test that a file
        *resolves* into its namespace: :func:`memoryd.indexer.write.access.read_refusal`). Checking
        candidates, not every file the prefix lets through, keeps its cost at a few dozen
        ``lstat`` calls whatever the namespace's size; a refused link costs the query one
        candidate slot.

        The query is searched as :func:`memoryd.indexer.search.querytext.clean_query` returns it (a
        transcript's speaker labels removed). ``query_vector``, when given, returns the
        embedding of that cleaned query (e.g. the result of a computation the caller started
        on another thread); it is called after the keyword leg, so the two can overlap. It is
        called under the index lock, so a commit may wait for the rest of that embedding (a
        few ms); without it the query is embedded before the lock.

        The keyword leg also searches the synonyms of names in the query
        (:mod:`memoryd.indexer.search.synonyms`), chunks where the query's intent points gain a
        boost (:mod:`memoryd.indexer.search.intent`), and a weak result is searched again with
        more candidates (:mod:`memoryd.indexer.search.fallback`); ``explain`` reports all three
        under ``query_analysis``.
        """
        return self._search(query, k=k, mode=mode, path_prefix=path_prefix, min_score=min_score, explain=explain,
                            exclude_prefixes=exclude_prefixes, query_vector=query_vector, path_check=path_check)

    def _search(
        self, query: str, *, k: int | None, mode: SearchMode | None, path_prefix: str | None,
        min_score: float | None, explain: bool, exclude_prefixes: Sequence[str],
        query_vector: Callable[[], Any] | None, path_check: Callable[[str, str], bool] | None,
        candidates: int | None = None, widened: dict[str, Any] | None = None,
    ) -> SearchResult:
        """:meth:`search`, with ``candidates`` per leg when given (then ``widened`` says why: the fallback)."""
        t0 = time.perf_counter()
        raw_query, query = query, clean_query(query)
        k = k or self._cfg.k
        mode = self._mode(mode)
        embedder = self._embedder
        if query_vector is None and mode != "keyword" and embedder is not None:
            ready = embedder.embed_query(query)  # before the lock: writers never wait for the model

            def query_vector() -> Any:
                return ready
        terms = keyword.query_terms(query) if mode != "vector" else []
        n_cand = max(candidates or self._cfg.candidates, k)
        expanded, added = self._synonyms.expand(query, terms) if terms else (terms, {})
        intents = intent.classify(query) if mode != "vector" else ()
        stored: dict[int, str] = {}  # chunks' indexed terms, read once for proximity and calibration
        try:
            with self._readers.connection() as conn, self._lock:
                allowed = _allowed_ids(conn, path_prefix, exclude_prefixes) \
                    if path_prefix or exclude_prefixes else None
                plan = self._keyword_plan(conn, expanded)
                idfs = self._idfs(conn, terms)
                kw_deep = _keyword_leg(conn, plan, KEYWORD_DEPTH * n_cand, allowed)
                kw = dict(list(kw_deep.items())[:n_cand])
                # Ranking uses BM25 + term proximity (explain shows the raw BM25); computed per
                # chunk, so the keyword candidates' share runs while the query is still embedding.
                kw_ranked = self._with_proximity(conn, terms, kw, stored)
                qvec = query_vector() if mode != "keyword" and query_vector is not None else None
                vec = self._vector_leg(qvec, n_cand, allowed)
                cands = list(dict.fromkeys([*vec, *kw]))
                if mode == "hybrid" and qvec is not None:
                    vec.update(self._vectors.scores_for(qvec, [i for i in cands if i not in vec]))
                    # Vector candidates get their BM25 from the deeper keyword list; beyond it a
                    # chunk scores as "no match" (cheaper than a second FTS query: ~5 ms).
                    deeper = {i: kw_deep[i] for i in cands if i not in kw and i in kw_deep}
                    kw.update(deeper)
                    kw_ranked.update(self._with_proximity(conn, terms, deeper, stored))
                rows = fetch_chunks(conn, cands)
                if path_check is not None:
                    rows = shaping.checked(rows, path_check)
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                raise SearchError(f"query took longer than {QUERY_TIME_LIMIT_S:.0f} s and was stopped") from None
            raise
        ranked = self._rerank(self._fuse(mode, cands, vec, kw_ranked, rows, query, intents), rows, k,
                              qvec is not None)
        head = ranked[: k * MAX_MERGED_CHUNKS]  # nothing below can be returned, even after merging
        cosines = vec if qvec is not None and embedder is not None and calibration.fitted_for(embedder.model_id) \
            else None
        feats = self._features(head, terms or keyword.query_terms(query), cosines, stored)
        hits = shaping.calibrated(head, feats)
        weak = fallback.wider(self._cfg, n_cand, len(ranked), hits, fallback.threshold(self._cfg, min_score)) \
            if candidates is None and mode == "hybrid" and qvec is not None else None
        if weak is not None:
            wide = self._search(raw_query, k=k, mode=mode, path_prefix=path_prefix, min_score=min_score,
                                explain=explain, exclude_prefixes=exclude_prefixes, query_vector=lambda: qvec,
                                path_check=path_check, candidates=weak["candidates"], widened=weak)
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

    def _finish(
        self, hits: list[Hit], head: list[Hit], feats: dict[int, calibration.Features], *, k: int,
        min_score: float | None, idfs: dict[str, float], vec: dict[int, float], kw: dict[int, float],
        rows: dict[int, ChunkRow], cands: Sequence[int], mode: SearchMode, has_vectors: bool, explain: bool,
    ) -> tuple[list[Hit], str | None, list[dict[str, Any]] | None]:
        """The answer from calibrated ``hits`` (both backends): cut at ``min_score``, merged, ``k`` of
        them with their matched lines; why the search abstained (None: it did not); and, with
        ``explain``, each hit's explanation (``head``: the fused ranking the calibration replaced)."""
        reason = None
        if min_score is not None:
            hits, reason = shaping.confident(hits, min_score)
        if self._cfg.merge_adjacent:
            hits = merge_consecutive(hits[: k * MAX_MERGED_CHUNKS])
        hits = shaping.with_match_lines(hits[:k], idfs, vec, rows)
        if not explain:
            return hits, reason, None
        waiting = pending.pending_ids(vec, cands) if mode == "hybrid" and has_vectors else set()
        how = self._cfg.fusion if mode == "hybrid" else mode
        explanations = shaping.explain_hits(hits, vec, kw, how, rows, waiting)
        fused = {h.chunk_id: h.score for h in head}
        for h, why in zip(hits, explanations, strict=True):
            why.update(fused=fused[h.chunk_id], calibration=feats[h.chunk_id].to_json())
        return hits, reason, explanations

    def _mode(self, mode: str | None) -> SearchMode:
        """The mode to run: the configured default if none; keyword-only when there is no model."""
        mode = mode or self._cfg.mode
        if not is_search_mode(mode):
            raise SearchError(f"unknown search mode {mode!r}; use one of {', '.join(SEARCH_MODES)}")
        return "keyword" if self._embedder is None else mode

    def _rerank(self, hits: list[Hit], rows: dict[int, ChunkRow], k: int, has_vectors: bool) -> list[Hit]:
        """The ranking prior, recency decay and MMR, when configured (all off by default; see
        :mod:`memoryd.indexer.search.prior` and :mod:`memoryd.indexer.search.rerank`)."""
        cfg = self._cfg
        if cfg.prior_weight > 0:
            hits = apply_prior(hits, {i: r.mtime_ns for i, r in rows.items()}, cfg.prior_weight)
        if cfg.recency_half_life_days > 0:
            now = time.time()
            # 6 significant digits, not 6 decimals: years-old files decay far below 1e-6 and must
            # keep their relative order.
            def decayed(h: Hit) -> Hit:
                factor = recency_factor(h.path, rows[h.chunk_id].mtime_ns, cfg.recency_half_life_days, now)
                return replace(h, score=float(f"{h.score * factor:.6g}"))

            hits = sorted(
                (decayed(h) for h in hits),
                key=lambda h: (-h.score, h.path, h.start_line))
        if cfg.mmr_lambda < 1.0 and has_vectors and len(hits) > 1:
            head, tail = hits[: max(5 * k, 50)], hits[max(5 * k, 50):]

            def vectors(idx: Sequence[int]) -> Any:
                with self._lock:
                    return self._vectors.vectors_of([head[i].chunk_id for i in idx])

            order = mmr_order([h.score for h in head], vectors, cfg.mmr_lambda, len(head))
            hits = [head[i] for i in order] + tail
        return hits

    def _features(
        self, hits: Sequence[Hit], terms: list[str], vec: dict[int, float] | None, stored: dict[int, str],
    ) -> dict[int, calibration.Features]:
        """The calibration features of ``hits`` (read outside the index lock: only FTS terms and
        document frequencies, and a chunk replaced meanwhile merely loses its coverage; ``stored``:
        the terms proximity already read under the lock)."""
        if not hits:
            return {}
        with self._readers.connection() as conn:
            df = self._df.lookup(conn, terms) if terms else {}
            n_docs = int(conn.execute("SELECT max(id) FROM chunks").fetchone()[0] or 0)
            return calibration.features_for(conn, [h.chunk_id for h in hits], terms, df, n_docs, vec, stored)

    def _with_proximity(
        self, conn: sqlite3.Connection, terms: list[str], kw: dict[int, float], stored: dict[int, str],
    ) -> dict[int, float]:
        if not terms or not kw:
            return dict(kw)
        return rescore.keyword_with_proximity(conn, self._df, terms, kw, self._cfg.proximity_weight, stored)

    def _idfs(self, conn: sqlite3.Connection, terms: list[str]) -> dict[str, float]:
        """Each query term's IDF (cached document frequencies), for naming the lines that matched."""
        if not terms:
            return {}
        n_docs = int(conn.execute("SELECT max(id) FROM chunks").fetchone()[0] or 0)
        return {t: idf(n, n_docs) for t, n in self._df.lookup(conn, terms).items()}

    def _keyword_plan(self, conn: sqlite3.Connection, terms: list[str]) -> keyword_plan.KeywordPlan:
        """The FTS5 passes for ``terms``, without the terms no chunk holds: they add nothing to any BM25
        and match no row, yet each costs FTS5 a lookup in every index segment and a turn of its OR for
        every row (a pasted Chinese dialogue has ~100 such character bigrams: ~5 ms of a ~6 ms leg).
        Called under the index lock, so no commit lands between the check and the search."""
        if not terms:
            return keyword_plan.KeywordPlan((), exact=True)
        self._df.sync(conn)
        df = self._df.lookup(conn, terms)
        present = [t for t in terms if df[t] > 0]
        absent = tuple(t for t in terms if df[t] == 0)
        if not present:
            return keyword_plan.KeywordPlan((), exact=True, absent=absent)
        max_id = conn.execute("SELECT max(id) FROM chunks").fetchone()[0] or 0
        plan = keyword_plan.plan(present, df, int(max_id), keyword_plan.ROW_BUDGET, keyword_plan.SCAN_BUDGET)
        return replace(plan, absent=absent)

    def _vector_leg(self, qvec: Any, n: int, allowed: set[int] | None) -> dict[int, float]:
        if qvec is None:
            return {}
        if allowed is None:
            return dict(self._vectors.search(qvec, n))
        scores = self._vectors.scores_for(qvec, allowed)
        return dict(sorted(scores.items(), key=lambda kv: -kv[1])[:n])

    def _fuse(
        self, mode: SearchMode, cands: list[int], vec: dict[int, float], kw: dict[int, float],
        rows: dict[int, ChunkRow], query: str = "", intents: tuple[intent.Intent, ...] = (),
    ) -> list[Hit]:
        """Rank candidates; ``score`` is the fused value rescaled to [0, 1] over the candidates.

        Chunks of files dated as the ``query`` names gain a boost (:mod:`memoryd.indexer.search.rescore`),
        and so do chunks in a section or file of one of its ``intents`` (:mod:`memoryd.indexer.search.intent`);
        ``vector`` mode stays pure similarity.
        """
        ids = [i for i in cands if i in rows]
        nk = minmax(kw, ids)
        if mode == "vector":
            fused = {i: vec.get(i, 0.0) for i in ids}
        elif mode == "keyword":
            fused = nk
        else:
            # A chunk whose vector is still queued gets the candidates' mean cosine (search.pending).
            fused = fuse(self._cfg.fusion, pending.neutral_vector_scores(vec, ids), kw, ids,
                         self._cfg.vector_weight, self._cfg.text_weight)
        if query and mode != "vector":
            fused = rescore.date_boost(fused, {i: rows[i].path for i in ids}, query, self._cfg.date_boost)
            if intents:  # most queries show none: then the candidates' places are not gathered
                fused = intent.intent_boost(fused, {i: (rows[i].heading, rows[i].path, rows[i].text) for i in ids},
                                            intents, self._cfg.intent_boost)
        shown = fused if mode == "vector" else minmax(fused, ids)
        hits = []
        for i in ids:
            r = rows[i]
            hits.append(Hit(i, r.root, r.path, r.start_line, r.end_line, r.heading, r.text,
                            round(shown[i], 6), round(vec.get(i, 0.0), 6), round(nk[i], 6)))
        hits.sort(key=lambda h: (-h.score, h.path, h.start_line))
        return hits


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
