"""What the query pipeline does to ranked hits: calibrate, cut, name lines, explain.

Backend-neutral (no SQL): :mod:`memoryd.indexer.search.pipeline` shapes every backend's
answer with these functions, so a hit means the same whatever stores it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memoryd.indexer.search import calibration
from memoryd.indexer.search.hits import Hit
from memoryd.indexer.search.matchlines import best_lines, line_scores
from memoryd.indexer.storage.rows import ChunkRow


def calibrated(hits: list[Hit], feats: dict[int, calibration.Features]) -> list[Hit]:
    """``hits`` in the same order, each ``score`` now its calibrated relevance, made non-increasing
    down the list (:func:`memoryd.indexer.search.calibration.monotone`)."""
    scores = calibration.monotone([calibration.probability(feats[h.chunk_id]) for h in hits])
    return [h.rescored(round(s, 6)) for h, s in zip(hits, scores, strict=True)]


NO_CONTENT = "the query has no content word, only very common ones: nothing in memory answers it"


def confident(hits: list[Hit], min_score: float, content: bool = True) -> tuple[list[Hit], str | None]:
    """Hits whose calibrated score reaches ``min_score`` (a prefix: scores never rise down the list);
    with none left, also why the search abstains (None: it does not). ``content`` False: the query has
    no content word (:mod:`memoryd.indexer.search.content_words`), which is the reason then."""
    kept = [h for h in hits if h.score >= min_score]
    if kept:
        return kept, None
    if not content:
        return kept, NO_CONTENT
    best = hits[0].score if hits else 0.0
    return kept, f"no confident match: best score {best:.3f} < min_score {min_score:g}"


def with_match_lines(
    hits: list[Hit], idfs: dict[str, float], vec: dict[int, float], rows: dict[int, ChunkRow],
) -> list[Hit]:
    """``hits`` naming the lines of each that matched best (:mod:`memoryd.indexer.search.matchlines`)."""
    out = []
    for h in hits:
        windows = [(rows[i].start_line, rows[i].end_line, vec.get(i, 0.0)) for i in (h.chunk_id, *h.absorbed)
                   if i in rows]
        out.append(h.with_match_lines(tuple(best_lines(line_scores(h.text, h.start_line, idfs, windows)))))
    return out


def _ranks(scores: dict[int, float]) -> dict[int, int]:
    return {i: rank for rank, i in enumerate(sorted(scores, key=lambda i: -scores[i]), 1)}


def explain_hits(
    hits: Sequence[Hit], vec: dict[int, float], kw: dict[int, float], how: str, rows: dict[int, ChunkRow],
    waiting: set[int] | None = None,
) -> list[dict[str, Any]]:
    """Why each hit ranks where it does: its rank and raw score in each leg, and the fusion used.

    A hit merged from consecutive chunks (:mod:`memoryd.indexer.search.hits`) explains its first chunk, and lists
    the chunks it absorbed under ``merged`` with their own spans, ranks and scores. A chunk in
    ``waiting`` (no vector yet) says ``"vector": "pending"``."""
    vr, kr = _ranks(vec), _ranks(kw)

    def leg(i: int) -> dict[str, Any]:
        out = {"vector_rank": vr.get(i), "keyword_rank": kr.get(i), "cosine": round(vec.get(i, 0.0), 6),
               "bm25": round(kw[i], 6) if i in kw else None}
        return {**out, "vector": "pending"} if waiting and i in waiting else out

    out = []
    for h in hits:
        why = {"fusion": how, **leg(h.chunk_id)}
        if h.absorbed:
            why["merged"] = [{"start_line": rows[i].start_line, "end_line": rows[i].end_line, **leg(i)}
                             for i in h.absorbed]
        out.append(why)
    return out


def checked(rows: dict[int, ChunkRow], path_check: Callable[[str, str], bool]) -> dict[int, ChunkRow]:
    """``rows`` of the files ``path_check`` accepts (asked once per file)."""
    verdicts: dict[tuple[str, str], bool] = {}
    for r in rows.values():
        if (r.root, r.path) not in verdicts:
            verdicts[(r.root, r.path)] = path_check(r.root, r.path)
    return {i: r for i, r in rows.items() if verdicts[(r.root, r.path)]}
