"""Long writes under way (``import``, dry runs included) and how far each has got.

A long write runs in slices so that it never holds the index worker (a save
made meanwhile is indexed in its usual time); its request stays open until it
is done. :class:`Jobs` is where it reports progress, so ``status`` can show it
(``jobs``: kind, done, total, seconds running) and the CLI can draw a progress
bar and keep waiting as long as the count moves, instead of giving up after a
fixed wall.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Job:
    """One long write: ``done`` of ``total`` items (a thread-safe counter; only its owner advances it)."""

    id: int
    kind: str
    total: int
    dry_run: bool = False
    done: int = 0
    started: float = field(default_factory=time.monotonic)

    def advance_to(self, done: int) -> None:
        self.done = done

    def state(self) -> JobState:
        """How far it has got, now."""
        return JobState(self.id, self.kind, self.dry_run, self.done, self.total,
                        round(time.monotonic() - self.started, 1))


@dataclass(frozen=True)
class JobState:
    """One long write as ``status`` shows it (``jobs``): its kind, ``done`` of ``total``, seconds running."""

    id: int
    kind: str
    dry_run: bool
    done: int
    total: int
    running_s: float

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "dry_run": self.dry_run, "done": self.done, "total": self.total,
                "running_s": self.running_s}


class Jobs:
    """The long writes running now (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[int, Job] = {}
        self._ids = itertools.count(1)

    @contextmanager
    def run(self, kind: str, total: int, dry_run: bool = False) -> Iterator[Job]:
        """Register a job for the ``with`` block; it is gone from ``status`` when the block ends."""
        with self._lock:
            job = Job(next(self._ids), kind, total, dry_run)
            self._running[job.id] = job
        try:
            yield job
        finally:
            with self._lock:
                self._running.pop(job.id, None)

    def snapshot(self) -> tuple[JobState, ...]:
        with self._lock:
            return tuple(j.state() for j in self._running.values())
