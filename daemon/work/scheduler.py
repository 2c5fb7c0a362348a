"""Periodic jobs (APScheduler): the safety-net sweep, snapshots, maintenance, health.

Jobs only *queue* work on the index worker (so they never race its writes),
except the watcher health check, which is cheap and thread-safe. While the
database backend is unreachable, the health job also queues a snapshot every
``HEALTH_CHECK_S``: it needs the database and nothing else, so the first one that
succeeds tells the worker it is back, and the worker reconciles what changed meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import structlog
from apscheduler.schedulers.background import BackgroundScheduler

from memoryd.daemon.work.ports import WritableIndex
from memoryd.daemon.work.worker import IndexWorker
from memoryd.indexer.config import ScheduleConfig

log = structlog.get_logger(__name__)
HEALTH_CHECK_S = 5


class Scheduler:
    """``check_watchers`` is the watcher health check (the watchers change on a config reload)."""

    def __init__(self, worker: IndexWorker, index: WritableIndex, s: ScheduleConfig,
                 check_watchers: Callable[[], None]) -> None:
        self._worker = worker
        self._index = index
        self._check_watchers = check_watchers
        self._probe: Future[Any] | None = None
        logging.getLogger("apscheduler").setLevel(logging.WARNING)
        self._sched = BackgroundScheduler(daemon=True, job_defaults={"coalesce": True, "max_instances": 1})
        self._sched.add_job(self._sweep, "interval", seconds=s.reconcile_interval_s, id="reconcile")
        self._sched.add_job(self._snapshot, "interval", seconds=s.snapshot_interval_s, id="snapshot")
        self._sched.add_job(self._maintain, "interval", seconds=s.maintenance_interval_s, id="maintenance")
        self._sched.add_job(self._health, "interval", seconds=HEALTH_CHECK_S, id="health")

    def start(self) -> None:
        self._sched.start()

    def stop(self) -> None:
        if self._sched.running:
            self._sched.shutdown(wait=True)

    def _sweep(self) -> None:
        if not self._worker.reconciling:
            self._worker.request_reconcile("periodic sweep")

    def _snapshot(self) -> None:
        self._worker.call(self._index.save)

    def _maintain(self) -> None:
        self._worker.call(self._run_maintenance)

    def _run_maintenance(self) -> None:
        log.info("maintenance.done", **self._index.maintain())

    def _health(self) -> None:
        self._check_watchers()
        if self._worker.storage_down and (self._probe is None or self._probe.done()):
            self._probe = self._worker.call(self._index.save)
        if self._index.take_reconcile_wanted():  # a shared database re-indexed with our settings
            self._worker.request_reconcile("database re-indexed by another site")
