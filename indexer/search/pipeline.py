"""The one query path: any storage backend, the same steps, the same answer.

A :class:`~memoryd.indexer.search.query.Query` goes through these steps, whatever stores
the chunks (the backend answers through :mod:`memoryd.indexer.search.legs`):

1. the query is cleaned (:mod:`~memoryd.indexer.search.querytext`), its terms analysed and
   widened by the synonyms of names (:mod:`~memoryd.indexer.search.synonyms`), its intent
   read (:mod:`~memoryd.indexer.search.intent`); a query with no ``query_vector`` is embedded
   before the backend is touched (writers never wait for the model);
2. the legs propose candidates: the keyword leg ``KEYWORD_DEPTH`` times deeper than the
   candidate count, so that a vector candidate gets its BM25 from that list (or "no match"
   past it), and every keyword candidate its cosine; BM25 gains the term-proximity bonus
   (:mod:`~memoryd.indexer.search.rescore`);
3. fusion (:mod:`~memoryd.indexer.search.fusion`), the date and intent boosts, then the
   optional reorderings (prior, recency, MMR: off by default, and then not in the path);
   the first candidates' best line cosines are read (:mod:`~memoryd.indexer.fill.line_vectors`);
4. calibration (:mod:`~memoryd.indexer.search.calibration`): each hit's score becomes a
   relevance in [0, 1]; a weak result may be searched again wider
   (:mod:`~memoryd.indexer.search.fallback`, off by default);
5. the answer: cut at ``min_score``, hits 4+ ordered with their best lines
   (:mod:`~memoryd.indexer.search.lineblend`), consecutive chunks merged, the matched lines named,
   and with ``explain`` each hit's ranks and scores.

Which optional steps run is decided once, when the pipeline is built from ``[search]``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memoryd.indexer.config import SEARCH_MODES, SearchConfig, SearchMode, is_search_mode
from memoryd.indexer.errors import MemorydError
from memoryd.indexer.search import (
    calibration,
    fallback,
    intent,
    keyword,
    lineblend,
    pending,
    rescore,
    shaping,
    synonyms,
)
from memoryd.indexer.search.content_words import content_terms
from memoryd.indexer.search.fusion import fuse, minmax
from memoryd.indexer.search.hits import MAX_MERGED_CHUNKS, Hit, SearchResult, merge_consecutive
from memoryd.indexer.search.legs import LegSession, QueryVector, SearchLegs, Terms
from memoryd.indexer.search.proximity import idf
from memoryd.indexer.search.query import Query
from memoryd.indexer.search.querytext import clean_query
from memoryd.indexer.storage.rows import ChunkRow
from memoryd.indexer.types import Embedder

KEYWORD_DEPTH = 4  # BM25 scores are read this many times deeper than the candidate count

Reorder = Callable[[list[Hit], dict[int, ChunkRow]], list[Hit]]


class SearchError(MemorydError):
    """A query that cannot be run (bad mode, query too slow)."""


@dataclass(frozen=True)
class _Prepared:
    """What the pipeline works out of a :class:`Query` before touching the storage."""

    query: Query
    cleaned: str
    k: int
    mode: SearchMode
    terms: Terms
    added: dict[str, list[str]]  # synonyms added, per name (explain)
    intents: tuple[intent.Intent, ...]


@dataclass
class _Legs:
    """The legs' scores and rows of one pass (the fused ranking's inputs)."""

    cands: list[int]
    vec: dict[int, float]
    kw: dict[int, float]
    kw_ranked: dict[int, float]
    rows: dict[int, ChunkRow]
    qvec: Any
    idfs: dict[str, float]


class SearchPipeline:
    """Runs queries on one backend's legs; built once per index from ``[search]``."""

    def __init__(self, legs: SearchLegs, embedder: Embedder | None, cfg: SearchConfig) -> None:
        self._legs = legs
        self._embedder = embedder
        self._cfg = cfg
        self._synonyms = synonyms.load(cfg.synonyms_path, builtin=cfg.synonyms)
        self._fitted = embedder is not None and calibration.fitted_for(embedder.model_id)
        # the optional steps, decided here: a step that is off costs a query nothing
        self._reorders = _reorders(cfg)
        self._mmr = cfg.mmr_lambda < 1.0
        self._fallback = cfg.fallback_candidates > cfg.candidates  # else never wider than a first pass
        self._line_weight = cfg.line_weight

    def search(self, query: Query) -> SearchResult:
        """Run one query; the hits best first, each ``score`` its calibrated relevance (the ranking
        is the fused one); ``abstained`` and ``reason`` when ``min_score`` left none."""
        t0 = time.perf_counter()
        p = self._prepare(query)
        vector = QueryVector(pending=query.query_vector)
        embedder = self._embedder
        if query.query_vector is None and p.mode != "keyword" and embedder is not None:
            vector = QueryVector(ready=embedder.embed_query(p.cleaned))  # before the storage: writers never wait
        return self._run(p, vector, t0)

    def _prepare(self, query: Query) -> _Prepared:
        cleaned = clean_query(query.text)
        mode = self._mode(query.mode)
        terms = keyword.query_terms(cleaned) if mode != "vector" else []
        expanded, added = self._synonyms.expand(cleaned, terms) if terms else (terms, {})
        return _Prepared(query, cleaned, query.k or self._cfg.k, mode,
                         Terms(terms, expanded, terms or keyword.query_terms(cleaned)), added,
                         intent.classify(cleaned) if mode != "vector" else ())

    def _mode(self, mode: str | None) -> SearchMode:
        """The mode to run: the configured default if none; keyword-only when there is no model."""
        mode = mode or self._cfg.mode
        if not is_search_mode(mode):
            raise SearchError(f"unknown search mode {mode!r}; use one of {', '.join(SEARCH_MODES)}")
        return "keyword" if self._embedder is None else mode

    def _run(self, p: _Prepared, vector: QueryVector, t0: float, candidates: int | None = None,
             widened: dict[str, Any] | None = None) -> SearchResult:
        """One pass with ``candidates`` per leg (default ``[search]``'s; ``widened``: the fallback's why)."""
        q, k, mode = p.query, p.k, p.mode
        n_cand = max(candidates or self._cfg.candidates, k)
        with self._legs.session(q, p.terms) as s:
            with s.snapshot():
                legs, plan = self._candidates(s, p, vector, n_cand)
            ranked = self._reorder(self._fuse(mode, legs, p.cleaned, p.intents), legs, s, k)
            head = ranked[: k * MAX_MERGED_CHUNKS]  # nothing below can be returned, even after merging
            cosines = legs.vec if legs.qvec is not None and self._fitted else None
            feats = calibration.with_margins(s.features([h.chunk_id for h in head], self._content(p), cosines),
                                             cosines) if head else {}
            line_cos = s.line_cosines(legs.qvec, [h.chunk_id for h in head]) \
                if self._line_weight and mode == "hybrid" and legs.qvec is not None and head else None
        hits = shaping.calibrated(head, feats)
        content = not feats or next(iter(feats.values())).content  # the query's, the same for every hit
        if candidates is None and self._fallback and mode == "hybrid" and legs.qvec is not None and content:
            weak = fallback.wider(self._cfg, n_cand, len(ranked), hits, fallback.threshold(self._cfg, q.min_score))
            if weak is not None:
                wide = self._run(p, QueryVector(ready=legs.qvec), t0, weak["candidates"], weak)
                return replace(wide, took_ms=(time.perf_counter() - t0) * 1000)  # both passes
        hits, reason, explanations, blended = self._finish(p, hits, head, feats, legs, content, line_cos)
        terms = p.terms.terms
        return SearchResult(
            mode=mode, hits=hits, abstained=reason is not None, reason=reason,
            keyword_plan=plan.describe() if q.explain and terms else None,
            query_searched=p.cleaned if q.explain and p.cleaned != q.text else None,
            explanations=explanations, took_ms=(time.perf_counter() - t0) * 1000,
            query_analysis={"intent": list(p.intents), "synonyms": p.added, "fallback": widened,
                            "line_blend": blended} if q.explain else None,
        )

    def _candidates(self, s: LegSession, p: _Prepared, vector: QueryVector,
                    n_cand: int) -> tuple[_Legs, Any]:
        """Both legs, every candidate's scores in both, their rows (under the backend's snapshot)."""
        terms = p.terms.terms
        early: dict[str, dict[int, float]] = {}

        def keyword_first(kw: dict[int, float]) -> None:  # while the backend waits for the query vector
            early["kw"] = rescore.keyword_with_proximity(s, terms, kw, self._cfg.proximity_weight)

        found = s.candidates(p.terms, KEYWORD_DEPTH * n_cand, n_cand, vector if p.mode != "keyword" else QueryVector(),
                             keyword_first)
        idfs = self._idfs(s, terms)
        kw_deep, vec, qvec = found.keyword, found.vector, found.qvec
        kw = dict(list(kw_deep.items())[:n_cand])
        cands = list(dict.fromkeys([*vec, *kw]))
        hybrid = p.mode == "hybrid" and qvec is not None
        rows = s.chunks(cands, qvec if hybrid else None)  # before proximity: a backend may read the terms with them
        kw_ranked = early["kw"] if "kw" in early else rescore.keyword_with_proximity(
            s, terms, kw, self._cfg.proximity_weight)
        if hybrid:
            vec.update(s.cosines(qvec, [i for i in cands if i not in vec]))
            # Vector candidates get their BM25 from the deeper keyword list; beyond it a chunk
            # scores as "no match" (cheaper than a second keyword query).
            deeper = {i: kw_deep[i] for i in cands if i not in kw and i in kw_deep}
            kw.update(deeper)
            kw_ranked.update(rescore.keyword_with_proximity(s, terms, deeper, self._cfg.proximity_weight))
        if p.query.path_check is not None:
            rows = shaping.checked(rows, p.query.path_check)
        return _Legs(cands, vec, kw, kw_ranked, rows, qvec, idfs), found.plan

    @staticmethod
    def _content(p: _Prepared) -> list[str]:
        """The terms calibration counts: the query's content words; when it has none but asks as a
        question to a memory does (an intent: "when did I start running?", "同事是谁"), all its terms."""
        return content_terms(p.terms.features) or (p.terms.features if p.intents else [])

    def _idfs(self, s: LegSession, terms: list[str]) -> dict[str, float]:
        """Each query term's IDF, for naming the lines that matched."""
        if not terms:
            return {}
        n_docs = s.n_docs()
        return {t: idf(n, n_docs) for t, n in s.doc_frequencies(terms).items()}

    def _fuse(self, mode: SearchMode, legs: _Legs, query: str, intents: tuple[intent.Intent, ...]) -> list[Hit]:
        """Rank candidates; ``score`` is the fused value rescaled to [0, 1] over the candidates.

        Chunks of files dated as the ``query`` names gain a boost (:mod:`memoryd.indexer.search.rescore`),
        and so do chunks in a section or file of one of its ``intents`` (:mod:`memoryd.indexer.search.intent`);
        ``vector`` mode stays pure similarity.
        """
        rows, vec = legs.rows, legs.vec
        ids = [i for i in legs.cands if i in rows]
        nk = minmax(legs.kw_ranked, ids)
        if mode == "vector":
            fused = {i: vec.get(i, 0.0) for i in ids}
        elif mode == "keyword":
            fused = nk
        else:
            # A chunk whose vector is still queued gets the candidates' mean cosine (search.pending).
            fused = fuse(self._cfg.fusion, pending.neutral_vector_scores(vec, ids), legs.kw_ranked, ids,
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
                            round(shown[i], 6), round(vec.get(i, 0.0), 6), round(nk[i], 6), site=r.site))
        hits.sort(key=lambda h: (-h.score, h.path, h.start_line))
        return hits

    def _reorder(self, hits: list[Hit], legs: _Legs, s: LegSession, k: int) -> list[Hit]:
        """The configured reorderings (prior, recency, MMR); none by default."""
        for step in self._reorders:
            hits = step(hits, legs.rows)
        if self._mmr and legs.qvec is not None and len(hits) > 1:
            from memoryd.indexer.search.rerank import mmr_order

            head, tail = hits[: max(5 * k, 50)], hits[max(5 * k, 50):]
            order = mmr_order([h.score for h in head], lambda idx: s.vectors_of([head[i].chunk_id for i in idx]),
                              self._cfg.mmr_lambda, len(head))
            hits = [head[i] for i in order] + tail
        return hits

    def _finish(self, p: _Prepared, hits: list[Hit], head: list[Hit], feats: dict[int, calibration.Features],
                legs: _Legs, content: bool, line_cos: dict[int, float] | None,
                ) -> tuple[list[Hit], str | None, list[dict[str, Any]] | None, str | None]:
        """The answer from calibrated ``hits``: cut at ``min_score``, the lower hits ordered with their
        best lines (``line_cos``), merged, ``k`` of them with their matched lines; why the search abstained
        (None: it did not); and, with ``explain``, each hit's explanation (``head``: the fused ranking the
        calibration replaced; ``content``: whether the query has a content word, which names the reason
        when it has none; ``line_cos``: the best line cosines read, None when not asked); and, with
        ``explain`` in hybrid mode, what the line blend did."""
        q, k = p.query, p.k
        reason = None
        if q.min_score is not None:
            hits, reason = shaping.confident(hits, q.min_score, content)
        blended = lineblend.describe(hits, line_cos or {}, self._line_weight) \
            if q.explain and p.mode == "hybrid" and legs.qvec is not None else None
        if line_cos:
            hits = lineblend.blend(hits, line_cos, self._line_weight)
        if self._cfg.merge_adjacent:
            hits = merge_consecutive(hits[: k * MAX_MERGED_CHUNKS])
        hits = shaping.with_match_lines(hits[:k], legs.idfs, legs.vec, legs.rows)
        if not q.explain:
            return hits, reason, None, None
        has_vectors = legs.qvec is not None
        waiting = pending.pending_ids(legs.vec, legs.cands) if p.mode == "hybrid" and has_vectors else set()
        how = self._cfg.fusion if p.mode == "hybrid" else p.mode
        explanations = shaping.explain_hits(hits, legs.vec, legs.kw, how, legs.rows, waiting)
        fused = {h.chunk_id: h.score for h in head}
        for h, why in zip(hits, explanations, strict=True):
            why.update(fused=fused[h.chunk_id], calibration=feats[h.chunk_id].to_json())
            if line_cos is not None:  # asked: None for a hit whose line vectors are not filled in yet
                known = [line_cos[i] for i in (h.chunk_id, *h.absorbed) if i in line_cos]
                why["best_line_cosine"] = round(max(known), 6) if known else None
        return hits, reason, explanations, blended


def _reorders(cfg: SearchConfig) -> list[Reorder]:
    """The ranking prior and recency decay, when configured (both off by default; see
    :mod:`memoryd.indexer.search.prior` and :mod:`memoryd.indexer.search.rerank`)."""
    steps: list[Reorder] = []
    if cfg.prior_weight > 0:
        from memoryd.indexer.search.prior import apply_prior

        def prior(hits: list[Hit], rows: dict[int, ChunkRow]) -> list[Hit]:
            return apply_prior(hits, {i: r.mtime_ns for i, r in rows.items()}, cfg.prior_weight)

        steps.append(prior)
    if cfg.recency_half_life_days > 0:
        steps.append(lambda hits, rows: _recency(hits, rows, cfg.recency_half_life_days))
    return steps


def _recency(hits: Sequence[Hit], rows: dict[int, ChunkRow], half_life_days: float) -> list[Hit]:
    """Scores decayed by their file's age; 6 significant digits, not 6 decimals: years-old files
    decay far below 1e-6 and must keep their relative order."""
    from memoryd.indexer.search.rerank import recency_factor

    now = time.time()

    def decayed(h: Hit) -> Hit:
        factor = recency_factor(h.path, rows[h.chunk_id].mtime_ns, half_life_days, now)
        return replace(h, score=float(f"{h.score * factor:.6g}"))

    return sorted((decayed(h) for h in hits), key=lambda h: (-h.score, h.path, h.start_line))
