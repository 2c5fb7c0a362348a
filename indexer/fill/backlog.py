"""Chunks committed without a vector yet, and the order in which they get one.

Keyword-first indexing (:meth:`memoryd.indexer.engine.MemoryIndex.index_files` with
``defer_at``) commits a large batch's chunks and keyword terms at once and leaves
their vectors to later: on a cold folder every file is keyword-searchable within
seconds instead of after the whole embedding pass. The chunk ids still waiting for
a vector live here, ordered so that the embedding time pays off first:

* chunks of files the user touched (a save, ``reindex``) come before the backlog;
* within each tier, the most recently modified file first (it is what people ask about);
* ties by chunk id, so a file's chunks are embedded together.

Nothing here is persisted: SQLite is the truth. A chunk without a vector is a chunk
row whose embedding key is not in the cache, and opening the index finds those
again (:func:`memoryd.indexer.storage.embedded.vector_sync.sync_with_chunks`), so a crash mid-backlog
loses no finished vector and re-embeds none.

:class:`RateMeter` turns the finished counts into a rate and an ETA for ``status``,
the daemon's progress log and ``memoryd index``.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

Priority = tuple[int, int, int]  # (tier, -mtime_ns, chunk id): smallest first

URGENT, BACKLOG = 0, 1
RATE_WINDOW_S = 60.0  # the rate is measured over this much recent work


class RateMeter:
    """Chunks finished per second over the last ``RATE_WINDOW_S``, and the ETA that implies."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._samples: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()  # ``status`` reads the rate from another thread
        self.total = 0

    def start(self) -> None:
        """Work begins now (the first finished step then measures from here); no-op while measuring."""
        with self._lock:
            if not self._samples:
                self._samples.append((self._clock(), self.total))

    def record(self, n: int) -> None:
        """``n`` more chunks got their vector just now."""
        now = self._clock()
        with self._lock:
            if not self._samples:
                self._samples.append((now, self.total))  # the start of a measured stretch
            self.total += n
            self._samples.append((now, self.total))
            while len(self._samples) > 2 and now - self._samples[1][0] > RATE_WINDOW_S:
                self._samples.popleft()

    def reset(self) -> None:
        """Forget the measured stretch (the backlog ran dry: idle time must not dilute the next rate)."""
        with self._lock:
            self._samples.clear()

    def per_s(self) -> float | None:
        """The recent rate; None until two samples span some time."""
        with self._lock:
            if len(self._samples) < 2:
                return None
            (t0, n0), (t1, n1) = self._samples[0], self._samples[-1]
        return (n1 - n0) / (t1 - t0) if t1 > t0 else None

    def eta_s(self, pending: int) -> float | None:
        """Seconds until ``pending`` chunks are done at the recent rate (0 when none; None: unknown yet)."""
        if pending == 0:
            return 0.0
        rate = self.per_s()
        return pending / rate if rate else None


class VectorBacklog:
    """The chunk ids without a vector, as a priority queue with lazy deletion.

    Not thread-safe: the index's writing thread owns it (``len`` is safe from anywhere).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._heap: list[Priority] = []
        self._members: dict[int, Priority] = {}
        self._taken: dict[int, Priority] = {}  # handed to a step, not finished yet: still pending
        self.meter = RateMeter(clock)

    def __len__(self) -> int:
        """Chunks without a vector: queued plus in the step under way."""
        return len(self._members) + len(self._taken)

    def __contains__(self, chunk_id: object) -> bool:
        return chunk_id in self._members

    def add(self, ids: Iterable[int], mtime_ns: int, urgent: bool = False) -> None:
        """Queue ``ids`` (chunks of one file modified at ``mtime_ns``); re-adding re-prioritises."""
        tier = URGENT if urgent else BACKLOG
        for i in ids:
            prio = (tier, -int(mtime_ns), int(i))
            old = self._members.get(int(i))
            if old is not None and old <= prio:
                continue  # already queued at least as early
            self._members[int(i)] = prio
            heapq.heappush(self._heap, prio)

    def promote(self, ids: Iterable[int]) -> int:
        """Move queued ``ids`` to the urgent tier (a file the user just saved), keeping their order
        within it; returns how many moved. Ids not queued (done, or in a step under way) are left alone."""
        moved = 0
        for i in ids:
            old = self._members.get(int(i))
            if old is not None and old[0] != URGENT:
                self._members[int(i)] = prio = (URGENT, old[1], old[2])
                heapq.heappush(self._heap, prio)
                moved += 1
        return moved

    def discard(self, ids: Iterable[int]) -> None:
        """Forget chunks that no longer exist (their file changed or went)."""
        for i in ids:
            self._members.pop(int(i), None)
            self._taken.pop(int(i), None)
        if not self._members:
            self._heap.clear()

    def take(self, n: int) -> list[Priority]:
        """Remove and return up to ``n`` entries, most urgent first."""
        out: list[Priority] = []
        if self._members:
            self.meter.start()
        while self._heap and len(out) < n:
            prio = heapq.heappop(self._heap)
            if self._members.get(prio[2]) == prio:
                self._taken[prio[2]] = self._members.pop(prio[2])
                out.append(prio)
        return out

    def take_ids(self, ids: Iterable[int]) -> list[Priority]:
        """Remove and return the entries of these ids (those queued), e.g. a file the user asked for."""
        out = sorted(self._members.pop(int(i)) for i in ids if int(i) in self._members)
        self._taken.update((p[2], p) for p in out)
        return out

    def restore(self, entries: Iterable[Priority]) -> None:
        """Put back entries taken but not finished (the work was interrupted)."""
        for prio in entries:
            if self._taken.pop(prio[2], None) is not None and prio[2] not in self._members:
                self._members[prio[2]] = prio
                heapq.heappush(self._heap, prio)

    def finish(self, ids: Iterable[int], embedded: bool = True) -> None:
        """Taken chunks that are settled: given their vector (counted for the rate), or gone
        (``embedded=False``). A dry backlog restarts the rate measurement."""
        n = sum(1 for i in ids if self._taken.pop(int(i), None) is not None)
        if n and embedded:
            self.meter.record(n)
        if not self:
            self.meter.reset()

    def progress(self) -> dict[str, Any]:
        """``pending``, ``per_s`` and ``eta_s`` (None while not measurable), rounded for display."""
        pending = len(self)
        rate, eta = self.meter.per_s(), self.meter.eta_s(pending)
        return {"pending": pending, "per_s": None if rate is None else round(rate, 2),
                "eta_s": None if eta is None else round(eta, 1)}
