"""Periodic jobs (APScheduler): the safety-net sweep, snapshots, maintenance, health.

Jobs only *queue* work on the index worker (so they never race its writes),
except the watcher health check, which is cheap and thread-safe.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import structlog
from apscheduler.schedulers.background import BackgroundScheduler

if TYPE_CHECKING:
    from memoryd.daemon.app import Daemon

log = structlog.get_logger(__name__)
HEALTH_CHECK_S = 5


class Scheduler:
    def __init__(self, d: Daemon) -> None:
        self._d = d
        logging.getLogger("apscheduler").setLevel(logging.WARNING)
        self._sched = BackgroundScheduler(daemon=True, job_defaults={"coalesce": True, "max_instances": 1})
        s = d.cfg.schedule
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
        if not self._d.worker.reconciling:
            self._d.worker.request_reconcile("periodic sweep")

    def _snapshot(self) -> None:
        self._d.worker.call(self._d.index.save)

    def _maintain(self) -> None:
        def maintain() -> None:
            index = self._d.index
            evicted = index.evict_cache()
            # A background rebuild reads a snapshot in one long read transaction: TRUNCATE would
            # wait for it (up to the busy timeout, on the worker); PASSIVE copies what it can.
            mode = "PASSIVE" if index.vectors.rebuilding else "TRUNCATE"
            index.store.conn.execute(f"PRAGMA wal_checkpoint({mode})")
            index.store.conn.execute("PRAGMA optimize")
            log.info("maintenance.done", cache_evicted=evicted, checkpoint=mode.lower())

        self._d.worker.call(maintain)

    def _health(self) -> None:
        if self._d.watcher is not None:
            self._d.watcher.check()
