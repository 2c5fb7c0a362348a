"""An optional ranking prior: importance, reinforcement and recency of what a hit holds.

``score + weight × prior``, where ``prior`` in [0, 1] is the mean of three parts:

- importance: the highest importance among the hit's entry markers
  (:mod:`memoryd.indexer.markdown.entrymeta`), scaled from the router's 1–5 to 0–1;
  0.5 when no entry was rated (the user wrote them), so unrated text is
  neither favoured nor buried;
- reinforcement: ``r / (r + 1)`` for the most reinforced entry (0 when none);
- recency: ``0.5 ** (age / RECENCY_HALF_LIFE_DAYS)``, the age counted from the
  newest dated candidate of the same query (not the wall clock, so an old
  archive is not flattened to zero); files that never decay (``MEMORY.md``,
  undated files) count as newest.

Off by default (``search.prior_weight = 0``): on the LoCoMo/MADial dev sets it
does not help (docs/importance.md has the leave-one-conversation-out table),
and those sets carry no importance or reinforcement markers at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from memoryd.indexer.markdown.entrymeta import IMPORTANCE_MAX, IMPORTANCE_MIN, summarize
from memoryd.indexer.search.hits import Hit
from memoryd.indexer.search.rerank import DAY_S, file_time

RECENCY_HALF_LIFE_DAYS = 30.0
NEUTRAL_IMPORTANCE = 0.5


def prior(text: str, age_days: float) -> float:
    """The prior in [0, 1] of a passage ``text`` that is ``age_days`` older than the newest candidate."""
    meta = summarize(text)
    importance = NEUTRAL_IMPORTANCE
    reinforced = 0
    if meta is not None:
        reinforced = meta.reinforced
        if meta.importance is not None:
            importance = (meta.importance - IMPORTANCE_MIN) / (IMPORTANCE_MAX - IMPORTANCE_MIN)
    recency = math.pow(0.5, max(0.0, age_days) / RECENCY_HALF_LIFE_DAYS)
    return (importance + reinforced / (reinforced + 1) + recency) / 3


def apply_prior(hits: Sequence[Hit], mtimes: dict[int, int], weight: float) -> list[Hit]:
    """``hits`` re-scored with the prior and re-sorted; unchanged when ``weight`` is 0.

    ``mtimes`` maps chunk id → file mtime (ns), for files not dated by name.
    """
    if weight <= 0 or not hits:
        return list(hits)
    times = {h.chunk_id: file_time(h.path, mtimes.get(h.chunk_id, 0)) for h in hits}
    dated = [t for t in times.values() if t is not None]
    newest = max(dated) if dated else 0.0

    def age(h: Hit) -> float:
        t = times[h.chunk_id]
        return 0.0 if t is None else (newest - t) / DAY_S

    out = [replace(h, score=round(h.score + weight * prior(h.text, age(h)), 6)) for h in hits]
    out.sort(key=lambda h: (-h.score, h.path, h.start_line))
    return out
