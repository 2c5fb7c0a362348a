"""Term proximity for the keyword leg: reward chunks where the query's words occur close together.

BM25 scores each query term on its own, so a chunk that mentions "support"
in one line and "group" five lines later ties with one that says "support
group". The evidence for a question usually holds its words together, so a
proximity term is added to each candidate's BM25, after the model of BM25TP
(Rasolofo & Savoy, 2003; Büttcher et al., 2006): for every pair of distinct
query terms, each pair of occurrences at most ``MAX_DISTANCE`` terms apart
adds ``1 / distance``; the pair's sum is saturated like a BM25 term frequency
(``acc / (acc + SATURATION)``) and weighted by the *smaller* IDF of the two,
so a pair is only as informative as its more common word (a name that is in
every chunk adds nothing). The result is in BM25 units and is added to the
chunk's BM25 with ``PROXIMITY_WEIGHT`` before the legs are fused.

Only word terms take part. CJK text is indexed as characters and overlapping
bigrams (:mod:`memoryd.indexer.search.keyword`): adjacency is already inside those terms, and
the stored run is not in text order (its characters, then its bigrams), so
positions would mislead.

Positions are those of the analysed terms stored in ``chunks_fts.terms``
(stop words removed, so "support for the group" counts as adjacent). Work is
bounded by the candidate set, never the corpus: at most ``MAX_PAIR_TERMS``
terms (the rarest), ``MAX_POSITIONS`` occurrences of a term per chunk.
Pure functions; callers read the terms and document frequencies.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence

MAX_DISTANCE = 8
"""Occurrences further apart than this many terms do not count (a sentence or two)."""

SATURATION = 1.2
"""Like BM25's k1: the first close occurrence of a pair counts most."""

PROXIMITY_WEIGHT = 2.0
"""Default weight of the proximity score added to BM25 (both in BM25 units); 0 turns it off."""

MAX_PAIR_TERMS = 16
"""Query terms (the rarest) whose pairs are scored: 120 pairs at most, whatever the query's length."""

MAX_POSITIONS = 64
"""Occurrences of one term read per chunk; bounds the pair loop on repetitive text."""

_MIN_IDF = 1e-3  # FTS5 floors IDF at 1e-6 for terms in over half the chunks; such pairs add nothing
_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3041-\u30ff\u3131-\u318e\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\U00020000-\U0003ffff]"
)


def idf(df: int, n_docs: int) -> float:
    """FTS5's BM25 IDF, ``log((N - df + 0.5) / (df + 0.5))`` floored at 1e-6; 0 for an absent term."""
    if df <= 0:
        return 0.0
    return max(math.log((n_docs - df + 0.5) / (df + 0.5)), 1e-6)


def word_terms(terms: Sequence[str]) -> list[str]:
    """The distinct non-CJK terms of ``terms``, in order: the only ones proximity pairs."""
    return [t for t in dict.fromkeys(terms) if not _CJK.search(t)]


def pair_terms(terms: Sequence[str], idfs: Mapping[str, float]) -> list[str]:
    """The query terms whose pairs are scored: word terms with a useful IDF, rarest first, capped."""
    words = [t for t in word_terms(terms) if idfs.get(t, 0.0) > _MIN_IDF]
    words.sort(key=lambda t: -idfs[t])
    return words[:MAX_PAIR_TERMS]


def proximity_scores(
    terms: Sequence[str], idfs: Mapping[str, float], docs: Mapping[int, str],
    max_distance: int = MAX_DISTANCE, saturation: float = SATURATION,
) -> dict[int, float]:
    """Proximity score (≥ 0, BM25 units) of each chunk in ``docs`` (id → its space-separated terms).

    ``terms`` are the query's analysed terms, ``idfs`` their IDF. A chunk
    holding fewer than two of the pair terms scores 0.
    """
    wanted = pair_terms(terms, idfs)
    if len(wanted) < 2:
        return dict.fromkeys(docs, 0.0)
    wanted_set = set(wanted)
    out: dict[int, float] = {}
    for cid, text in docs.items():
        positions = _positions(text, wanted_set)
        score = 0.0
        # Only the pairs of terms the chunk holds (in the query's pair order, so the sum is the same):
        # a long query's 120 pairs cost every candidate a loop otherwise, though few of its terms occur.
        for a, b in itertools.combinations([t for t in wanted if t in positions], 2):
            acc = _closeness(positions[a], positions[b], max_distance)
            if acc:
                score += min(idfs[a], idfs[b]) * acc / (acc + saturation)
        out[cid] = score
    return out


def _positions(text: str, wanted: set[str]) -> dict[str, list[int]]:
    """Where each wanted term occurs (term index); {} unless two of them may (a substring test first).

    Found with ``str.find`` / ``str.count`` (C loops) rather than a Python pass
    over each candidate's few hundred terms (proximity is on every query's path).
    """
    present = [term for term in wanted if term in text]
    if len(present) < 2:
        return {}
    padded = f" {text} "  # each term, the first included, follows exactly one space
    found: dict[str, list[int]] = {}
    for term in present:
        needle = f" {term} "
        positions: list[int] = []
        at, seen, spaces = padded.find(needle), 0, 0
        while at >= 0 and len(positions) < MAX_POSITIONS:
            spaces += padded.count(" ", seen, at)  # the term's index: the spaces before its own
            seen = at
            positions.append(spaces)
            at = padded.find(needle, at + len(needle) - 1)
        if positions:
            found[term] = positions
    return found


def _closeness(pa: list[int], pb: list[int], max_distance: int) -> float:
    """Sum of ``1 / distance`` over occurrence pairs at most ``max_distance`` apart."""
    acc = 0.0
    for x in pa:
        for y in pb:
            d = abs(y - x)
            if 0 < d <= max_distance:
                acc += 1.0 / d
    return acc
