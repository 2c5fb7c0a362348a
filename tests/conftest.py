"""Shared fixtures.

Every test must leave no thread behind (watchdog observers, APScheduler and
timers all start threads): the autouse ``no_leaked_threads`` fixture fails a
test that does; and no logging configuration (``no_leaked_logging_config``).
Socket paths must stay short (a Unix socket path is limited to
~104 bytes and ``tmp_path`` can exceed it): use ``short_dir``.

The whole session shares one model cache in a temporary ``XDG_CACHE_HOME``
(``model_cache_home``): built models are per user, and a test must not write
into the real ``~/.cache``; daemons the tests spawn inherit it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.pgfixture import pg_dsn, pg_server, restartable_pg  # noqa: F401  (a real PostgreSQL + pgvector)

# Property tests explore the same examples on every run (a red CI is a bug anyone can replay, never a dice roll)
# and have no per-example deadline (the machines are shared; timing is not what they test). Explore further
# with `pytest --hypothesis-seed=N` or a test's own settings.
settings.register_profile("memoryd", derandomize=True, deadline=None, print_blob=True)
settings.load_profile("memoryd")

# The folders tests make (tmp_path/"data" before a daemon starts) get the same mode on every runner: under a
# umask of 002 (many CI images) they would be group-writable, and memoryd refuses a data dir others can write.
os.umask(0o022)


@pytest.fixture(autouse=True)
def no_leaked_logging_config(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test that configures memoryd's logging (a CLI command run in-process does) leaves it as it was:
    its handler stays on the root logger otherwise, and a later test sees another test's level."""
    yield
    from memoryd.daemon.logs import reset_logging

    reset_logging()


@pytest.fixture(scope="session", autouse=True)
def model_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    cache = tmp_path_factory.mktemp("xdg-cache")
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(cache)
    try:
        yield cache
    finally:
        if old is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = old


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


@pytest.fixture
def wd(tmp_path: Path, short_dir: Path) -> Iterator[Any]:
    """An in-process daemon serving the write methods (:func:`tests.write_fixtures.start_write_daemon`)."""
    from tests.write_fixtures import start_write_daemon

    w = start_write_daemon(tmp_path, short_dir)
    try:
        yield w
    finally:
        w.close()
