"""What the socket methods need from the rest of the daemon, as small Protocols, and how
they wait for the worker (:func:`worker_result`).

The handlers are built from these parts in :mod:`memoryd.daemon.app` only; tests
build them from fakes, with neither a socket nor a started daemon.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from pathlib import Path
from typing import Any, Protocol, TypeVar

from memoryd.daemon.api.status import DaemonStatus
from memoryd.daemon.rpc.errors import SHUTTING_DOWN, RpcError
from memoryd.daemon.work.tasks import NOT_RUN, TaskStopped
from memoryd.indexer.search.hits import SearchResult
from memoryd.indexer.search.query import Query

T = TypeVar("T")


class Sited(Protocol):
    """The index as a method that checks a hit's ``site`` sees it (``get``, ``forget``; ``MemoryIndex`` is one)."""

    @property
    def site(self) -> str | None:
        """This daemon's site in a shared database; None for a backend without sites (the embedded index)."""
        ...


class SearchIndex(Sited, Protocol):
    """The read side of the index the read methods use (``MemoryIndex`` is one)."""

    def query(self, query: Query) -> SearchResult: ...


class WorkQueue(Protocol):
    """The index worker as the methods see it: everything that writes runs there, in order."""

    def call(self, fn: Callable[[], T]) -> Future[T]: ...

    def request_reconcile(self, reason: str) -> Future[dict[str, Any]]: ...

    def index_now(self, files: list[tuple[Path, str]]) -> Future[dict[str, Any]]: ...


class StatusProvider(Protocol):
    """The running daemon as ``ping`` and ``status`` see it."""

    version: str
    started: float  # time.monotonic() at start

    def status(self) -> DaemonStatus: ...


def worker_result(future: Future[T], timeout: float) -> T:
    """What a worker task answered, waiting up to ``timeout`` s (``TimeoutError`` after that).

    A task cancelled or stopped by the shutdown raises the -32003 "shutting down" error;
    a task that failed raises its error.
    """
    try:
        return future.result(timeout)
    except CancelledError:
        reason = NOT_RUN
    except TaskStopped as exc:
        reason = str(exc)
    raise RpcError(SHUTTING_DOWN, f"memoryd is shutting down: {reason}; retry when it is back")
