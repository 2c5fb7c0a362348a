"""The light JSON-RPC client of memoryd's socket.

The CLI imports this for every editor save (``memoryd reindex PATH``), so it
must cost ~0 ms to import: stdlib ``json``/``os``/``socket`` only, plus the
import-light ``memoryd.indexer.errors`` and the code table ``memoryd.daemon.rpc.errors``;
not even ``typing`` or ``pathlib`` at run time.

Errors: ``NotRunningError`` when no daemon listens on the path (its message
names the path and how to start one), ``RpcClientError`` for an error response
(``code``, ``message``, ``data``), ``DaemonError`` for a timeout or a broken
connection. A ``Client`` reuses one connection for many calls (reconnecting
transparently if the daemon closed it while idle); it is not thread-safe.

Who listens: right after ``connect`` and before a byte is sent, the listener's uid is read
with ``SO_PEERCRED`` and must be ``expect_uid`` (default: our own effective uid; a uid bound
in another user's ``server.allowed_uids`` sets ``[server] daemon_uid`` in its own config).
Root is not accepted by default either: a socket path another user could have prepared
(``/tmp/memoryd-UID`` without ``XDG_RUNTIME_DIR``) must not receive what we remember.

Load: a daemon at ``server.max_clients`` answers a newcomer -32002 "server
busy", and may close an idle connection with -32004 to make room; both come
with a null id and before the request was read, so the request never ran.
``call`` then reconnects and sends it again, backing off (jittered, doubling
from 10 ms to 0.5 s) until its ``timeout`` runs out; only then is the busy
error raised. Notifications are not retried (fire and forget).
"""

from __future__ import annotations

import json
import os
import random
import select
import socket
import struct
import time

from memoryd.daemon.rpc.errors import IDLE_CLOSED, SERVER_BUSY
from memoryd.indexer.errors import DaemonError, NotRunningError, UntrustedListenerError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any

START_HINT = "Start it with `memoryd run` or `systemctl --user start memoryd`."
_RECV_BYTES = 65536
_RETRY_CODES = (SERVER_BUSY, IDLE_CLOSED)
_FIRST_BACKOFF_S = 0.01
_MAX_BACKOFF_S = 0.5
_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


class RpcClientError(DaemonError):
    """The daemon answered with a JSON-RPC error; ``str()`` is its message."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class Client:
    """Calls methods on the daemon at ``path``; ``timeout`` (seconds) bounds each connect and call."""

    def __init__(self, path: str | os.PathLike[str], timeout: float = 30.0, expect_uid: int | None = None) -> None:
        self.path = os.fspath(path)
        self.timeout = timeout
        self.expect_uid = os.geteuid() if expect_uid is None else expect_uid
        self._sock: socket.socket | None = None
        self._buf = bytearray()
        self._next_id = 0

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (a later call reconnects)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        self._buf.clear()

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Call ``method`` and return its result; raises as described in the module docstring."""
        self._next_id += 1
        rid = self._next_id
        payload = _request(method, params, rid)
        deadline = time.monotonic() + self.timeout
        delay = _FIRST_BACKOFF_S
        while True:
            response = self._exchange(method, payload, rid)
            wait = _retry_delay(response, delay)
            if wait is None or time.monotonic() + wait > deadline:
                break
            self.close()  # the daemon closed this connection after its refusal
            time.sleep(wait)
            delay = min(delay * 2, _MAX_BACKOFF_S)
        error = response.get("error")
        if error is None:
            return response.get("result")
        if response.get("id") is None:  # a connection-level refusal: the daemon closes after it
            self.close()
        if not isinstance(error, dict):
            raise DaemonError(f"memoryd on {self.path} sent a malformed error: {error!r}")
        raise RpcClientError(int(error.get("code", 0)), str(error.get("message", "")), error.get("data"))

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        """Send a notification (no reply, errors are not reported): fire and forget."""
        sock = self._connection()
        try:
            sock.sendall(_request(method, params, None))
        except OSError as exc:
            self.close()
            raise DaemonError(f"lost the connection to memoryd on {self.path}: {exc}") from None

    def _exchange(self, method: str, payload: bytes, rid: int) -> dict[str, Any]:
        sock = self._connection()
        try:
            try:
                sock.sendall(payload)
            except (BrokenPipeError, ConnectionResetError):
                # The daemon refused us before reading (peer denied, server busy): its one error
                # line may already be waiting; read it so the caller gets the real reason.
                return self._read_response(sock)
            while True:
                response = self._read_response(sock)
                if response.get("id") in (rid, None):
                    return response
        except TimeoutError:
            self.close()
            raise DaemonError(
                f"memoryd on {self.path} did not answer {method!r} within {self.timeout:g} s"
            ) from None
        except OSError as exc:
            self.close()
            raise DaemonError(f"lost the connection to memoryd on {self.path}: {exc}") from None
        except DaemonError:
            self.close()  # out of sync with the daemon: start afresh next call
            raise

    def _read_response(self, sock: socket.socket) -> dict[str, Any]:
        while (end := self._buf.find(b"\n")) < 0:
            data = sock.recv(_RECV_BYTES)
            if not data:
                raise ConnectionError("the daemon closed the connection")
            self._buf += data
        line = bytes(self._buf[:end])
        del self._buf[: end + 1]
        try:
            response = json.loads(line)
        except ValueError:
            raise DaemonError(f"memoryd on {self.path} sent an invalid response: {line[:200]!r}") from None
        if not isinstance(response, dict):
            raise DaemonError(f"memoryd on {self.path} sent an invalid response: {line[:200]!r}")
        return response

    def _connection(self) -> socket.socket:
        if self._sock is not None and not _closed_by_peer(self._sock):
            return self._sock
        self.close()
        deadline = time.monotonic() + self.timeout
        delay = 0.005
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(self.path)
            except BlockingIOError as exc:
                # A full listen backlog: a Unix socket with a timeout says EAGAIN at once instead of
                # waiting. The daemon is alive and busy; wait our turn, within our timeout.
                sock.close()
                if time.monotonic() + delay > deadline:
                    raise self._connect_error(exc) from None
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
                continue
            except OSError as exc:
                sock.close()
                raise self._connect_error(exc) from None
            try:
                check_listener(sock, self.path, self.expect_uid)
            except BaseException:
                sock.close()
                raise
            self._sock = sock
            return sock

    def _connect_error(self, exc: OSError) -> DaemonError:
        if isinstance(exc, FileNotFoundError):
            return NotRunningError(f"memoryd is not running (no socket at {self.path}). {START_HINT}")
        if isinstance(exc, ConnectionRefusedError):
            return NotRunningError(f"memoryd is not running (nothing listens on {self.path}). {START_HINT}")
        if isinstance(exc, TimeoutError):
            return DaemonError(f"memoryd on {self.path} did not accept within {self.timeout:g} s")
        return DaemonError(f"cannot connect to memoryd on {self.path}: {exc.strerror or exc}")


def check_listener(sock: socket.socket, path: str, expect_uid: int) -> None:
    """Raise :class:`UntrustedListenerError` unless the process at the other end of ``sock`` runs as ``expect_uid``.

    Why: whoever can create the socket path first (another user, in a shared ``/tmp``)
    can run a fake daemon that receives every query and every ``remember``; the kernel's
    ``SO_PEERCRED`` names the listener's uid, which that user cannot forge.
    """
    try:
        _pid, uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    except OSError as exc:
        raise UntrustedListenerError(f"cannot check who listens on {path}: {exc.strerror or exc}") from None
    if uid != expect_uid:
        raise UntrustedListenerError(
            f"refusing the socket {path}: it is served by uid {uid}, not by uid {expect_uid} as expected; nothing "
            f"was sent. Another user may have created it: remove it or its folder, or set XDG_RUNTIME_DIR (if uid "
            f"{uid} is a daemon you trust, set [server] daemon_uid = {uid} in your memoryd.toml)")


def _request(method: str, params: dict[str, Any] | None, rid: int | None) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        msg["params"] = params
    if rid is not None:
        msg["id"] = rid
    try:
        return json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # lone surrogates: \u escapes keep the line valid UTF-8
        return json.dumps(msg, separators=(",", ":")).encode("ascii") + b"\n"


def _retry_delay(response: dict[str, Any], delay: float) -> float | None:
    """Seconds to wait before sending again, or None: only a refusal of a request never read is retried."""
    error = response.get("error")
    if response.get("id") is not None or not isinstance(error, dict) or error.get("code") not in _RETRY_CODES:
        return None
    if error.get("code") == IDLE_CLOSED:
        return 0.0  # our idle connection made room for someone: a fresh one is welcome at once
    return delay * random.uniform(0.5, 1.5)  # jitter: 200 refused clients must not come back in step


def _closed_by_peer(sock: socket.socket) -> bool:
    """True if this idle connection cannot be reused, without blocking.

    Between calls nothing is due from the daemon, so anything readable means
    it closed (EOF, an error) or said goodbye first (a -32004 line): reconnect.
    """
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)
