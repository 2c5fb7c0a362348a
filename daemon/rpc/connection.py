"""One client connection of the socket server: line framing, size and time limits.

A ``Connection`` runs on its own thread (started by ``memoryd.daemon.rpc.server``) and
answers requests in order. Limits, and why:

- a line longer than ``max_request_bytes`` (newline excluded) gets one -32600
  error and the connection is closed: we cannot resynchronise on a line we
  refused to buffer;
- no complete request for ``idle_timeout_s`` → closed (frees the thread slot);
- a line not complete ``read_timeout_s`` after its first byte → closed; the
  clock is not reset by further partial bytes, so trickling a byte at a time
  cannot hold the thread forever;
- ``sendall`` runs with a ``write_timeout_s`` socket timeout under a lock: a
  client that never reads stalls (then loses) only its own connection.

Every wait is a selector over the socket *and* the server's stop pipe, so a
server stop wakes every idle connection at once.

Replies are never lost silently:

- once the server is stopping, every request line read (pipelined behind the
  current one, or already waiting in the socket when the stop came) is
  answered with -32003 "shutting down" and its id;
- a request still running when the server gives up waiting gets -32003 from
  :meth:`Connection.fail_inflight`; the handler's late answer is then dropped
  (one reply per request, never two);
- an idle connection (nothing read since its last answer) may be closed by
  the server to make room for a newcomer (:meth:`Connection.evict`): it gets one
  -32004 line with a null id, and nothing it sent afterwards is ever run, so a
  client may resend its request on a new connection.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

import structlog

from memoryd.daemon.rpc.errors import IDLE_CLOSED, INVALID_REQUEST, SHUTTING_DOWN, RpcError
from memoryd.daemon.rpc.jsonrpc import Handler, Peer, Request, dispatch, encode_error, parse_request

log = structlog.get_logger(__name__)

_RECV_BYTES = 65536
_DRAIN_BYTES = 1_048_576  # read at most this much more once stopping, to answer what was already sent
SHUTDOWN_MESSAGE = "memoryd is shutting down: this request was not run; retry when it is back"


@dataclass(frozen=True)
class Limits:
    """Per-connection limits (bytes and seconds), all > 0."""

    max_request_bytes: int = 1_048_576
    idle_timeout_s: float = 300.0
    read_timeout_s: float = 10.0
    write_timeout_s: float = 10.0


class _Closed(Exception):
    """Ends the serve loop; ``reason`` is a short stable code for the log."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Connection:
    """Serve one accepted socket until EOF, a limit, an I/O error or the server's stop."""

    def __init__(
        self,
        sock: socket.socket,
        peer: Peer,
        handlers: Mapping[str, Handler],
        limits: Limits,
        stop_fd: int,
        stopping: threading.Event,
    ) -> None:
        self.sock = sock
        self.peer = peer
        self._handlers = handlers
        self._limits = limits
        self._stop_fd = stop_fd
        self._stopping = stopping
        self._write_lock = threading.Lock()
        # guards the fields below, shared with the server's accept thread (evict) and stop (fail_inflight)
        self._state_lock = threading.Lock()
        self._idle_since: float | None = time.monotonic()  # None while a line is partial or a request runs
        self._evicted = False
        self._inflight: Request | None = None
        self._answered = False
        # Blocking with a timeout: reads only happen after the selector says
        # ready, so the timeout bounds sendall to a client that does not read.
        sock.settimeout(limits.write_timeout_s)

    def serve(self) -> str:
        """Run until the connection ends; return why (``eof``, ``idle_timeout``, ...). Never raises."""
        try:
            self._loop()
        except _Closed as closed:
            return closed.reason
        except TimeoutError:
            return "write_timeout"
        except OSError as exc:
            return f"io_error: {exc.strerror or exc}"
        return "eof"  # pragma: no cover - _loop only leaves by raising

    def abort(self) -> None:
        """Wake a thread blocked in recv/sendall on this socket (used by ``stop``)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def idle_for(self, now: float) -> float | None:
        """Seconds since this connection last had nothing to do; None while it is busy."""
        with self._state_lock:
            return None if self._idle_since is None or self._evicted else now - self._idle_since

    def evict(self, message: str) -> bool:
        """Close this connection if it is idle (sending one -32004 line); False if it became busy."""
        with self._state_lock:
            if self._idle_since is None or self._evicted:
                return False
            self._evicted = True
        self._send_nowait(encode_error(None, IDLE_CLOSED, message))
        self.abort()
        return True

    def fail_inflight(self, message: str = SHUTDOWN_MESSAGE) -> bool:
        """Answer the running request with -32003 now (its handler's answer will be dropped)."""
        with self._state_lock:
            request = self._inflight
            if request is None or self._answered:
                return False
            self._answered = True
        if not request.is_notification:
            self._send_nowait(encode_error(request.id, SHUTTING_DOWN, message, {"completed": "unknown"}))
        return True

    def _send_nowait(self, payload: bytes) -> None:
        """Best effort, never blocking the caller (the accept thread, or stop): a small line or nothing.

        ``os.write``, not ``sock.send``: a socket with a timeout is non-blocking
        underneath, and ``send`` would wait out that timeout on a full buffer.
        """
        with self._write_lock, contextlib.suppress(OSError):
            os.write(self.sock.fileno(), payload)

    def send(self, payload: bytes) -> None:
        """Write one whole response line; raises TimeoutError after ``write_timeout_s``."""
        with self._write_lock:
            self.sock.sendall(payload)

    def _loop(self) -> None:
        buf = bytearray()
        deadline = time.monotonic() + self._limits.idle_timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(self.sock, selectors.EVENT_READ)
            sel.register(self._stop_fd, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _Closed("read_timeout" if buf else "idle_timeout")
                ready = sel.select(remaining)
                if any(key.fd == self._stop_fd for key, _ in ready):
                    self._refuse_unread(buf)
                    raise _Closed("server_stopping")
                if not ready:
                    continue
                if not self._claim():
                    raise _Closed("evicted")
                data = self.sock.recv(_RECV_BYTES)
                if not data:
                    if buf.strip():  # a last request without its newline: still answer it
                        self._answer(bytes(buf))
                    raise _Closed("eof")
                was_partial = bool(buf)
                consumed = self._take_lines(buf, data)
                if not buf:
                    deadline = time.monotonic() + self._limits.idle_timeout_s
                    self._set_idle()
                elif consumed or not was_partial:  # a new partial line starts its own clock
                    deadline = time.monotonic() + self._limits.read_timeout_s

    def _take_lines(self, buf: bytearray, data: bytes) -> int:
        """Append ``data``, answer every complete line; return how many were taken."""
        start = len(buf)
        buf += data
        taken = 0
        limit = self._limits.max_request_bytes
        while (end := buf.find(b"\n", start)) >= 0:
            line = bytes(buf[:end])
            del buf[: end + 1]
            start = 0
            taken += 1
            if len(line) > limit:
                self._too_large(len(line))
            if line.strip():
                self._answer(line)
        if self._stopping.is_set():
            raise _Closed("server_stopping")
        if len(buf) > limit:
            self._too_large(len(buf))
        return taken

    def _claim(self) -> bool:
        """Mark the connection busy before reading; False if the server evicted it first."""
        with self._state_lock:
            if self._evicted:
                return False
            self._idle_since = None
            return True

    def _set_idle(self) -> None:
        with self._state_lock:
            self._idle_since = time.monotonic()

    def _answer(self, line: bytes) -> None:
        try:
            request = parse_request(line)
        except RpcError as exc:
            self.send(encode_error(None, exc.code, exc.message))
            return
        with self._state_lock:
            stopping = self._stopping.is_set()
            if not stopping:
                self._inflight, self._answered = request, False
        if stopping:  # read after the stop began: not run
            if not request.is_notification:
                self.send(encode_error(request.id, SHUTTING_DOWN, SHUTDOWN_MESSAGE))
            return
        try:
            reply = dispatch(request, self._handlers, self.peer)
        finally:
            with self._state_lock:
                late = self._answered  # fail_inflight answered for us: drop this one
                self._inflight, self._answered = None, True
        if reply is not None and not late:
            self.send(reply)

    def _refuse_unread(self, buf: bytearray) -> None:
        """On stop: answer "shutting down" to every complete request already sent to us."""
        with contextlib.suppress(OSError):  # BlockingIOError: nothing more was sent (see _send_nowait)
            while len(buf) < _DRAIN_BYTES:
                data = os.read(self.sock.fileno(), _RECV_BYTES)
                if not data:
                    break
                buf += data
        while (end := buf.find(b"\n")) >= 0:
            line = bytes(buf[:end])
            del buf[: end + 1]
            if line.strip() and len(line) <= self._limits.max_request_bytes:
                with contextlib.suppress(OSError):
                    self._answer(line)

    def _too_large(self, size: int) -> None:
        limit = self._limits.max_request_bytes
        log.warning("request.too_large", peer_pid=self.peer.pid, bytes=size, limit=limit)
        with contextlib.suppress(OSError):
            self.send(encode_error(None, INVALID_REQUEST, f"request too large: {size} bytes > {limit}"))
        raise _Closed("too_large")
