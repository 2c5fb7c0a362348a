"""Weak-result fallback: when few candidates are confident, search again more broadly.

Each leg proposes ``search.candidates`` chunks. When the best of them are weak
— fewer than ``MIN_CONFIDENT_HITS`` hits whose calibrated score
(:mod:`memoryd.indexer.search.calibration`) reaches the abstention threshold —
the answer may sit just past that cut (a long dialogue whose
evidence turn is one line among many, a paraphrase the keyword leg misses).
The searcher then runs the query once more with ``search.fallback_candidates``
candidates per leg (the same keyword plan budgets bound that leg's work) and
says so in ``--explain`` (``query_analysis.fallback``). Hybrid mode only: a wider
vector-only search ranks its top hits the same, and keyword mode has no cosine.

The threshold is the query's abstention threshold (``min_score``) when the
caller gives one, else ``search.min_score``: "weak" means "fewer than three hits
an agent would be shown". A threshold of 0 never makes a result weak. Pure
functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memoryd.indexer.config import SearchConfig
from memoryd.indexer.search.hits import Hit

MIN_CONFIDENT_HITS = 3
"""Fewer candidates than this at or above the threshold make a result weak."""


def threshold(cfg: SearchConfig, min_score: float | None) -> float:
    """The calibrated score a confident hit reaches: the query's ``min_score``, else ``search.min_score``."""
    return cfg.min_score if min_score is None else min_score


def wider(cfg: SearchConfig, n_cand: int, n_ranked: int, hits: Sequence[Hit], cutoff: float) -> dict[str, Any] | None:
    """The fallback to run for the calibrated, ranked ``hits`` (``{"candidates", "reason"}``), or None.

    None when the fallback is off (``fallback_candidates`` not above ``n_cand``),
    when the ``n_ranked`` candidates are fewer than ``n_cand`` (the legs ran out of
    chunks: a wider search finds nothing more), or when the result is not weak.
    """
    if cfg.fallback_candidates <= n_cand or n_ranked < n_cand or cutoff <= 0:  # off, or nothing more to see
        return None
    confident = sum(1 for h in hits if h.score >= cutoff)
    if confident >= MIN_CONFIDENT_HITS:
        return None
    return {"candidates": cfg.fallback_candidates, "first_candidates": n_cand,
            "reason": f"{confident} hit(s) with score >= {cutoff:g} (fewer than {MIN_CONFIDENT_HITS})"}
