"""The worker's idle-time job: stepping through the vector backlog of keyword-first indexing.

When the worker's queue is empty it gives the backlog one bounded step
(``WritableIndex.fill_vectors``, newest files first); the step yields between model
slices as soon as a task arrives, so saves and ``reindex`` requests never wait behind
the backlog. While a backlog lasts this logs ``vectors.progress`` every
``PROGRESS_EVERY_S`` and puts the same in the systemd status line; once it is empty,
one ``vectors.done`` line and a vector snapshot. A failed step (e.g. disk full) pauses
the backlog for ``RETRY_BACKLOG_S``, or until a task goes through.

A task that arrives mid-step ends the step at once: between slices, or during one
(the wait for the low-priority thread is given up, :class:`SliceAbandoned`; the
slice's vectors are kept for the next step). Slices are sized to take about
``SLICE_BUDGET_S`` at the backlog's measured rate (:func:`slice_size`; model batches
of 4 to 32 passages run at about the same speed, docs/scaling.md): small enough that
little is redone when a slice is cut short.

It runs only on the worker thread and owns no thread of its own.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from memoryd.daemon.work.pause import RetryPause
from memoryd.daemon.work.polite import SliceAbandoned
from memoryd.daemon.work.ports import WritableIndex
from memoryd.daemon.work.progress import backlog_line
from memoryd.indexer.errors import MemorydError

log = structlog.get_logger(__name__)

PROGRESS_EVERY_S = 10.0  # progress log interval while a vector backlog lasts
RETRY_BACKLOG_S = 30.0  # pause after a failed backlog step (e.g. disk full) before the next
SLICE_BUDGET_S = 0.5  # a backlog model slice should take about this long (what a save may wait behind it)
BACKLOG_SLICE = 4  # chunks per slice until the rate is measured (e5-small on 2 cores: ~0.5-1 s)
SLICE_MIN, SLICE_MAX = 2, 32  # chunks per slice: one-passage batches run slower; 32 is the bulk pipeline's
STEP_SLICES = 8  # slices per step: length-sorted together; a first step at the unmeasured size stays short


def slice_size(per_s: float | None) -> int:
    """Backlog chunks per model slice at ``per_s`` chunks a second (None: not measured yet)."""
    if not per_s:
        return BACKLOG_SLICE
    return max(SLICE_MIN, min(SLICE_MAX, int(per_s * SLICE_BUDGET_S)))


class VectorSteps:
    """The backlog stepping and its progress reports, for :class:`~memoryd.daemon.work.worker.IndexWorker`."""

    def __init__(self, index: WritableIndex, on_status: Callable[[str], object], idle_status: Callable[[], str],
                 task_waiting: Callable[[], bool]) -> None:
        self.index = index
        self._on_status = on_status
        self._idle_status = idle_status  # the status line once the backlog is done
        self._task_waiting = task_waiting  # True: the step yields at the next slice
        self._since: float | None = None  # when the current backlog stretch began
        self._base = 0  # the backlog meter's total when the current stretch began
        self._next_progress = 0.0
        self._pause = RetryPause()

    def retry_in(self) -> float:
        """Seconds before the next step may run (positive only after a failed step)."""
        return self._pause.remaining()

    def retry_now(self) -> None:
        """A task went through: the backlog may try again at once."""
        self._pause.clear()

    def step(self) -> str | None:
        """Give the next most urgent backlog chunks their vectors, then report progress.

        Returns the error of a failed step (the worker keeps it as its last error), else None.
        """
        if self._since is None:
            self._since, self._base = time.monotonic(), self.index.backlog.meter.total
            log.info("vectors.backlog", pending=len(self.index.backlog))
        error = None
        size = slice_size(self.index.backlog.meter.per_s())
        self.index.set_backlog_slice(size)
        try:
            self.index.fill_vectors(limit=size * STEP_SLICES, should_yield=self._between_slices)
        except SliceAbandoned:
            log.debug("vectors.yielded", reason="a task arrived mid-slice")  # its chunks went back
        except MemorydError as exc:
            log.error("vectors.failed", error=str(exc), action=f"retrying in {RETRY_BACKLOG_S:.0f} s")
            error = str(exc)
            self._pause.start(RETRY_BACKLOG_S)
        self.report()
        return error

    def _between_slices(self) -> bool:
        """Asked between a step's model slices: report progress; True (yield) when a task waits."""
        self.report()
        return self._task_waiting()

    def report(self) -> None:
        """``vectors.progress`` every ``PROGRESS_EVERY_S`` (and the systemd status line); one line at the end."""
        now = time.monotonic()
        progress = self.index.backlog.progress()
        done = self.index.backlog.meter.total - self._base
        if progress["pending"] == 0 and self._since is not None:
            log.info("vectors.done", chunks=done, seconds=round(now - self._since, 1))
            self._since, self._next_progress = None, 0.0
            self.index.save()
            self._on_status(self._idle_status())
        elif progress["pending"] and now >= self._next_progress:
            self._next_progress = now + PROGRESS_EVERY_S
            log.info("vectors.progress", done=done, **progress)
            self._on_status(backlog_line(progress))
