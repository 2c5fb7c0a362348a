"""The worker's idle-time stepping through a backlog, one class for every backlog it fills.

When its queue is empty the index worker gives a backlog one bounded step: the chunks still
without a vector (:mod:`memoryd.daemon.work.vector_steps`), then the chunks without their lines'
vectors (:mod:`memoryd.daemon.work.line_steps`). What a step does, what counts as its failure and
how its stretch is reported is the backlog's (:class:`IdleJob`); the rest is shared here:

- a *stretch* runs from the first step that finds work to the report that finds none;
- a task arriving mid-step ends it (:class:`~memoryd.daemon.work.polite.SliceAbandoned`,
  logged ``<name>.yielded``);
- a failed step is logged ``<name>.failed`` and pauses the backlog for the job's ``retry_s()``,
  or until a task goes through (:meth:`IdleSteps.retry_now`);
- progress lines are spaced ``PROGRESS_EVERY_S`` apart (:meth:`IdleSteps.progress_due`).

It runs only on the worker thread and owns no thread of its own.
"""

from __future__ import annotations

import time
from typing import Protocol

import structlog

from memoryd.daemon.work.pause import RetryPause
from memoryd.daemon.work.polite import SliceAbandoned

log = structlog.get_logger(__name__)

PROGRESS_EVERY_S = 10.0  # progress log interval while a stretch lasts


class IdleJob(Protocol):
    """One backlog as :class:`IdleSteps` fills it.

    ``name`` prefixes its log events; ``failures`` are the errors a failed step is (anything else
    ends the worker); ``always_report``: report after a yielded or failed step too, not only after
    one that went through.
    """

    name: str
    failures: tuple[type[Exception], ...]
    always_report: bool

    def retry_s(self) -> float:
        """The pause after a failed step (read at each failure)."""
        ...

    def begin(self, steps: IdleSteps) -> None:
        """A stretch begins (``steps.since`` is set)."""
        ...

    def fill(self, steps: IdleSteps) -> None:
        """One bounded step; raises ``SliceAbandoned`` when a task arrived, or one of ``failures``."""
        ...

    def report(self, steps: IdleSteps) -> None:
        """Progress, or the end of the stretch (:meth:`IdleSteps.end_stretch`)."""
        ...

    def describe(self, exc: Exception) -> str:
        """A failure in words, for the log and the worker's last error."""
        ...


class IdleSteps:
    """The stepping of one backlog, for :class:`~memoryd.daemon.work.worker.IndexWorker`."""

    def __init__(self, job: IdleJob) -> None:
        self.job = job
        self.since: float | None = None  # when the current stretch began
        self.next_progress = 0.0  # no progress line before this (monotonic seconds)
        self._pause = RetryPause()

    def retry_in(self) -> float:
        """Seconds before the next step may run (positive only after a failed step)."""
        return self._pause.remaining()

    def retry_now(self) -> None:
        """A task went through: a paused backlog may try again at once."""
        self._pause.clear()

    def progress_due(self, now: float) -> bool:
        """Whether a progress line is due at ``now``; the next one then waits ``PROGRESS_EVERY_S``."""
        if now < self.next_progress:
            return False
        self.next_progress = now + PROGRESS_EVERY_S
        return True

    def end_stretch(self) -> None:
        self.since, self.next_progress = None, 0.0

    def step(self) -> str | None:
        """One bounded step, then its report; the error of a failed one (the worker keeps it as its
        last error), else None."""
        job = self.job
        if self.since is None:
            self.since = time.monotonic()
            job.begin(self)
        error = None
        try:
            job.fill(self)
        except SliceAbandoned:
            log.debug(f"{job.name}.yielded", reason="a task arrived mid-slice")
            if not job.always_report:
                return None
        except job.failures as exc:
            error, retry = job.describe(exc), job.retry_s()
            log.error(f"{job.name}.failed", error=error, action=f"retrying in {retry:.0f} s")
            self._pause.start(retry)
            if not job.always_report:
                return error
        job.report(self)
        return error
