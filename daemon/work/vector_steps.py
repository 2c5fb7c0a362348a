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

The stepping itself (stretches, pauses, yielding) is :class:`~memoryd.daemon.work.idle_steps.IdleSteps`;
this module is what is particular to the vector backlog (:class:`VectorJob`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import structlog

from memoryd.daemon.work.idle_steps import IdleSteps
from memoryd.daemon.work.ports import WritableIndex
from memoryd.daemon.work.progress import backlog_line
from memoryd.indexer.errors import MemorydError

log = structlog.get_logger(__name__)

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


class VectorJob:
    """The vector backlog as :class:`IdleSteps` fills it: model slices sized to the measured rate, progress
    between slices (and in the systemd status line), a vector snapshot once it is empty."""

    name = "vectors"
    failures: tuple[type[Exception], ...] = (MemorydError,)
    always_report = True

    def __init__(self, index: WritableIndex, on_status: Callable[[str], object], idle_status: Callable[[], str],
                 task_waiting: Callable[[], bool]) -> None:
        self.index = index
        self._on_status = on_status
        self._idle_status = idle_status  # the status line once the backlog is done
        self._task_waiting = task_waiting  # True: the step yields at the next slice
        self._base = 0  # the backlog meter's total when the current stretch began

    def retry_s(self) -> float:
        return RETRY_BACKLOG_S

    def describe(self, exc: Exception) -> str:
        return str(exc)

    def begin(self, steps: IdleSteps) -> None:
        self._base = self.index.backlog.meter.total
        log.info("vectors.backlog", pending=len(self.index.backlog))

    def fill(self, steps: IdleSteps) -> None:
        """Give the next most urgent backlog chunks their vectors, reporting between model slices."""
        size = slice_size(self.index.backlog.meter.per_s())
        self.index.set_backlog_slice(size)

        def between_slices() -> bool:  # report progress; True (yield) when a task waits
            self.report(steps)
            return self._task_waiting()

        self.index.fill_vectors(limit=size * STEP_SLICES, should_yield=between_slices)

    def report(self, steps: IdleSteps) -> None:
        """``vectors.progress`` every ``PROGRESS_EVERY_S`` (and the systemd status line); one line at the end."""
        now = time.monotonic()
        progress = self.index.backlog.progress()
        done = self.index.backlog.meter.total - self._base
        if progress["pending"] == 0 and steps.since is not None:
            log.info("vectors.done", chunks=done, seconds=round(now - steps.since, 1))
            steps.end_stretch()
            self.index.save()
            self._on_status(self._idle_status())
        elif progress["pending"] and steps.progress_due(now):
            log.info("vectors.progress", done=done, **progress)
            self._on_status(backlog_line(progress))


def vector_steps(index: WritableIndex, on_status: Callable[[str], object], idle_status: Callable[[], str],
                 task_waiting: Callable[[], bool]) -> IdleSteps:
    """The vector backlog's stepping, for :class:`~memoryd.daemon.work.worker.IndexWorker`."""
    return IdleSteps(VectorJob(index, on_status, idle_status, task_waiting))
