"""The index worker's tasks and how a task ends without running: no dependencies.

A socket handler waits on a task's future (:func:`memoryd.daemon.api.ports.worker_result`)
and needs to tell "not run" and "stopped part-way" from a failure, without importing the
worker itself (which pulls the index, numpy and FAISS into every handler and its tests).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from memoryd.daemon.watch.debouncer import Change

TaskKind = Literal["changes", "reconcile", "index", "call", "stop"]

NOT_RUN = "this request was not run (nothing was changed)"


@dataclass
class Task:
    """One unit of the worker's queue: file changes (nobody waits), a reconcile sweep, an
    ``index`` of given files, a ``call`` of any function on the writing thread, or the stop sentinel."""

    kind: TaskKind
    changes: list[Change] = field(default_factory=list)
    files: list[tuple[Path, str]] = field(default_factory=list)
    reason: str = ""
    fn: Callable[[], Any] | None = None
    future: Future[Any] = field(default_factory=Future)  # its answer, for whoever waits


class TaskStopped(Exception):
    """A task the shutdown stopped part-way (a reconcile sweep); the message says what happens next."""
