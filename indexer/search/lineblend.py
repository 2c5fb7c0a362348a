"""The lower hits ordered with each passage's best line, not only its score.

Below the first few hits the calibrated relevance stands in plateaus (hits with the same score,
or nearly), and a question that joins two facts finds its second fact down there: a passage
whose one line answers it while its chunk vector, blurred over 10–20 lines, does not stand out.
Each merged hit from ``FIRST_MOVED`` on is ordered by ``z(score) + weight * z(best line cosine)``
(z-scores over the hits considered; the best line cosine is the best of its chunks'
:mod:`memoryd.indexer.fill.line_vectors`); the hits above never move, so the first answers stay
what the calibrated score says. Measured on LoCoMo held out per conversation, multi-hop
questions with every evidence line in the top 10: 0.696 → 0.729, R@1 unchanged (docs/quality.md,
"Multi-hop questions").

The blend needs every considered chunk's line vectors: when one is missing (the index is still
filling them in), the order is left as it is rather than ranking filled chunks above unfilled ones.
"""

from __future__ import annotations

import math
import statistics
import sys
from collections.abc import Sequence

from memoryd.indexer.search.hits import Hit, merge_consecutive

FIRST_MOVED = 4  # the first merged hit the blend may move (hits 1-3 keep their places)


def missing(hits: Sequence[Hit], line_cosines: dict[int, float]) -> int:
    """How many of ``hits`` have no line cosine (their chunk's line vectors are not filled in yet)."""
    return sum(h.chunk_id not in line_cosines for h in hits)


def describe(hits: Sequence[Hit], line_cosines: dict[int, float], weight: float) -> str:
    """For ``explain``: whether :func:`blend` reordered these hits, and if not why."""
    if weight <= 0:
        return "off (search.line_weight = 0)"
    n = missing(hits, line_cosines)
    if n:
        return f"skipped: {n} of {len(hits)} candidates without line vectors yet"
    return "applied" if len(_groups(hits)) > FIRST_MOVED else f"nothing to move (hits 1-{FIRST_MOVED - 1} never move)"


def blend(hits: Sequence[Hit], line_cosines: dict[int, float], weight: float) -> list[Hit]:
    """``hits`` (calibrated, best first, unmerged) reordered by merged group from :data:`FIRST_MOVED`
    on; unchanged when ``weight`` is 0, there is nothing to move, or a chunk lacks its line cosine."""
    if weight <= 0 or missing(hits, line_cosines):
        return list(hits)
    groups = _groups(hits)
    if len(groups) <= FIRST_MOVED:
        return list(hits)
    score = _z([g[0].score for g in groups])
    line = _z([max(line_cosines[h.chunk_id] for h in g) for g in groups])
    head = list(range(FIRST_MOVED - 1))
    tail = sorted(range(FIRST_MOVED - 1, len(groups)), key=lambda i: (-(score[i] + weight * line[i]), i))
    return [h for i in head + tail for h in groups[i]]


def _groups(hits: Sequence[Hit]) -> list[list[Hit]]:
    """The hits as the merge would join them, each group its chunks in rank order (so a group moves whole
    and merges again as it did)."""
    by_id = {h.chunk_id: h for h in hits}
    return [[by_id[m.chunk_id], *(by_id[i] for i in m.absorbed)] for m in merge_consecutive(list(hits))]


def _z(values: Sequence[float]) -> list[float]:
    mean = statistics.fmean(values)
    spread = pstdev(values) or 1.0
    return [(v - mean) / spread for v in values]


def pstdev(values: Sequence[float]) -> float:
    """``statistics.pstdev(values)``, the same float, without its ``Fraction`` arithmetic (~0.13 ms for a
    search's ~30 values, twice a query: more than the rest of the blend).

    The same exact value: every finite float is an integer over a power of two, so over the largest
    denominator the sums are plain integers and the population variance is the exact fraction
    ``(n * Σx² - (Σx)²) / (n² d²)``; reduced as ``Fraction`` reduces it, its square root is rounded
    by the same steps as ``statistics``' (the correctly rounded root of that fraction)."""
    if not values or not all(map(math.isfinite, values)):
        return statistics.pstdev(values)  # its own errors and NaN/inf rules
    ratios = [v.as_integer_ratio() for v in values]
    den = max(d for _, d in ratios)
    xs = [n * (den // d) for n, d in ratios]
    count = len(xs)
    num, denom = count * sum(x * x for x in xs) - sum(xs) ** 2, count * count * den * den
    g = math.gcd(num, denom)
    return _sqrt_of_fraction(num // g, denom // g)


_SQRT_BITS = 2 * sys.float_info.mant_dig + 3


def _sqrt_of_fraction(n: int, m: int) -> float:
    """The square root of ``n / m`` (a reduced fraction) as a float, correctly rounded: the algorithm of
    ``statistics._float_sqrt_of_frac`` (round-to-odd integer root with enough guard bits)."""
    q = (n.bit_length() - m.bit_length() - _SQRT_BITS) // 2
    if q >= 0:
        return float(_isqrt_round_to_odd(n, m << 2 * q) << q)
    return _isqrt_round_to_odd(n << -2 * q, m) / (1 << -q)


def _isqrt_round_to_odd(n: int, m: int) -> int:
    a = math.isqrt(n // m)
    return a | (a * a * m != n)
