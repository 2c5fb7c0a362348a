"""One deadline per remote call, and a cap on what a call may read.

httpx's ``timeout`` bounds each socket operation, not a call: a server that sends one byte every
5 s never trips a 30 s timeout, and a search (or the index worker, which a ``remember`` waits for)
then waits as long as the server likes. And it reads whatever the server sends: a 160 MB answer
took 300 MB of memory and seconds per search.

* :class:`DeadlineTransport` is httpx's own transport on a network backend whose every connect,
  read and write waits at most what is left of the calling thread's deadline (:func:`deadline`),
  so connect + send + all reads of one call finish by it, whatever the server does (the whole
  call, not each read: a trickle is cut at the deadline, to the granularity of one socket read);
* :func:`read_capped` reads a streamed answer up to a byte cap, and checks the deadline between
  chunks too (a transport without the backend, such as a test's mock, still stops).

Both raise :class:`CallFailed` with what happened (never the request: it holds the user's texts).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import httpcore
import httpx

if TYPE_CHECKING:
    import ssl


class CallFailed(Exception):
    """A remote call passed its deadline or its size cap (the message says which)."""


class _Deadlines(threading.local):
    at: float | None = None


_DEADLINES = _Deadlines()


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Every socket operation of this thread's calls inside the block ends ``seconds`` from now at the latest
    (or by an enclosing block's deadline, when that comes first)."""
    before = _DEADLINES.at
    at = time.monotonic() + seconds
    _DEADLINES.at = at if before is None else min(before, at)
    try:
        yield
    finally:
        _DEADLINES.at = before


def remaining() -> float | None:
    """Seconds left of this thread's deadline (None without one)."""
    at = _DEADLINES.at
    return None if at is None else at - time.monotonic()


def _cap(timeout: float | None, error: type[Exception]) -> float | None:
    left = remaining()
    if left is None:
        return timeout
    if left <= 0:
        raise error("the call's deadline passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _cap(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _cap(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, _cap(timeout, httpcore.ConnectTimeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    """httpcore's sync backend, every wait capped by the calling thread's deadline."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_tcp(host, port, _cap(timeout, httpcore.ConnectTimeout), local_address,
                                               socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, _cap(timeout, httpcore.ConnectTimeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class DeadlineTransport(httpx.HTTPTransport):
    """httpx's transport (same pool settings) over :class:`_Backend`. Through a proxy named by the
    environment, httpx uses its own transport: there the deadline is checked between chunks only."""

    def __init__(self) -> None:
        limits = httpx.Limits(max_connections=8, max_keepalive_connections=4)
        super().__init__(limits=limits)
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(), max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections, keepalive_expiry=limits.keepalive_expiry,
            network_backend=_Backend())


def read_capped(resp: httpx.Response, cap: int) -> bytes:
    """The body of a streamed ``resp``, at most ``cap`` bytes (decoded); :class:`CallFailed` past it
    or past this thread's deadline. Stops reading at once: a huge answer costs ``cap``, not its size."""
    declared = resp.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise CallFailed(f"answer of {int(declared)} bytes, more than the {cap} a batch may take")
    parts: list[bytes] = []
    size = 0
    for chunk in resp.iter_bytes():
        size += len(chunk)
        if size > cap:
            raise CallFailed(f"answer longer than the {cap} bytes a batch may take; reading stopped")
        left = remaining()
        if left is not None and left <= 0:
            raise CallFailed("no complete answer within the call's deadline")
        parts.append(chunk)
    return b"".join(parts)
