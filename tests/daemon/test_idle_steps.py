"""One idle-step class for every backlog the worker fills (daemon/work/idle_steps.py, issue #39 item 6).

The vector backlog and the line vectors differ only in their job (what a step fills, what a
failure is, when to report); stretches, yielding, the pause after a failure and the spacing of
progress lines are :class:`IdleSteps`'s, checked here with a fake job.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memoryd.daemon.work import line_steps, vector_steps
from memoryd.daemon.work.idle_steps import PROGRESS_EVERY_S, IdleSteps
from memoryd.daemon.work.polite import SliceAbandoned
from memoryd.indexer.errors import MemorydError


@dataclass
class Job:
    """Fills by raising what it is told to; records what IdleSteps asked of it."""

    always_report: bool = True
    name: str = "fake"
    failures: tuple[type[Exception], ...] = (MemorydError,)
    raise_next: BaseException | None = None
    calls: list[str] = field(default_factory=list)

    def retry_s(self) -> float:
        return 3600.0

    def describe(self, exc: Exception) -> str:
        return f"described: {exc}"

    def begin(self, steps: IdleSteps) -> None:
        self.calls.append("begin")

    def fill(self, steps: IdleSteps) -> None:
        self.calls.append("fill")
        if self.raise_next is not None:
            exc, self.raise_next = self.raise_next, None
            raise exc

    def report(self, steps: IdleSteps) -> None:
        self.calls.append("report")


def test_a_stretch_begins_once_and_each_step_reports() -> None:
    job = Job()
    steps = IdleSteps(job)
    assert steps.step() is None and steps.step() is None
    assert job.calls == ["begin", "fill", "report", "fill", "report"]
    steps.end_stretch()
    steps.step()
    assert job.calls[-3:] == ["begin", "fill", "report"]


def test_a_failed_step_pauses_until_a_task_goes_through() -> None:
    job = Job(raise_next=MemorydError("disk full"))
    steps = IdleSteps(job)
    assert steps.step() == "described: disk full"
    assert steps.retry_in() > 3000  # the job's retry_s
    steps.retry_now()
    assert steps.retry_in() <= 0  # zero or negative: the next step may run


def test_a_job_that_reports_only_after_success_skips_it_on_yield_and_failure() -> None:
    job = Job(always_report=False, raise_next=SliceAbandoned())
    steps = IdleSteps(job)
    assert steps.step() is None
    job.raise_next = MemorydError("down")
    assert steps.step() == "described: down"
    assert "report" not in job.calls
    steps.retry_now()
    steps.step()
    assert job.calls[-1] == "report"


def test_progress_lines_are_spaced() -> None:
    steps = IdleSteps(Job())
    assert steps.progress_due(100.0)
    assert not steps.progress_due(100.0 + PROGRESS_EVERY_S - 0.1)
    assert steps.progress_due(100.0 + PROGRESS_EVERY_S)


def test_both_backlogs_are_idle_steps_with_their_own_failures() -> None:
    """The vectors stop only at memoryd's errors (anything else is a bug the worker reports); the
    line vectors, an extra, treat every error as a failed step."""
    assert vector_steps.VectorJob.failures == (MemorydError,) and vector_steps.VectorJob.always_report
    assert line_steps.LineJob.failures == (Exception,) and not line_steps.LineJob.always_report
