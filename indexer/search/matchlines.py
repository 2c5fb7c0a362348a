"""Which lines of a hit matched: the lines a person (or a trimmed context block) should see first.

A hit spans a whole chunk, ~9 lines of a chat or a section of notes, while the
evidence is usually one or two of them. Each line is scored with the signals
of both legs that are cheap at line level:

- **keyword**: the IDF-weighted sum of the distinct query terms the line holds
  (its terms analysed as a query's are, :func:`memoryd.indexer.search.keyword.query_terms`,
  so a CJK line yields the same bigrams the query searched);
- **vector**: a merged hit spans several chunks, each with its own cosine; a
  line takes the best cosine of the chunks that hold it, so the sub-window the
  vector leg liked most wins ties and breaks them for a line-free (vector-only) match.

Embedding every line of every hit with the model was measured and rejected:
~70 short lines per query cost several query embeddings (docs/scaling.md).
Pure functions (the only state is a bounded memo of analysed lines); the searcher supplies
the IDF of the query terms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache

from memoryd.indexer.search import keyword

MAX_MATCH_LINES = 3
"""Lines named per hit (best first): enough for a question and its answer, few enough to preview."""

MAX_LINE_CHARS = 2_000
"""Characters of one line that are analysed (a minified blob must not cost a query milliseconds)."""


def line_scores(
    text: str, start_line: int, idfs: Mapping[str, float],
    windows: Sequence[tuple[int, int, float]] = (),
) -> dict[int, tuple[float, float]]:
    """``{line number: (keyword score, vector score)}`` for the non-blank lines of ``text``.

    ``idfs`` maps each query term to its IDF (terms absent from it count 0);
    ``windows`` are ``(start_line, end_line, cosine)`` of the chunks the hit
    covers. Lines without a query term score 0 on the keyword side.
    """
    lines = text.split("\n")
    cosines = _line_cosines(start_line, len(lines), windows)
    out: dict[int, tuple[float, float]] = {}
    for offset, line in enumerate(lines):
        if not line.strip():
            continue
        # fsum: exact, so the score does not depend on the set's iteration order, which follows the
        # process's string hashes (two runs, or two lines with the same terms, could differ in the last bit
        # and break a tie differently).
        kw = math.fsum([idfs[t] for t in _line_terms(line[:MAX_LINE_CHARS]) if t in idfs]) if idfs else 0.0
        out[start_line + offset] = (kw, cosines[offset])
    return out


def _line_cosines(start_line: int, count: int, windows: Sequence[tuple[int, int, float]]) -> list[float]:
    """The best cosine of the ``windows`` holding each of ``count`` lines from ``start_line`` (0.0: none),
    one pass per window rather than a scan of every window for every line."""
    best: list[float | None] = [None] * count
    for s, e, c in windows:
        for offset in range(max(s - start_line, 0), min(e - start_line + 1, count)):
            seen = best[offset]
            if seen is None or c > seen:
                best[offset] = c
    return [0.0 if c is None else c for c in best]


@lru_cache(maxsize=1 << 14)
def _line_terms(line: str) -> frozenset[str]:
    """A line's distinct terms, memoised: the lines of popular chunks come back query after query,
    and analysing one costs ~15-50 µs (a search names lines for up to ~200 of them)."""
    return frozenset(keyword.query_terms(line))


def ranked_lines(scores: Mapping[int, tuple[float, float]]) -> list[int]:
    """Line numbers, best first: keyword score, then the vector sub-window's cosine, then position."""
    return sorted(scores, key=lambda n: (-scores[n][0], -scores[n][1], n))


def best_lines(scores: Mapping[int, tuple[float, float]], limit: int = MAX_MATCH_LINES) -> list[int]:
    """The lines that matched best, at most ``limit``, best first (a preview sorts them; an excerpt
    takes them in this order).

    Lines holding query terms are named when there are any; otherwise the hit
    is a vector match and the first lines of its best sub-window are named.
    Empty for a hit without a non-blank line.
    """
    order = ranked_lines(scores)
    if order and scores[order[0]][0] > 0:
        order = [n for n in order if scores[n][0] > 0]
    return order[:limit]
