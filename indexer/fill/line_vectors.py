"""Each chunk's line vectors, embedded when the index has time, read by the ranking.

A chunk's vector blurs its 10–20 lines into one; a question whose answer is one line of it
(a multi-hop question's second fact, typically) is better told by that line's own vector. So
every non-blank line of a chunk is embedded as a passage (as the context excerpts embed lines:
the same text, so the same vector) and the chunk keeps them as one row — float16, one per
line, in the chunk's line order. The search reads the rows of its first candidates and takes
each chunk's best line cosine (``-1`` for a chunk without a non-blank line;
:mod:`memoryd.indexer.search.lineblend`); the context excerpts read them by line text
(:func:`decode_lines`).

The rows are derived data with the chunk's lifetime: the foreign key drops a chunk's row with
the chunk (an edit, a removal, an identity change), and the chunks without a row *are* the
backlog — nothing to keep in memory or recover after a crash. :class:`LineVectorFill` works
through it a bounded step at a time, after the chunk vectors (the daemon's idle work), and
each slice's chunks are written in one transaction, only if the chunk still holds the text it
was read with (the id of a deleted chunk may be reused). Each backend keeps the rows its own
way (:class:`~memoryd.indexer.storage.base.LineRows`: :mod:`memoryd.indexer.storage.embedded.store_lines` for SQLite,
:mod:`memoryd.indexer.storage.postgres.line_rows`).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memoryd.indexer.storage.base import CacheStore, LineRows
from memoryd.indexer.storage.embedded.cache import cache_key
from memoryd.indexer.storage.line_codec import LineRow, PendingChunk, chunk_lines, encode
from memoryd.indexer.types import Embedder

STEP_LINES = 256  # lines a fill step embeds at most (short passages: about a second on two cores)
SLICE_LINES = 64  # lines a model call embeds at most (a task waits for one call at most)
INLINE_LINES = 16  # a step this small runs on the inline session (a save's few lines; see fill)
RECENT_LINES = 2048  # lines embedded lately kept in memory (3 MB): repeated lines are not embedded again


@dataclass
class FillResult:
    """What one fill step did."""

    chunks: int = 0  # chunks that got their line vectors
    embedded: int = 0  # lines computed by the model (the rest came from the cache)


class LineVectorFill:
    """The line-vector backlog: the chunks without line vectors, filled a bounded step at a time.

    Runs on the index's writing thread. ``pending`` is a hint kept in memory (True at start and
    after any indexing), so an idle daemon does not count the backlog on every turn of its loop.
    """

    def __init__(self, rows: LineRows, cache: CacheStore, model_id: str, read_only: bool) -> None:
        self._rows = rows
        self._cache = cache
        self._model_id = model_id
        self.pending = not read_only
        self._counted: tuple[float, int] | None = None  # (when, chunks pending) for recount
        self._recent: OrderedDict[str, Any] = OrderedDict()  # the last RECENT_LINES lines embedded
        # Where the scan for chunks without rows starts: below it every chunk had its row when it was
        # last looked at, and rows only go with their chunks, so a step need not walk past every filled
        # chunk again (36 ms a step at 50k chunks on SQLite). 0 at open: the first scan walks them all;
        # then it follows the backlog up, and new chunks (added) bring it down to them.
        self._floor = 0

    def count(self) -> int:
        """Chunks still without line vectors."""
        return self._rows.count()

    def recount(self, count: Callable[[], int], max_age_s: float) -> int:
        """The chunks pending, for ``status`` (which may be polled every half second, while ``count`` is an
        anti-join over every chunk): ``count()`` asked again only when its last answer is older than
        ``max_age_s``, and kept meanwhile by what this process did since (each step's chunks taken off,
        :meth:`added` chunks put on; chunks deleted meanwhile are seen at the next count)."""
        now = time.monotonic()
        if self._counted is None or now - self._counted[0] > max_age_s:
            self._counted = (now, count())
        return self._counted[1]

    def added(self, chunk_ids: Sequence[int]) -> None:
        """These chunks were committed: they wait for their line vectors (the next scan starts at them
        if they are below where it would: the id of a deleted chunk may be reused)."""
        if chunk_ids:
            self.pending = True
            self._floor = min(self._floor, min(chunk_ids))
            if self._counted is not None:
                self._counted = (self._counted[0], self._counted[1] + len(chunk_ids))

    def _took(self, chunks: int) -> None:
        if self._counted is not None:
            self._counted = (self._counted[0], max(0, self._counted[1] - chunks))

    def fill(self, bulk: Embedder, inline: Embedder | None = None, max_lines: int = STEP_LINES,
             slice_lines: int = SLICE_LINES, should_yield: Callable[[], bool] | None = None) -> FillResult:
        """Give the next chunks (oldest first) their line vectors, embedding at most ``max_lines``
        new lines, ``slice_lines`` a model call; ``should_yield`` is asked between calls (True: stop,
        what is written stays). A step of at most :data:`INLINE_LINES` lines (what a save adds) runs
        on ``inline`` when given — the model session already warm for saves — and larger ones on
        ``bulk`` (the daemon's low-priority session, which gives way to a save). Clears ``pending``
        when no chunk is left.

        Lines the embedding cache holds (the context excerpts keep theirs there) are not embedded
        again; the fill itself writes nothing to the cache: ~8 lines a chunk would crowd the chunks'
        own vectors out of it, and out of the machine-wide cache that every data dir shares."""
        todo = self._next_chunks(max_lines)
        if not todo:
            self.pending = False
            self._counted = (time.monotonic(), 0)
            return FillResult()
        result = FillResult()
        small = sum(len(chunk_lines(text)) for _, _, text in todo) <= INLINE_LINES  # a save's few, not a backlog's
        model = inline if inline is not None and small else bulk
        for part in _slices(todo, slice_lines):
            lines = list(dict.fromkeys(x for _, _, text in part for x in chunk_lines(text)))
            known = self._known(lines)
            new = [line for line in lines if line not in known]
            if new:
                fresh = dict(zip(new, np.asarray(model.embed_passages(new), dtype=np.float32), strict=True))
                self._remember(fresh)
                known |= fresh
            self._rows.write(_encoded(part, known))
            self._took(len(part))
            result.chunks += len(part)
            result.embedded += len(new)
            if should_yield is not None and should_yield():
                break
        return result

    def _known(self, lines: Sequence[str]) -> dict[str, Any]:
        """The vectors of ``lines`` already at hand: recently embedded here (a heading or a bullet recurs
        across chunks and files), or in the embedding cache (the context excerpts store theirs there)."""
        known = {line: self._recent[line] for line in lines if line in self._recent}
        for line in known:
            self._recent.move_to_end(line)  # least recently used goes first: a common heading stays
        keys = {line: cache_key(self._model_id, line) for line in lines if line not in known}
        found = self._cache.get_many(list(keys.values()), count=False) if keys else {}
        return known | {line: found[k] for line, k in keys.items() if k in found}

    def _remember(self, vectors: dict[str, Any]) -> None:
        self._recent.update(vectors)
        while len(self._recent) > RECENT_LINES:
            self._recent.popitem(last=False)

    def _next_chunks(self, max_lines: int) -> list[PendingChunk]:
        """The oldest chunks without line vectors, about ``max_lines`` lines' worth (at least one chunk)."""
        out: list[PendingChunk] = []
        lines = 0
        found = self._rows.next_chunks(max(1, max_lines // 8), self._floor)
        self._floor = found[0][0] if found else self._floor
        for chunk in found:
            n = len(chunk_lines(chunk[2]))
            if out and lines + n > max_lines:
                break
            out.append(chunk)
            lines += n
        return out


def _encoded(part: Sequence[PendingChunk], known: Mapping[str, Any]) -> list[LineRow]:
    return [(chunk_id, sha, encode(np.stack([known[x] for x in lines]) if lines else np.zeros((0,))))
            for chunk_id, sha, text in part for lines in (chunk_lines(text),)]


def _slices(todo: Sequence[PendingChunk], slice_lines: int) -> list[list[PendingChunk]]:
    """``todo`` in runs of whole chunks of about ``slice_lines`` lines each."""
    out: list[list[PendingChunk]] = [[]]
    lines = 0
    for item in todo:
        n = len(chunk_lines(item[2]))
        if out[-1] and lines + n > slice_lines:
            out.append([])
            lines = 0
        out[-1].append(item)
        lines += n
    return out
