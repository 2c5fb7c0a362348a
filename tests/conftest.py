"""Shared fixtures.

Every test must leave no thread behind (watchdog observers, APScheduler and
timers all start threads): the autouse ``no_leaked_threads`` fixture fails a
test that does. Socket paths must stay short (a Unix socket path is limited to
~104 bytes and ``tmp_path`` can exceed it): use ``short_dir``.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 5.0
    leaked: list[threading.Thread] = []
    while time.monotonic() < deadline:
        leaked = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not leaked:
            return
        time.sleep(0.02)
    pytest.fail(f"test leaked threads: {[t.name for t in leaked]}")


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short temporary directory, for Unix socket paths."""
    d = Path(tempfile.mkdtemp(prefix="md-", dir="/tmp"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)
