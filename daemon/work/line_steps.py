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

The stepping itself (stretches, pauses, yielding) is :class:`~memoryd.daemon.work.idle_steps.IdleSteps`;
this module is what is particular to the line vectors (:class:`LineJob`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from memoryd.daemon.work.idle_steps import PROGRESS_EVERY_S, IdleSteps
from memoryd.daemon.work.ports import WritableIndex
from memoryd.indexer.errors import MemorydError

log = structlog.get_logger(__name__)

RETRY_S = 30.0
LOUD_CHUNKS = 50  # a stretch of at least this many chunks ends with an info line (fewer: debug)


class LineJob:
    """The line-vector backlog as :class:`IdleSteps` fills it: reported only after a step that went
    through; any error is a failed step (line vectors are an extra, never worth the worker)."""

    name = "lines"
    failures: tuple[type[Exception], ...] = (Exception,)
    always_report = False

    def __init__(self, index: WritableIndex, task_waiting: Callable[[], bool]) -> None:
        self.index = index
        self._task_waiting = task_waiting
        self._chunks = self._lines = 0

    def retry_s(self) -> float:
        return RETRY_S

    def describe(self, exc: Exception) -> str:
        return str(exc) if isinstance(exc, MemorydError) else f"{type(exc).__name__}: {exc}"

    def begin(self, steps: IdleSteps) -> None:
        """After a save a few chunks, after a cold start all of them; the first progress line waits."""
        assert steps.since is not None
        steps.next_progress = steps.since + PROGRESS_EVERY_S
        log.debug("lines.backlog")

    def fill(self, steps: IdleSteps) -> None:
        done = self.index.fill_line_vectors(should_yield=self._task_waiting)
        self._chunks += done.chunks
        self._lines += done.embedded

    def report(self, steps: IdleSteps) -> None:
        now = time.monotonic()
        if not self.index.lines_pending() and steps.since is not None:
            done = log.info if self._chunks >= LOUD_CHUNKS else log.debug  # a save's few lines are not news
            done("lines.done", chunks=self._chunks, lines_embedded=self._lines, seconds=round(now - steps.since, 1))
            steps.end_stretch()
            self._chunks, self._lines = 0, 0
        elif steps.progress_due(now):
            log.info("lines.progress", chunks=self._chunks, lines_embedded=self._lines, pending=self._count())

    def _count(self) -> int | None:
        """The chunks left, for a log line; None when they cannot be counted now (a database away)."""
        fill = self.index.line_fill
        try:
            return fill.count() if fill is not None else 0
        except Exception as exc:  # a log figure must never end the worker
            log.debug("lines.count_failed", error=str(exc))
            return None


def line_steps(index: WritableIndex, task_waiting: Callable[[], bool]) -> IdleSteps:
    """The line-vector backlog's stepping, for :class:`~memoryd.daemon.work.worker.IndexWorker`."""
    return IdleSteps(LineJob(index, task_waiting))
