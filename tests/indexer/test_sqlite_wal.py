"""WAL switching while other processes open the same new file (a daemon and ``memoryd index``
started together): SQLite answers ``database is locked`` at once, without its busy timeout, so
:func:`enable_wal` retries."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import structlog
import structlog.testing

from memoryd.indexer.storage.embedded.sqlite_wal import enable_wal

ROUNDS = 30
OPENERS = 3


def _open(path: str, start: Any) -> None:
    start.wait(30)  # a barrier: every opener is imported and ready, then all go at once
    conn = sqlite3.connect(path, timeout=5, isolation_level=None)
    enable_wal(conn, 5.0)
    conn.executescript("CREATE TABLE IF NOT EXISTS t (x);")
    conn.close()


def test_processes_switching_one_new_file_at_once_all_succeed(tmp_path: Path) -> None:
    """Without the retry about one opener in ten failed here (measured: 63 of 600)."""
    ctx = multiprocessing.get_context("forkserver")  # not fork: other tests leave threads behind
    for round_ in range(ROUNDS):
        path = str(tmp_path / f"db{round_}.sqlite3")
        start = ctx.Barrier(OPENERS)
        procs = [ctx.Process(target=_open, args=(path, start)) for _ in range(OPENERS)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(30)
        assert [p.exitcode for p in procs] == [0] * OPENERS, f"round {round_}"
        assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


class _LockedConn:
    """Answers ``database is locked`` ``failures`` times, then 'wal' (or ``mode``)."""

    def __init__(self, failures: int, mode: str = "wal", message: str = "database is locked") -> None:
        self.failures, self.mode, self.message, self.calls = failures, mode, message, 0

    def execute(self, sql: str) -> Any:
        self.calls += 1
        if self.calls <= self.failures:
            raise sqlite3.OperationalError(self.message)
        return self

    def fetchone(self) -> tuple[str]:
        return (self.mode,)


def test_a_locked_switch_is_retried_until_it_succeeds() -> None:
    conn = _LockedConn(failures=3)
    enable_wal(conn, 5.0)  # type: ignore[arg-type]
    assert conn.calls == 4


def test_a_switch_locked_past_the_timeout_raises_the_lock_error() -> None:
    conn = _LockedConn(failures=10**9)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        enable_wal(conn, 0.05)  # type: ignore[arg-type]
    assert conn.calls >= 2


def test_other_errors_are_not_retried() -> None:
    conn = _LockedConn(failures=5, message="disk I/O error")
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        enable_wal(conn, 5.0)  # type: ignore[arg-type]
    assert conn.calls == 1


def test_a_file_that_cannot_take_wal_carries_on_and_says_so() -> None:
    with structlog.testing.capture_logs() as logs:
        assert enable_wal(_LockedConn(failures=0, mode="delete"), 1.0) == "delete"  # type: ignore[arg-type]
    assert [e["journal_mode"] for e in logs if e["event"] == "sqlite.no_wal"] == ["delete"]
