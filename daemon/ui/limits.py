"""Bounds on the UI's connections that need no token to be enforced: a request deadline and a connection cap.

Why: uvicorn arms no timer until a first response is sent (``timeout_keep_alive`` only
closes a connection idle *after* a response), and has no header timeout, so a connection
that sends half a request head, or nothing, stays open forever; and nothing bounds how
many there are (``limit_concurrency`` only answers 503 to *requests* over the limit, which
would turn a flood of half-sent connections into 503s for the owner's own page). The
Host and token checks of :mod:`memoryd.daemon.ui.security` run only once a request head is
complete, so any local user could hold the server this way. The protocol class made here
(on uvicorn's own, httptools or h11 as ``http="auto"`` would pick) adds:

- a **request deadline**: from the moment a connection waits for a request (opened, or its
  last response done) the request's head *and* body must arrive within
  ``request_timeout_s``, else the connection is closed;
- a **connection cap**: past ``max_connections`` open connections, the one that has waited
  longest for a request (none in progress) is closed to make room, so the newest one,
  typically the user's browser, is served. A connection whose request runs is never cut;
- an **owner check**: with ``owner_uid``, a connection whose client socket belongs to
  another uid (:func:`memoryd.daemon.ui.peers.tcp_peer_uid`) is closed before it is read,
  so neither a replayed cookie nor a flood of another local user gets an answer.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import structlog

from memoryd.daemon.ui.peers import tcp_peer_uid

log = structlog.get_logger(__name__)

REQUEST_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 100
KEEP_ALIVE_S = 5  # uvicorn's timeout_keep_alive: an idle keep-alive connection closes after this


def _base() -> type[asyncio.Protocol]:
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    except ImportError:  # httptools is optional (the ui extra has it): h11 is uvicorn's fallback
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol


def bounded_protocol(request_timeout_s: float = REQUEST_TIMEOUT_S, max_connections: int = MAX_CONNECTIONS,
                     owner_uid: int | None = None) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol with the request deadline, the connection cap and, given ``owner_uid``,
    the owner check (module docstring)."""
    base: Any = _base()

    class Bounded(base):  # type: ignore[misc]
        _waiting_since: float | None = None  # monotonic time since which it waits for a request
        _armed_cycle: Any = None
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            if owner_uid is not None and not _owners(transport, owner_uid):
                transport.close()
                return
            _arm(self, request_timeout_s)
            if len(self.connections) > max_connections:
                _make_room(self)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                _arm(self, request_timeout_s)

        def connection_lost(self, exc: Exception | None) -> None:
            _disarm(self)
            super().connection_lost(exc)

    return Bounded


def _owners(transport: asyncio.BaseTransport, owner_uid: int) -> bool:
    """True if the client at the other end of ``transport`` runs as ``owner_uid`` (else logged)."""
    peer, local = transport.get_extra_info("peername"), transport.get_extra_info("sockname")
    uid = tcp_peer_uid(peer[:2], local[:2]) if peer and local else None
    if uid != owner_uid:
        log.warning("ui.peer_refused", uid=uid, expected_uid=owner_uid, peer=str(peer), local=str(local),
                    why="another user's connection" if uid is not None else "its owner cannot be found")
        return False
    return True


def _arm(conn: Any, timeout_s: float) -> None:
    """Start waiting for a request: it must be in, head and body, within ``timeout_s``."""
    _disarm(conn)
    conn._waiting_since = time.monotonic()
    conn._armed_cycle = conn.cycle
    conn._deadline = conn.loop.call_later(timeout_s, _expire, conn)


def _disarm(conn: Any) -> None:
    if conn._deadline is not None:
        conn._deadline.cancel()
        conn._deadline = None


def _expire(conn: Any) -> None:
    conn._deadline = None
    if not _request_arrived(conn) and not conn.transport.is_closing():
        conn.transport.close()


def _make_room(newcomer: Any) -> None:
    """Close the connection that has waited longest for a request (none in progress), if there is one."""
    waiting = [c for c in newcomer.connections if c is not newcomer and _waiting(c)]
    if waiting:
        min(waiting, key=lambda c: c._waiting_since).transport.close()


def _request_arrived(conn: Any) -> bool:
    """True once a new request's head and whole body have come in since the connection's deadline was armed."""
    cycle = conn.cycle
    return cycle is not None and cycle is not conn._armed_cycle and not cycle.more_body


def _waiting(conn: Any) -> bool:
    """A connection that may be closed to make room: it waits for a request, none is in progress."""
    return (getattr(conn, "_waiting_since", None) is not None and not _request_arrived(conn)
            and not conn.transport.is_closing())
