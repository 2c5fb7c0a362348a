"""Background rebuilds of the vector structure: the flat -> HNSW switch and tombstone compaction.

An HNSW build takes ~0.2 ms per vector on 2 cores (13-21 s at 100k, minutes at
1M). Run inside a write it would hold the index lock all that time, stalling
every search and update. Here the index worker, after each task, asks the
index whether a rebuild is due and, if so, plans it (a snapshot, under the
lock, ~1 ms); this module's thread builds it at low CPU priority without any
lock while searches use the old structure; the swap — which copies over the
writes made meanwhile — is queued back on the worker, so every change to the
index still happens on that one thread.
"""

from __future__ import annotations

import functools
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from memoryd.daemon.work.polite import lower_priority
from memoryd.daemon.work.ports import WritableIndex
from memoryd.indexer.errors import MemorydError
from memoryd.indexer.storage.base import RebuildJob as Rebuild

log = structlog.get_logger(__name__)

_STOP = object()
RETRY_AFTER_S = 600.0  # after a failed build (e.g. out of memory), the old structure serves this long


class Rebuilder:
    """Owns the rebuild thread. ``poll`` and the swap run on the index worker's thread.

    ``submit(fn)`` queues ``fn`` on the worker (``IndexWorker.call``). ``on_batch(n)`` runs on
    the rebuild thread after each batch of ``n`` vectors copied (tests hold a build there).
    """

    def __init__(self, index: WritableIndex, submit: Callable[[Callable[[], Any]], object], nice: int) -> None:
        self.index = index
        self._submit = submit
        self._nice = nice
        self.on_batch: Callable[[int], None] | None = None
        self._jobs: queue.Queue[Any] = queue.Queue()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._job: Rebuild | None = None  # planned and not yet adopted or cancelled
        self._retry_at = 0.0
        self.completed = 0

    @property
    def busy(self) -> bool:
        return self._job is not None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="memoryd-rebuild", daemon=True)
        self._thread.start()

    def request_stop(self) -> None:
        """Ask the build to stop at its next batch boundary (~1 s); returns at once."""
        if not self._stopping.is_set():
            self._stopping.set()
            self._jobs.put(_STOP)

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop the thread and forget a rebuild never swapped in; True if the thread ended in time."""
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return False  # still inside a batch; a daemon thread, it must not block the exit
        job, self._job = self._job, None
        if job is not None:
            self.index.cancel_rebuild(job)
        return True

    def poll(self) -> bool:
        """On the worker thread: plan the rebuild the index wants, if any and none runs; True if started."""
        if self._job is not None or self._stopping.is_set() or time.monotonic() < self._retry_at:
            return False
        if not self.index.rebuild_wanted():
            return False
        job = self.index.start_rebuild()
        if job is None:
            return False
        self._job = job
        log.info("rebuild.started", kind=job.kind, reason=job.reason, vectors=self.index.vectors.size)
        self._jobs.put(job)
        return True

    def _run(self) -> None:
        lower_priority(self._nice, "rebuild")
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            try:
                built = job.build(should_stop=self._stopping.is_set, on_batch=self.on_batch)
            except Exception:  # e.g. out of memory: the old structure keeps serving; retried later
                log.exception("rebuild.failed", kind=job.kind, retry_in_s=RETRY_AFTER_S)
                self._retry_at = time.monotonic() + RETRY_AFTER_S
                built = False
            if built:
                self._submit(functools.partial(self._adopt, job))
            else:
                self._forget(job)

    def _adopt(self, job: Rebuild) -> bool:
        """On the worker thread: swap the built structure in (a stale job is ignored)."""
        try:
            done = self.index.finish_rebuild(job)
        finally:
            self._forget(job)
        self.completed += int(done)
        return done

    def _forget(self, job: Rebuild) -> None:
        if self._job is job:
            self._job = None
        try:
            self.index.cancel_rebuild(job)  # a no-op once adopted
        except MemorydError as exc:  # the index is closing
            log.warning("rebuild.cancel_failed", error=str(exc))
