"""Ranking and scoring while vectors are pending: a missing leg is missing, not a guess.

Keyword-first indexing commits chunks before their vectors; until the backlog is embedded a
query's candidates are of two kinds: chunks with both legs (a cosine and a keyword score) and
chunks whose vector is still queued (a keyword score only). Two rules follow from "missing":

**Fusion** (:func:`fuse_present`): a chunk is fused over the legs it has. Its fused score is the
weighted mean of its normalised leg scores over *its* legs, so a pending chunk is ranked from its
keyword evidence alone (its keyword leg at full weight), and each leg is normalised over the chunks
that have it (the vector leg's mean and spread over the chunks with a cosine: filling the missing
ones with a guessed cosine would shrink the spread and inflate every real cosine's standing). A
chunk that the keyword leg searched and found no query word in has keyword evidence of absence
(score 0): that is not missing. The earlier rule gave a pending chunk the candidates' mean cosine;
with half the vectors queued it shrank the vector leg's spread and let a note matching no query
word outrank the exact keyword matches.

**Calibration** (:func:`unsupported`): a pending hit is scored by the keyword-only coefficients
(:func:`memoryd.indexer.search.calibration.features_from`). A hit with no keyword evidence (none
of the query's content words) stands on its cosine alone, and a cosine's standing (its margin over
the candidates) is only measured when every candidate has one — "vector agreement". While any
candidate of the query is pending, such a hit has neither: it keeps its own low score (never
raised by the better hits below it, :func:`memoryd.indexer.search.calibration.monotone`) and is
never kept by ``min_score`` (:func:`memoryd.indexer.search.shaping.confident`).

A warm index has no pending chunk: :func:`fuse_present` is then exactly
:func:`memoryd.indexer.search.fusion.fuse` and no hit is unsupported, so every ranking and score
is unchanged. ``--explain`` shows ``vector: pending`` for the pending hits, the query analysis
``legs: "ranking from keywords only: N vectors pending"``; ``status`` and the UI say the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from memoryd.indexer.config import FusionKind
from memoryd.indexer.search.fusion import fuse, minmax, rrf, zscore


def pending_ids(vec: Mapping[int, float], ids: Sequence[int]) -> set[int]:
    """Candidates without a cosine after both legs ran: those whose vector is not in the index yet."""
    return {i for i in ids if i not in vec}


NO_EVIDENCE = "none: no content word of the query, and a cosine not measured against every candidate"
"""``--explain``'s ``evidence`` of an :func:`unsupported` hit."""


def keywords_only(pending: int) -> str:
    """What ``status``, ``--explain`` and the UI say while ``pending`` vectors are queued."""
    return f"ranking from keywords only: {pending} vectors pending"


def fuse_present(method: FusionKind, vec: dict[int, float], kw: dict[int, float], ids: Sequence[int],
                 wv: float, wk: float) -> dict[int, float]:
    """:func:`~memoryd.indexer.search.fusion.fuse`, each candidate over the legs it has (see the module
    docstring): with every cosine present (or none) exactly ``fuse``."""
    have = [i for i in ids if i in vec]
    if not have or len(have) == len(ids):
        return fuse(method, vec, kw, ids, wv, wk)
    if method == "zscore":
        nv, nk = zscore(vec, have), zscore(kw, ids)
    elif method == "rrf":
        nv, nk = rrf(vec, have), rrf(kw, ids)
    else:
        nv, nk = minmax(vec, have), minmax(kw, ids)
    return {i: (wv * nv[i] + wk * nk[i]) / (wv + wk) if i in nv else nk[i] for i in ids}


def unsupported(coverage: Mapping[int, float], vec: Mapping[int, float], cands: Sequence[int]) -> set[int]:
    """The hits (the keys of ``coverage``, each hit's share of the query's content words) with neither
    keyword evidence (coverage 0) nor vector agreement (a cosine measured against a complete candidate
    set): while any of the candidates ``cands`` is pending, those without a content word. Empty when
    none is pending."""
    if all(i in vec for i in cands):
        return set()
    return {i for i, c in coverage.items() if c <= 0.0}
