"""Ranking chunks that have no vector yet (keyword-first indexing: their vector is still queued).

Such a chunk can only be found by the keyword leg, and in ``hybrid`` mode it has no
cosine to fuse. Scoring that missing cosine as 0 (the worst) would bury it under every
chunk with a vector, even one matching no query word; ranking it on its keyword score
alone would favour it over a chunk with the same keyword score and a real, average
cosine. The rule used instead: **a chunk without a vector is given the mean cosine of
the candidates that have one**. On that leg it is then exactly average — neither
favoured nor buried — and its place is decided by its keyword score against the same
scale as every other candidate, under each fusion (z-score 0, min-max and rank in the
middle). When no candidate has a vector (a folder just opened), the vector leg is
empty for everyone and the ranking is the keyword leg's.

A warm index has no such chunk, so its rankings are untouched. ``--explain`` shows
``vector: pending`` for them; their reported ``vector_score`` stays 0 (no cosine exists).
"""

from __future__ import annotations

from collections.abc import Sequence


def pending_ids(vec: dict[int, float], ids: Sequence[int]) -> set[int]:
    """Candidates without a cosine after both legs ran: those whose vector is not in the index yet."""
    return {i for i in ids if i not in vec}


def neutral_vector_scores(vec: dict[int, float], ids: Sequence[int]) -> dict[int, float]:
    """``vec`` with each candidate lacking a cosine given the mean cosine of those that have one."""
    have = [vec[i] for i in ids if i in vec]
    if not have or len(have) == len(ids):
        return vec
    mean = sum(have) / len(have)
    return {**vec, **{i: mean for i in ids if i not in vec}}
