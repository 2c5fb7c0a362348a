"""The restartable PostgreSQL fixture stops the server a test restarted, and signals no stale process.

A fresh clone's ``make test`` once failed at the teardown of
``test_pg_backend.py::test_database_down_fails_fast_then_resumes_without_a_full_reindex``: pgserver's own
cleanup, refused by ``pg_ctl stop`` (the fixture had stopped the restarted server already), sent SIGTERM
to the postmaster pgserver had started before the restart, by its old pid; when init had reaped that
zombie in between, the kill raised ``ProcessLookupError``. The fixture now owns the server's life
(:class:`tests.pgfixture.RestartablePg`), so no signal goes by pid at all.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from tests.pgfixture import RestartablePg


def _postmaster(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().split()[0])


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for init (a stopped postmaster is reparented to init)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_teardown_after_a_restart_stops_the_new_server_and_signals_no_old_pid(monkeypatch: pytest.MonkeyPatch) -> None:
    pg = RestartablePg.open()
    try:
        first = _postmaster(pg.pgdata)
        pg.stop()
        pg.start()
        second = _postmaster(pg.pgdata)
        assert second != first and _alive(second) and not _alive(first)
    except BaseException:
        pg.close()
        raise
    signals: list[tuple[int, int]] = []
    real_kill = os.kill

    def recording_kill(pid: int, sig: int) -> None:
        if sig != 0:  # 0 only asks whether the pid exists
            signals.append((pid, sig))
        real_kill(pid, sig)

    monkeypatch.setattr(os, "kill", recording_kill)
    pg.close()
    assert signals == [], f"teardown signalled {signals} (first postmaster {first}, second {second})"
    assert not _alive(second), "the restarted server still runs after the teardown"
    assert not pg.pgdata.exists()
