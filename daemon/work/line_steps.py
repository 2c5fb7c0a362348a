"""The worker's idle-time job after the vector backlog: each chunk's line vectors.

Once every chunk has its vector, the worker gives the line-vector backlog
(:mod:`memoryd.indexer.fill.line_vectors`: the chunks without their lines' vectors) one
bounded step whenever its queue is empty, with the same low-priority embedder as
the vector backlog: a task that arrives ends the step between model calls, or
during one (:class:`SliceAbandoned`: the lines of that call are embedded again
later). The searches use a query's line vectors only once all its candidates have
them, so a half-filled index ranks as before. Logs ``lines.progress`` every
``PROGRESS_EVERY_S`` while a stretch lasts and ``lines.done`` at its end (at debug
level for a save's few chunks); a failed
step (disk full, or any other error: the line vectors are an extra, never worth the
worker) pauses the job for ``RETRY_S`` or until a task goes through.

It runs only on the worker thread and owns no thread of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from memoryd.daemon.work.pause import RetryPause
from memoryd.daemon.work.polite import SliceAbandoned
from memoryd.indexer.engine import MemoryIndex
from memoryd.indexer.errors import MemorydError

log = structlog.get_logger(__name__)

PROGRESS_EVERY_S = 10.0  # lines.progress while a stretch lasts longer than this
RETRY_S = 30.0
LOUD_CHUNKS = 50  # a stretch of at least this many chunks ends with an info line (fewer: debug)


class LineSteps:
    """The line-vector stepping, for :class:`~memoryd.daemon.work.worker.IndexWorker`."""

    def __init__(self, index: MemoryIndex, task_waiting: Callable[[], bool]) -> None:
        self.index = index
        self._task_waiting = task_waiting
        self._since: float | None = None
        self._chunks = self._lines = 0
        self._next_progress = 0.0
        self._pause = RetryPause()

    def retry_in(self) -> float:
        """Seconds before the next step may run (positive only after a failed step)."""
        return self._pause.remaining()

    def retry_now(self) -> None:
        """A task went through: a paused fill may try again at once."""
        self._pause.clear()

    def step(self) -> str | None:
        """One bounded step; the error of a failed one (the worker keeps it as its last error), else None."""
        if self._since is None:  # a stretch begins: after a save a few chunks, after a cold start all of them
            self._since = time.monotonic()
            self._next_progress = self._since + PROGRESS_EVERY_S
            log.debug("lines.backlog")
        try:
            done = self.index.fill_line_vectors(should_yield=self._task_waiting)
        except SliceAbandoned:
            log.debug("lines.yielded", reason="a task arrived mid-slice")
            return None
        except Exception as exc:  # line vectors are an extra: whatever fails here must not stop the worker
            why = str(exc) if isinstance(exc, MemorydError) else f"{type(exc).__name__}: {exc}"
            log.error("lines.failed", error=why, action=f"retrying in {RETRY_S:.0f} s")
            self._pause.start(RETRY_S)
            return why
        self._chunks += done.chunks
        self._lines += done.embedded
        self._report()
        return None

    def _report(self) -> None:
        now = time.monotonic()
        if not self.index.lines_pending() and self._since is not None:
            done = log.info if self._chunks >= LOUD_CHUNKS else log.debug  # a save's few lines are not news
            done("lines.done", chunks=self._chunks, lines_embedded=self._lines, seconds=round(now - self._since, 1))
            self._since, self._chunks, self._lines, self._next_progress = None, 0, 0, 0.0
        elif now >= self._next_progress:
            self._next_progress = now + PROGRESS_EVERY_S
            log.info("lines.progress", chunks=self._chunks, lines_embedded=self._lines, pending=self._count())

    def _count(self) -> int | None:
        """The chunks left, for a log line; None when they cannot be counted now (a database away)."""
        fill = self.index.line_fill
        try:
            return fill.count() if fill is not None else 0
        except Exception as exc:  # a log figure must never end the worker
            log.debug("lines.count_failed", error=str(exc))
            return None
