"""One client connection of the socket server: line framing, size and time limits.

A ``Connection`` runs on its own thread (started by ``daemon.server``) and
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
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

import structlog

from daemon.jsonrpc import INVALID_REQUEST, Handler, Peer, encode_error, handle_line

log = structlog.get_logger(__name__)

_RECV_BYTES = 65536


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
                    raise _Closed("server_stopping")
                if not ready:
                    continue
                data = self.sock.recv(_RECV_BYTES)
                if not data:
                    if buf.strip():  # a last request without its newline: still answer it
                        self._answer(bytes(buf))
                    raise _Closed("eof")
                was_partial = bool(buf)
                consumed = self._take_lines(buf, data)
                if not buf:
                    deadline = time.monotonic() + self._limits.idle_timeout_s
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

    def _answer(self, line: bytes) -> None:
        reply = handle_line(line, self._handlers, self.peer)
        if reply is not None:
            self.send(reply)

    def _too_large(self, size: int) -> None:
        limit = self._limits.max_request_bytes
        log.warning("request.too_large", peer_pid=self.peer.pid, bytes=size, limit=limit)
        with contextlib.suppress(OSError):
            self.send(encode_error(None, INVALID_REQUEST, f"request too large: {size} bytes > {limit}"))
        raise _Closed("too_large")
