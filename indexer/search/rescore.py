"""Query-time rescoring of the fused candidates: term proximity and named dates.

Two general signals that neither leg sees, both measured on the evaluation
data (docs/quality.md) and both touching only the query's candidates (at most
two legs × ``search.candidates`` chunks), never the corpus:

- **Proximity** (:mod:`memoryd.indexer.search.proximity`): a candidate's BM25 gets a bonus
  when the query's words occur close together in it. It needs each
  candidate's analysed terms and the terms' document frequencies, which the
  backend's legs read (:mod:`memoryd.indexer.search.legs`).
- **Named dates** (:mod:`memoryd.indexer.search.querydates`): when the query names a date,
  chunks of files dated then gain ``DATE_BOOST`` standard deviations of the
  fused scores — strong evidence, yet not a filter: a better match from
  another day still wins when its lead is large. Scaling by the spread keeps
  the boost meaningful for every fusion method (z-score, min-max, RRF).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol

from memoryd.indexer.search.proximity import PROXIMITY_WEIGHT, idf, pair_terms, proximity_scores, word_terms
from memoryd.indexer.search.querydates import matching_paths, query_dates

__all__ = ["DATE_BOOST", "PROXIMITY_WEIGHT", "date_boost", "keyword_with_proximity"]

DATE_BOOST = 2.0
"""Default boost, in standard deviations of the fused scores, for chunks of a file dated as the query says."""


class TermSource(Protocol):
    """Where proximity reads the corpus figures and the candidates' terms (a backend's
    :class:`~memoryd.indexer.search.legs.LegSession` is one)."""

    def n_docs(self) -> int: ...
    def doc_frequencies(self, terms: Sequence[str]) -> dict[str, int]: ...
    def chunk_terms(self, ids: Sequence[int]) -> dict[int, str]: ...


def keyword_with_proximity(
    source: TermSource, terms: Sequence[str], kw: Mapping[int, float], weight: float = PROXIMITY_WEIGHT,
) -> dict[int, float]:
    """``kw`` (chunk id → BM25, higher is better) plus ``weight`` × proximity, for the same ids.

    Chunks without a BM25 score stay without one. Returns a copy of ``kw``
    when ``weight`` is 0 or fewer than two query terms can pair; only then are the
    candidates' terms read (``source`` may keep them for the calibration, which needs
    the terms of the hits again).
    """
    out = dict(kw)
    words = word_terms(terms)
    if weight <= 0 or not kw or len(words) < 2:
        return out
    n_docs = source.n_docs()
    df = source.doc_frequencies(words)
    idfs = {t: idf(df.get(t, 0), n_docs) for t in words}
    if len(pair_terms(words, idfs)) < 2:
        return out
    docs = source.chunk_terms(list(kw))
    for cid, bonus in proximity_scores(words, idfs, docs).items():
        if bonus > 0:
            out[cid] += weight * bonus
    return out


def date_boost(
    fused: Mapping[int, float], paths: Mapping[int, str], query: str, strength: float = DATE_BOOST,
) -> dict[int, float]:
    """``fused`` with chunks of files dated as ``query`` names raised by ``strength`` standard deviations.

    Unchanged when the query names no date, no candidate's file matches, or
    all of them do (then the date cannot tell them apart).
    """
    out = dict(fused)
    if strength <= 0 or len(fused) < 2:
        return out
    specs = query_dates(query)
    if not specs:
        return out
    matched = matching_paths(specs, {paths[i] for i in fused})
    hits = [i for i in fused if paths[i] in matched]
    if not hits or len(hits) == len(fused):
        return out
    values = list(fused.values())
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    for i in hits:
        out[i] += strength * sd
    return out
