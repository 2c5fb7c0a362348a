"""The index worker: the one thread that writes to the index.

Everything that changes the index — debounced file changes, reconcile sweeps,
``reindex`` requests, snapshots and maintenance — arrives here as a task on
one queue and runs in order, so writes never race each other. Searches do not
go through this thread: they run on the server's threads against the index's
read side, and only wait for the short commit lock, never for embedding.

Every task comes with a ``concurrent.futures.Future``: its
result (the index stats, or what a ``call`` returned) or its error. At shutdown
(:meth:`IndexWorker.stop`) the worker finishes what it can within its time;
every task still queued after that, or submitted once it stopped, is
*cancelled*: never run, its future cancelled, and the API's ``worker_result`` turns
that (or a sweep stopped half-way, :class:`TaskStopped`) into a -32003
"shutting down" reply for the socket request that waits on it (a queued
``remember`` writes nothing; a cancelled reconcile resumes at the next start).

A failing task is logged and dropped; the periodic reconcile sweep repairs
whatever it left behind (disk full included: nothing is marked indexed until
it is committed).

Keyword first: a reconcile sweep or a batch of changes is embedded before it is
committed only when its new chunks fit a small time budget (:meth:`IndexWorker.defer_at`:
``SYNC_BUDGET_S`` at the measured speed of the synchronous path, never fewer than
``HANDFUL`` chunks — an editor save of a few chunks is searchable with its vectors at
once, as before). Anything larger is committed file by file without the missing
vectors, so every file is keyword-searchable within moments of being read, however
small the folder; whenever its queue is empty the worker then gives the vector backlog
a bounded step (:mod:`memoryd.daemon.work.vector_steps`), which gives way as soon as a
task arrives, mid-slice included (:class:`~memoryd.daemon.work.polite.SliceAbandoned`):
saves and ``reindex`` requests never wait behind the backlog, and a saved file's
pending chunks go to the head of the backlog. While a
sweep runs, :meth:`IndexWorker.reconcile_status` says how far it is (``status``).

The worker also owns two helper threads, both at ``embedding.background_nice``
lower CPU priority: bulk passage embedding (:mod:`memoryd.daemon.work.polite`) and vector
structure rebuilds (:mod:`memoryd.daemon.work.rebuilder`; polled after every task, swapped
in on this thread).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import structlog

from memoryd.daemon.roots import RootMap
from memoryd.daemon.watch.debouncer import Change
from memoryd.daemon.work.line_steps import line_steps
from memoryd.daemon.work.polite import PoliteEmbedder
from memoryd.daemon.work.ports import Sweep, WritableIndex
from memoryd.daemon.work.rebuilder import Rebuilder
from memoryd.daemon.work.tasks import NOT_RUN, ReconcileState, Task, TaskStopped
from memoryd.daemon.work.vector_steps import vector_steps
from memoryd.indexer.errors import DiskFullError, MemorydError
from memoryd.indexer.ingestion.indexstats import IndexStats
from memoryd.indexer.storage.base import StorageUnavailableError

__all__ = ["HANDFUL", "NOT_RUN", "IndexWorker", "Task", "TaskStopped"]

log = structlog.get_logger(__name__)

Accept = Callable[[str], bool]
MAX_COALESCED = 2048  # changes applied as one batch at most
SYNC_BUDGET_S = 0.3  # a batch whose new vectors take longer than this is committed keyword first
HANDFUL = 4  # ...but a batch needing fewer new vectors is always embedded first (an editor save)
STATUS_EVERY_S = 1.0  # the systemd status line follows a sweep's progress at most this often


T = TypeVar("T")


_STOP = Task("stop")


class ReconcileCancelled(Exception):
    """Raised inside a sweep when the daemon is shutting down (committed files stay committed)."""


class IndexWorker:
    """Owns the write side of the index on one thread: ``index`` as :class:`WritableIndex` sees it,
    and ``sweep``, the reconcile bound to it (:func:`memoryd.daemon.oneshot.sweep_of`)."""

    def __init__(
        self, index: WritableIndex, roots: RootMap, accept: Accept, accept_dir: Accept, *, sweep: Sweep,
        on_status: Callable[[str], object] = lambda text: None,
        should_stop: Callable[[], bool] = lambda: False, model_ready: Callable[[], bool] = lambda: True,
    ) -> None:
        self.index = index
        self._model_ready = model_ready  # False while the model builds (daemon/model_build.py): no backlog step
        self._sweep = sweep
        self.roots = roots
        self._accept = accept
        self._accept_dir = accept_dir
        self._on_status = on_status
        self._should_stop = should_stop
        self._queue: queue.Queue[Task] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._queued_files = 0
        self._count_lock = threading.Lock()  # also guards _closed
        self._closed = False  # stopped: new tasks are cancelled at once
        self.reconciling = False  # a sweep is queued or running
        self.sweeping = False  # a sweep is running (its progress is reconcile_progress)
        self.reconcile_progress: tuple[int, int] = (0, 0)  # files done / to index in the running (or last) sweep
        self.last_reconcile: float | None = None
        self.last_error: str | None = None
        self._disk_full = False
        self._storage_down = False  # the database backend was unreachable at the last task
        nice = index.cfg.embedding.background_nice
        self.embedder = PoliteEmbedder(index.embedder, nice, small=index.cfg.embedding.batch_size)
        self.rebuilder = Rebuilder(index, self.call, nice)
        self.vector_steps = vector_steps(index, on_status, self._idle_status, self._task_waiting)
        self.line_steps = line_steps(index, self._task_waiting)

    # -- feeding ----------------------------------------------------------------

    def submit_changes(self, changes: list[Change]) -> None:
        """Debouncer callback: a batch of ready changes (nobody waits for them)."""
        self._put(Task("changes", changes=list(changes)), len(changes))

    def request_reconcile(self, reason: str) -> Future[dict[str, Any]]:
        """Queue a sweep of every root; its future answers the stats."""
        self.reconciling = True  # visible at once: status must not look idle before the sweep starts
        return self._put(Task("reconcile", reason=reason), 0)

    def index_now(self, files: list[tuple[Path, str]]) -> Future[dict[str, Any]]:
        """Queue these ``(root, rel)`` files for indexing; the future answers the stats."""
        return self._put(Task("index", files=files), len(files))

    def call(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn`` on the worker thread (snapshots, maintenance, writes); the future answers its result.

        Cancelling the future before the task starts means it never runs.
        """
        return self._put(Task("call", fn=fn), 0)

    def _put(self, task: Task, files: int) -> Future[Any]:
        with self._count_lock:
            if self._closed:
                task.future.cancel()
                return task.future
            self._queued_files += files
            self._queue.put(task)
        return task.future

    def set_roots(self, roots: RootMap) -> None:
        """New roots (config reload); takes effect from the next task."""
        self.roots = roots

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def storage_down(self) -> bool:
        """The database backend failed the last task: the scheduler probes it until it is back."""
        return self._storage_down

    @property
    def pending(self) -> int:
        """Files (or changes) queued and not yet indexed."""
        return self._queued_files

    def reconcile_status(self) -> ReconcileState:
        """Where the sweep is, for ``status`` (:class:`~memoryd.daemon.work.tasks.ReconcileState`)."""
        done, total = self.reconcile_progress
        if self.sweeping:
            return ReconcileState("indexing" if total else "listing", done, total)
        if self.reconciling:
            return ReconcileState("queued", 0, 0)
        return ReconcileState("idle", done, total)

    def defer_at(self) -> int:
        """New vectors from which a batch is committed keyword first: what the synchronous path embeds
        in ``SYNC_BUDGET_S`` at its measured speed, between ``HANDFUL`` and one model batch."""
        rate = self.embedder.passages_per_s()
        fits = int(rate * SYNC_BUDGET_S) if rate else 0
        return max(HANDFUL, min(self.embedder.small, fits))

    # -- lifecycle --------------------------------------------------------------

    def start(self) -> None:
        """Start the worker and its helpers; from now on the index rebuilds in the background."""
        self.index.set_passage_embedder(self.embedder)
        self.index.set_backlog_embedder(self.embedder.background(interrupt=self._task_waiting))
        self.index.set_background_rebuilds(True)
        self.embedder.start()
        self.rebuilder.start()
        self._thread = threading.Thread(target=self._run, name="memoryd-index-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 8.0) -> bool:
        """Finish the task in hand (and what is queued before the sentinel); True if it stopped.

        A rebuild still building is abandoned (the old structure is complete; it starts over next run).
        """
        if self._thread is None:
            self._close()
            return True
        deadline = time.monotonic() + timeout
        self.rebuilder.request_stop()  # first: a long build must not hold up shutdown
        self._queue.put(_STOP)
        self._thread.join(timeout)
        stopped = not self._thread.is_alive()
        self._close()
        if not stopped:
            self._queue.put(_STOP)  # _close took the first one: end after the task in hand
        self.rebuilder.stop(timeout=max(0.1, deadline - time.monotonic()))
        self.embedder.stop(timeout=max(0.1, deadline - time.monotonic()))
        return stopped

    def _close(self) -> None:
        """Refuse new tasks and cancel every queued one (their waiters get "shutting down")."""
        with self._count_lock:
            self._closed = True
            self._queued_files = 0
        while True:
            try:
                task = self._queue.get_nowait()
            except queue.Empty:
                return
            if task is not _STOP:
                task.future.cancel()

    def _run(self) -> None:
        while True:
            task = self._next_task()
            if task is None:
                self._backlog_step()
                continue
            if task is _STOP:
                return
            self._coalesce(task)
            self._run_task(task)
            self._poll_rebuild()

    def _next_task(self) -> Task | None:
        """The next queued task; None when the queue is empty and the vector backlog (or, after it,
        the line vectors) wants a step."""
        if self._should_stop() or not self._model_ready():  # the model's arrival queues a task: it wakes us
            return self._queue.get()
        if self.index.backlog:
            wait = self.vector_steps.retry_in()
        elif self.index.lines_pending():
            wait = self.line_steps.retry_in()
        else:
            return self._queue.get()
        try:
            return self._queue.get(timeout=wait) if wait > 0 else self._queue.get_nowait()
        except queue.Empty:
            return None

    def _backlog_step(self) -> None:
        """One vector backlog step, or line-vector step once no vector is pending (either yields to any
        task that arrives), then the rebuild poll."""
        error = self.vector_steps.step() if self.index.backlog else self.line_steps.step()
        if error is not None:
            self.last_error = error
        self._poll_rebuild()

    def _task_waiting(self) -> bool:
        """A task (or the stop) waits: a vector backlog step gives way, even mid-slice."""
        return not self._queue.empty() or self._should_stop()

    def _idle_status(self) -> str:
        return f"watching {len(self.roots.roots)} roots"

    def _run_task(self, task: Task) -> None:
        n = len(task.changes) + len(task.files)
        future = task.future
        try:
            if not future.set_running_or_notify_cancel():
                return  # its waiter gave up before it started
            result = self._execute(task)
            if self._disk_full:
                log.info("disk.recovered")
                self._disk_full = False
            self.vector_steps.retry_now()  # a task went through: the backlog may try again at once
            self.line_steps.retry_now()
            future.set_result(result)
            if self._storage_down:  # files changed meanwhile are only on disk: catch up with them
                log.info("storage.recovered", action="reconciling the roots")
                self._storage_down = False
                self.request_reconcile("storage back")
        except ReconcileCancelled as exc:
            log.info("reconcile.cancelled", detail=str(exc))
            _fail(future, TaskStopped(f"the re-index was stopped ({exc}); it resumes at the next start"))
        except StorageUnavailableError as exc:
            if not self._storage_down:
                log.error("storage.unavailable", error=str(exc),
                          action="files stay the source of truth; they are reconciled when the database is back")
            self._storage_down = True
            self.last_error = str(exc)
            _fail(future, exc)
        except DiskFullError as exc:
            if not self._disk_full:
                log.error("disk.full", error=str(exc), action="serving reads; retrying at the next sweep")
            self._disk_full = True
            _fail(future, exc)
        except MemorydError as exc:
            log.error("task.failed", kind=task.kind, error=str(exc))
            self.last_error = str(exc)
            _fail(future, exc)
        except Exception as exc:  # the worker must survive anything a file can throw at it
            log.exception("task.crashed", kind=task.kind)
            self.last_error = str(exc)
            _fail(future, MemorydError(f"internal error: {exc}"))
        finally:
            with self._count_lock:
                self._queued_files = max(0, self._queued_files - n)
            if task.kind == "reconcile":
                self.reconciling = self._another_reconcile_queued()

    def _poll_rebuild(self) -> None:
        try:
            self.rebuilder.poll()
        except MemorydError as exc:  # e.g. the snapshot's read connection could not open: next task retries
            log.warning("rebuild.not_started", error=str(exc))

    def _coalesce(self, task: Task) -> None:
        """Fold change batches queued right behind this one into it: a burst is embedded in full batches."""
        if task.kind != "changes":
            return
        with self._queue.mutex:
            queued = self._queue.queue
            while queued and queued[0].kind == "changes" and len(task.changes) < MAX_COALESCED:
                task.changes += queued.popleft().changes

    def _another_reconcile_queued(self) -> bool:
        with self._queue.mutex:
            return any(t.kind == "reconcile" for t in self._queue.queue)

    # -- tasks ------------------------------------------------------------------

    def _execute(self, task: Task) -> Any:
        if task.kind == "changes":
            return self._logged(self._apply_changes(task.changes), "changes")
        if task.kind == "index":
            stats = self.index.index_files(task.files)
            # path -> reason for the files named: the reindex reply says why each was not indexed
            return {**self._logged(_stats_dict(stats), "reindex"), "skipped_files": dict(stats.skipped)}
        if task.kind == "reconcile":
            return self._reconcile(task.reason)
        if task.kind == "call" and task.fn is not None:
            return task.fn()
        return None

    def _reconcile(self, reason: str) -> dict[str, Any]:
        self.reconciling = True
        self.reconcile_progress = (0, 0)
        self.sweeping = True
        self._on_status(f"reconciling ({reason})")
        log.info("reconcile.start", reason=reason, roots=[str(r) for r in self.roots.roots])
        shown = 0.0

        def progress(done: int, total: int, stats: IndexStats) -> None:
            nonlocal shown
            if self._should_stop():
                raise ReconcileCancelled(f"stopped after {done}/{total} files")
            self.reconcile_progress = (done, total)
            if done == total or time.monotonic() - shown >= STATUS_EVERY_S:
                shown = time.monotonic()
                self._on_status(f"reconciling: {done}/{total} files")

        try:
            stats = self._sweep(self.roots.roots, self._accept, self._accept_dir, progress=progress,
                                defer_at=self.defer_at())
        finally:
            self.sweeping = False
        self.last_reconcile = time.time()
        self._on_status(self._idle_status())
        return _stats_dict(stats)

    def _apply_changes(self, changes: Sequence[Change]) -> dict[str, Any]:
        """Apply changes in order; consecutive upserts are indexed as one batch."""
        total = IndexStats()
        upserts: list[tuple[Path, str]] = []
        for ch in changes:
            if ch.kind == "upsert":
                loc = self.roots.locate(ch.path)
                if loc and self._accept(loc[1]):
                    upserts.append(loc)
                continue
            if upserts:
                self._index_saved(upserts, total)
                upserts = []
            self._apply_one(ch, total)
        if upserts:
            self._index_saved(upserts, total)
        return _stats_dict(total)

    def _index_saved(self, files: list[tuple[Path, str]], total: IndexStats) -> None:
        """Index changed files; chunks of theirs still without a vector go to the head of the backlog."""
        total.merge(self.index.index_files(files, defer_at=self.defer_at()))
        self.index.promote_backlog(files)

    def _logged(self, result: dict[str, Any], source: str) -> dict[str, Any]:
        """One info line per batch that changed the index (files, chunks, ms)."""
        if result["files"] or result["removed"] or result["chunks_removed"]:
            log.info("index.batch", source=source, files=result["files"], removed=result["removed"],
                     chunks_added=result["chunks_added"], chunks_removed=result["chunks_removed"],
                     embedded=result["embedded"], vectors_pending=len(self.index.backlog),
                     ms=round(result["seconds"] * 1000))
        return result

    def _apply_one(self, ch: Change, total: IndexStats) -> None:
        loc = self.roots.locate(ch.path)
        if ch.kind == "delete" and loc:
            total.chunks_removed += self.index.remove_file(*loc)
        elif ch.kind == "move" and ch.dest is not None:
            dest = self.roots.locate(ch.dest)
            moved = bool(loc and dest and self.index.move_file(loc[0], loc[1], dest[0], dest[1]))
            if loc and not dest:
                total.chunks_removed += self.index.remove_file(*loc)
            if dest and self._accept(dest[1]):
                total.merge(self.index.index_files([dest]))  # unchanged content: a hash check, no embedding
            log.info("file.moved", src=str(ch.path), dest=str(ch.dest), kept_chunks=moved)
        elif ch.kind == "rescan":
            total.merge(self._sweep(self.roots.roots, self._accept, self._accept_dir, defer_at=self.defer_at()))


def _fail(future: Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


def _stats_dict(stats: IndexStats) -> dict[str, Any]:
    return {
        "files": stats.files_indexed, "unchanged": stats.files_unchanged, "removed": stats.files_removed,
        "skipped": stats.files_skipped, "chunks_added": stats.chunks_added, "chunks_removed": stats.chunks_removed,
        "embedded": stats.embedded, "cache_hits": stats.cache_hits, "seconds": round(stats.seconds, 3),
    }
