"""Fusing the vector and keyword legs into one ranking.

Both legs score every candidate (see :mod:`memoryd.indexer.storage.embedded.hybrid`); each leg is then
normalised over the candidate set of the query and the two are combined with
the configured weights. Three normalisations are offered because the data
decide (``docs/quality.md``): ``zscore`` (default — the distance from the
leg's mean in standard deviations, robust to one outlier stretching the
range), ``minmax`` (the seed's [0, 1] scaling) and ``rrf`` (reciprocal rank,
k = 60, which ignores score gaps entirely).

FTS5's ``bm25()`` is negative and unbounded; callers negate it first, and a
candidate that matches no query term has keyword score 0 (the worst).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from memoryd.indexer.config import FUSIONS, FusionKind

__all__ = ["FUSIONS", "fuse", "minmax", "rrf", "zscore"]

RRF_K = 60


def minmax(scores: dict[int, float], ids: Sequence[int]) -> dict[int, float]:
    """Normalise to [0, 1] over ``ids``; ids without a score get 0.

    If every scored candidate has the same raw score, they all get 1.0 (they
    are equally good); candidates without a score stay at 0.
    """
    present = [scores[i] for i in ids if i in scores]
    if not present:
        return dict.fromkeys(ids, 0.0)
    lo, hi = min(present), max(present)
    span = hi - lo
    return {i: (0.0 if i not in scores else 1.0 if span <= 1e-12 else (scores[i] - lo) / span) for i in ids}


def zscore(scores: dict[int, float], ids: Sequence[int], missing: float = 0.0) -> dict[int, float]:
    """Standard scores over ``ids`` (a missing score counts as ``missing``); all equal → all 0."""
    values = [scores.get(i, missing) for i in ids]
    if not values:
        return {}
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    if sd <= 1e-12:
        return dict.fromkeys(ids, 0.0)
    return {i: (v - mean) / sd for i, v in zip(ids, values, strict=True)}


def rrf(scores: dict[int, float], ids: Sequence[int]) -> dict[int, float]:
    """Reciprocal-rank contribution ``1 / (k + rank)`` of each candidate in this leg (unscored: 0)."""
    ranked = sorted((i for i in ids if i in scores), key=lambda i: -scores[i])
    out = dict.fromkeys(ids, 0.0)
    for rank, i in enumerate(ranked):
        out[i] = 1.0 / (RRF_K + rank)
    return out


def fuse(
    method: FusionKind, vec: dict[int, float], kw: dict[int, float], ids: Sequence[int], wv: float, wk: float,
) -> dict[int, float]:
    """Combined score per candidate, higher is better (scale depends on ``method``)."""
    if method == "zscore":
        nv, nk = zscore(vec, ids), zscore(kw, ids)
    elif method == "rrf":
        nv, nk = rrf(vec, ids), rrf(kw, ids)
    else:
        nv, nk = minmax(vec, ids), minmax(kw, ids)
    return {i: (wv * nv[i] + wk * nk[i]) / (wv + wk) for i in ids}
