"""Optional re-ranking after fusion: recency decay and MMR diversity.

Both are off by default because the evaluation data do not support them
(docs/quality.md): memory questions ask about old sessions as often as new
ones, and top-1 accuracy cannot gain from diversity. They are there for users
whose memories do age (a daily journal where last week matters most) or whose
top hits repeat one another.

- Recency: ``score × 0.5 ** (age_days / half_life_days)``. A file's date is the
  ``YYYY-MM-DD`` in its name (``memory/2026-11-25.md``), else its mtime.
  ``MEMORY.md`` — the curated long-term file — never decays.
- MMR (Carbonell & Goldstein): pick, one at a time, the hit maximising
  ``λ × relevance − (1 − λ) × max cosine to the hits already picked``.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import PurePosixPath

import numpy as np

_DATED = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
DAY_S = 86400.0


def file_time(path: str, mtime_ns: int) -> float | None:
    """Seconds since the epoch a memory file speaks for; None for files that never decay."""
    name = PurePosixPath(path).name
    if name.upper() == "MEMORY.MD":
        return None
    m = _DATED.search(name)
    if m:
        try:
            return datetime(int(m[1]), int(m[2]), int(m[3]), tzinfo=UTC).timestamp()
        except ValueError:
            pass
    return mtime_ns / 1e9 if mtime_ns else None


def recency_factor(path: str, mtime_ns: int, half_life_days: float, now: float | None = None) -> float:
    """The multiplier in (0, 1] for one hit; 1.0 when decay is off or the file does not age."""
    if half_life_days <= 0:
        return 1.0
    t = file_time(path, mtime_ns)
    if t is None:
        return 1.0
    age_days = max(0.0, ((time.time() if now is None else now) - t) / DAY_S)
    return math.pow(0.5, age_days / half_life_days)


def mmr_order(
    relevance: Sequence[float], vectors: Callable[[Sequence[int]], np.ndarray], lam: float, k: int,
) -> list[int]:
    """Indices into ``relevance`` in MMR order (the first ``k``); ``vectors(indices)`` gives unit rows."""
    n = len(relevance)
    if n == 0:
        return []
    mat = vectors(list(range(n)))
    rel = np.asarray(relevance, dtype=np.float32)
    chosen: list[int] = [int(np.argmax(rel))]
    best_sim = mat @ mat[chosen[0]]
    while len(chosen) < min(k, n):
        score = lam * rel - (1.0 - lam) * best_sim
        score[chosen] = -np.inf
        nxt = int(np.argmax(score))
        chosen.append(nxt)
        best_sim = np.maximum(best_sim, mat @ mat[nxt])
    return chosen
