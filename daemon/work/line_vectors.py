"""Line vectors for ``context`` excerpts, memoised: the lines of popular memories come back query after query.

``context`` ranks the lines of the spans it must trim by their cosine with the
query (:mod:`memoryd.indexer.search.context`); each line is one short passage
for the model, and ~48 of them cost tens of query embeddings. A line's vector
depends only on its text and the model, so a bounded LRU keyed by the text
never goes stale; only the lines not seen recently are embedded, in one batch.
Handlers run on several connection threads, hence the lock (the model call
runs outside it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

MEMO_LINES = 4096
"""Vectors kept: 4096 x 384 float32 is 6 MB, the lines of a few hundred recent passages."""


class LineVectors:
    """``embed_passages`` over lines, with a bounded LRU memo of the vectors; callable like it."""

    def __init__(self, embed_passages: Callable[[list[str]], Any], size: int = MEMO_LINES) -> None:
        if size < 0:
            raise ValueError(f"line vector memo size must be >= 0, got {size}")
        self._embed = embed_passages
        self._size = size
        self._memo: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, lines: Sequence[str]) -> Any:
        """Shape (len(lines), dimension), row i the vector of ``lines[i]``."""
        with self._lock:
            known = {line: self._memo[line] for line in lines if line in self._memo}
            for line in known:
                self._memo.move_to_end(line)
        missing = [line for line in dict.fromkeys(lines) if line not in known]
        if missing:
            fresh = dict(zip(missing, self._embed(missing), strict=True))
            known.update(fresh)
            with self._lock:
                self._memo.update(fresh)
                while len(self._memo) > self._size:
                    self._memo.popitem(last=False)
        return np.stack([known[line] for line in lines])
