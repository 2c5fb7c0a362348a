"""Switch a SQLite connection to WAL even while other processes open the same new file.

``PRAGMA journal_mode = WAL`` on a file that is not yet in WAL needs an exclusive lock, and when
two processes switch one new file at once SQLite answers ``database is locked`` at once — the busy
timeout does not apply (the other side holds a shared lock it will not give up: waiting could
deadlock). A daemon and ``memoryd index`` started together hit this, so the switch is retried
here, with a short growing pause, until ``timeout_s`` has passed. A file already in WAL answers
at once, without a lock.
"""

from __future__ import annotations

import sqlite3
import time

import structlog

log = structlog.get_logger(__name__)


def enable_wal(conn: sqlite3.Connection, timeout_s: float) -> str:
    """Put ``conn``'s database in WAL mode; re-raises the last ``database is locked`` after ``timeout_s``.

    Returns the journal mode the file is in: a file system that cannot hold a WAL (some network
    mounts) keeps its rollback journal — logged, not refused, as SQLite itself would carry on
    (readers then wait for writers)."""
    deadline = time.monotonic() + timeout_s
    pause = 0.005
    while True:
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(pause)  # no event to wait on: the lock belongs to another process
            pause = min(pause * 2, 0.1)
            continue
        got = str(mode[0]).lower() if mode is not None else "unknown"
        if got != "wal":
            log.warning("sqlite.no_wal", journal_mode=got, action="carrying on: readers may wait for writers")
        return got
