"""The health job: a shared database re-indexed with this daemon's settings is followed at once."""

from __future__ import annotations

from typing import Any

from memoryd.daemon.work.scheduler import Scheduler
from memoryd.indexer.config import ScheduleConfig


class FakeWorker:
    storage_down = False

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def request_reconcile(self, reason: str) -> None:
        self.reasons.append(reason)


class FakeIndex:
    def __init__(self, wanted: list[bool]) -> None:
        self.wanted = wanted

    def take_reconcile_wanted(self) -> bool:
        return self.wanted.pop(0) if self.wanted else False


def scheduler(worker: FakeWorker, index: FakeIndex) -> Scheduler:
    return Scheduler(worker, index, ScheduleConfig(), lambda: None)  # type: ignore[arg-type]


def test_health_reconciles_once_when_the_index_asks() -> None:
    worker = FakeWorker()
    s = scheduler(worker, FakeIndex([True, False]))
    s._health()
    s._health()
    assert worker.reasons == ["database re-indexed by another site"]


def test_health_asks_for_nothing_otherwise() -> None:
    worker: Any = FakeWorker()
    s = scheduler(worker, FakeIndex([]))
    s._health()
    assert worker.reasons == []
