"""The index worker's tasks, how a task ends without running, and where its sweep is: no dependencies.

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
ReconcilePhase = Literal["idle", "queued", "listing", "indexing"]

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


@dataclass(frozen=True)
class ReconcileState:
    """Where the reconcile sweep is, for ``status`` (``reconcile``): ``idle``, ``queued``, ``listing``
    (walking the roots) or ``indexing`` (``files_done`` of ``files_total`` changed files read and
    committed: each is keyword-searchable from then on)."""

    state: ReconcilePhase
    files_done: int
    files_total: int

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "files_done": self.files_done, "files_total": self.files_total}
