"""The Unix-socket JSON-RPC server: one accept thread plus one thread per client.

Contract (README, "Socket protocol"; docs/security/transport.md): the socket's directory is 0700 and the
socket 0600, both set by a restrictive umask *at creation*, so there is no window
in which another user could connect. Only peers whose ``SO_PEERCRED`` uid is the
owner's or one the application admits are served (:class:`memoryd.daemon.rpc.serving.Admission`:
``handlers_for(peer)`` gives each peer its handler table, or None); others get one -32001 error
line and are closed. Which methods another uid reaches, and as which session, is the application's
rule (``server.allowed_uids``, :func:`memoryd.daemon.api.session.admission`); the transport only
serves the table it is handed. When there are other uids, the directory is created 0711 and the
socket 0666, so those uids can connect at all; ``SO_PEERCRED`` is then the gate. Start-up warns
(``server.socket_unreachable``) when a folder above the socket keeps a bound uid out.
Slots are shared fairly (:mod:`memoryd.daemon.rpc.fairness`): a bound uid holds at most
its share, the bound uids together leave the owner its reserved slots, and a uid over its
limit may only push out an idle connection of its own pool. Refusals are logged
(``server.busy``, ``peer.denied``) once per uid per ``busy_log_interval_s`` with a count.
When ``max_clients`` connections are open, the one idle longest (for at least ``evict_idle_after_s``) is closed with
one -32004 line to make room, so idle clients cannot lock new ones out; only
when none is idle does a newcomer get one -32002 "server busy" line (and
``memoryd.daemon.client.rpc_client.Client`` retries with backoff within its timeout).

Stopping is two steps so that no request goes unanswered: ``begin_stop()``
stops accepting (new requests on open connections are answered -32003
"shutting down") while running ones finish — the daemon stops its index worker
in between, which answers or cancels what was queued for it — then ``stop()``
answers -32003 for any request still running and closes everything.

Per connection (see :class:`memoryd.daemon.rpc.connection.Connection`): requests are answered in order; a line over
``max_request_bytes`` gets one -32600 error and the connection is closed; a
connection with no complete request for ``idle_timeout_s`` is closed, and so is
one whose current line is not complete ``read_timeout_s`` after its first byte
(a slow-loris cannot hold a thread forever). Writes use ``sendall`` with a
``write_timeout_s`` socket timeout, so a client that never reads only ever
blocks its own thread. Every wait is on a selector that also watches a stop
pipe, so ``stop()`` returns promptly without polling.

Linux only (``SO_PEERCRED``).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import threading
import time
from pathlib import Path
from types import TracebackType

import structlog

from memoryd.daemon.rpc.connection import Connection, Limits
from memoryd.daemon.rpc.errors import PERMISSION_DENIED, SERVER_BUSY
from memoryd.daemon.rpc.fairness import Pool, RefusalLog, SlotPolicy
from memoryd.daemon.rpc.jsonrpc import Peer, encode_error
from memoryd.daemon.rpc.serving import Admission, ServerConfig
from memoryd.daemon.rpc.sockpath import (
    adopt_listening_socket,
    bind_unix_socket,
    peer_credentials,
    socket_identity,
    unlink_if_same,
    unreachable_for,
)
from memoryd.indexer.errors import DaemonError

log = structlog.get_logger(__name__)


class SocketServer:
    """Serve JSON-RPC on a Unix socket until ``stop()``: ``config`` says where and within which limits,
    ``admission`` who may connect and which handlers each peer's requests reach (the application's
    choice: the transport imports no session rule). Not restartable: one ``start``, one ``stop``.
    """

    def __init__(self, config: ServerConfig, admission: Admission) -> None:
        self._path = Path(config.path)
        self._admission = admission
        owner = admission.owner_uid
        self._limits = Limits(config.max_request_bytes, config.idle_timeout_s, config.read_timeout_s,
                              config.write_timeout_s)
        self._max_clients = config.max_clients
        self._slots = SlotPolicy(config.max_clients, owner)
        self._busy_log = RefusalLog("server.busy", config.busy_log_interval_s)
        self._denied_log = RefusalLog("peer.denied", config.busy_log_interval_s)
        self._evict_after = config.evict_idle_after_s
        self._closed = False
        self._listen_fd = config.listen_fd
        self._listener: socket.socket | None = None
        self._identity: tuple[int, int] | None = None  # (dev, ino) of the file we bound
        self._stopping = threading.Event()
        self._stop_r, self._stop_w = -1, -1
        # guards _conns/_threads; held while aborting, so no closed fd is reused under us
        self._lock = threading.Lock()
        self._conns: dict[threading.Thread, Connection] = {}  # open connections (max_clients counts these)
        self._threads: list[threading.Thread] = []  # every connection thread not yet seen dead, for stop()
        self._accept_thread: threading.Thread | None = None
        self._serial = 0

    @property
    def address(self) -> Path:
        """The socket path clients connect to."""
        return self._path

    def start(self) -> None:
        """Bind (or adopt ``listen_fd``) and start accepting; raises SocketInUseError/DaemonError."""
        if self._listener is not None or self._stopping.is_set():
            raise DaemonError(f"the server on {self._path} was already started")
        if self._listen_fd is not None:
            self._listener = adopt_listening_socket(self._listen_fd)
            name = self._listener.getsockname()
            if isinstance(name, str) and name:  # abstract names (bytes) keep the configured path
                self._path = Path(name)
        else:
            self._listener = bind_unix_socket(self._path, shared=bool(self._admission.guests))
            self._identity = socket_identity(self._path)
        for uid, where in unreachable_for(self._path, self._admission.guests).items():
            log.warning("server.socket_unreachable", uid=uid, path=str(self._path), blocked_by=where)
        self._stop_r, self._stop_w = os.pipe()
        self._accept_thread = threading.Thread(target=self._accept_loop, name="memoryd-accept", daemon=True)
        self._accept_thread.start()
        log.info("server.listening", path=str(self._path), adopted=self._listen_fd is not None)

    def begin_stop(self, timeout: float = 2.0) -> None:
        """Stop accepting and close idle connections; running requests go on (see ``stop``)."""
        if self._listener is None or self._stopping.is_set():
            return
        self._stopping.set()
        os.write(self._stop_w, b"x")  # never drained: stays readable for every selector
        if self._accept_thread is not None:
            self._accept_thread.join(timeout)
        self._listener.close()  # newcomers now get "connection refused", not a silent backlog

    def stop(self, timeout: float = 5.0) -> None:
        """``begin_stop``, let running requests finish for up to half of ``timeout`` seconds, answer
        -32003 to those still running, cut the connections, join every thread, remove our socket."""
        if self._listener is None or self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout
        self.begin_stop(timeout)
        self._join_conns(time.monotonic() + timeout / 2)
        with self._lock:
            for conn in self._conns.values():
                if conn.fail_inflight():
                    log.warning("request.cut_by_shutdown", peer_pid=conn.peer.pid)
                conn.abort()
        left = self._join_conns(deadline)
        unlink_if_same(self._path, self._identity)
        if left:
            log.warning("server.stop_incomplete", threads=[t.name for t in left])
        else:
            os.close(self._stop_r)
            os.close(self._stop_w)
        log.info("server.stopped", path=str(self._path))

    def __enter__(self) -> SocketServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _join_conns(self, deadline: float) -> list[threading.Thread]:
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [t for t in threads if t.is_alive()]

    def _accept_loop(self) -> None:
        assert self._listener is not None
        with selectors.DefaultSelector() as sel:
            sel.register(self._listener, selectors.EVENT_READ)
            sel.register(self._stop_r, selectors.EVENT_READ)
            while not self._stopping.is_set():
                for key, _ in sel.select():
                    if key.fd == self._stop_r:
                        return
                    self._accept_one(self._listener)

    def _accept_one(self, listener: socket.socket) -> None:
        try:
            sock, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:  # EMFILE and friends: back off instead of spinning on a ready listener
            log.error("server.accept_failed", error=str(exc))
            self._stopping.wait(0.1)
            return
        peer = Peer(*peer_credentials(sock))
        handlers = self._admission.handlers_for(peer)
        if handlers is None:
            self._denied_log.note(peer.uid, pid=peer.pid)
            _refuse(sock, PERMISSION_DENIED, f"permission denied: uid {peer.uid} is not allowed")
            return
        with self._lock:
            pool = self._slots.full_pool(peer.uid, (c.peer.uid for c in self._conns.values()))
            if pool is not None and not self._evict_idle(pool, peer.uid):
                self._busy_log.note(peer.uid, pid=peer.pid, max_clients=self._max_clients, pool=pool)
                _refuse(sock, SERVER_BUSY, f"server busy: {self._slots.describe(pool, peer.uid)}, try again")
                return
            conn = Connection(sock, peer, handlers, self._limits, self._stop_r, self._stopping)
            self._serial += 1
            name = f"memoryd-conn-{self._serial}"
            thread = threading.Thread(target=self._run_conn, args=(conn,), name=name, daemon=True)
            self._conns[thread] = conn
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            try:
                thread.start()
            except RuntimeError as exc:  # out of threads: refuse this client, keep serving others
                del self._conns[thread]
                self._threads.remove(thread)
                log.error("server.thread_failed", error=str(exc))
                _refuse(sock, SERVER_BUSY, "server busy: cannot start a thread for this client")

    def _evict_idle(self, pool: Pool, uid: int) -> bool:
        """Close the connection of ``pool`` idle longest (at least ``evict_idle_after_s``); True if one went.

        Called with ``_lock`` held. The evicted one's thread removes it from the
        table when it ends; the newcomer may take its place at once (the table
        briefly holds one more: each entry is a thread, a bounded overshoot).
        """
        now = time.monotonic()
        idle = [(age, conn) for conn in self._conns.values() if self._slots.in_pool(pool, uid, conn.peer.uid)
                and (age := conn.idle_for(now)) is not None and age >= self._evict_after]
        for age, conn in sorted(idle, key=lambda pair: -pair[0]):
            if conn.evict(f"connection closed: idle for {age:.0f} s while the server was full "
                          f"({self._max_clients} clients); reconnect to continue"):
                log.info("client.evicted", pid=conn.peer.pid, idle_s=round(age, 1))
                return True
        return False

    def _run_conn(self, conn: Connection) -> None:
        log.debug("client.connected", pid=conn.peer.pid, uid=conn.peer.uid)
        reason = conn.serve()
        with self._lock:
            del self._conns[threading.current_thread()]
        conn.sock.close()
        log.debug("client.closed", pid=conn.peer.pid, reason=reason)


def _refuse(sock: socket.socket, code: int, message: str) -> None:
    """Send one error line without blocking the accept thread, then close."""
    with contextlib.suppress(OSError):
        sock.setblocking(False)
        sock.send(encode_error(None, code, message))
    sock.close()
