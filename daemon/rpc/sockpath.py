"""Creating the server's socket file safely: private directory, stale sockets, no clobbering.

Why each rule exists:

- A missing directory is created 0700 and the socket bound 0600 under a
  restrictive umask, never chmod-ed afterwards: a chmod after ``bind`` leaves a
  window in which any local user could connect. (The umask is process-wide:
  bind before starting threads that create files, or a file they create in
  that instant is 0600.)
- A directory that already exists is never chmod-ed: it is not ours to change
  (``--socket /tmp/memoryd.sock`` run as root would otherwise lock every user
  out of ``/tmp``; ``--socket ~/m.sock`` would tighten ``$HOME``). It must
  belong to us and must not be group- or world-writable (whoever can write
  there can create names in it, and without the sticky bit delete or replace
  our socket); else :class:`UnsafeSocketDir` names it and the mode.
  One that is merely readable by others is fine: the socket itself is 0600,
  and Linux checks write permission on the socket file at ``connect``.
- An existing socket file is probed: something answering means another daemon
  (``SocketInUseError``); "connection refused" means a stale file from a crash,
  which we replace. Anything that is not a socket (a user's regular file, a
  symlink) is never deleted.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import struct
from pathlib import Path

import structlog

from memoryd.indexer.errors import DaemonError, SocketInUseError

log = structlog.get_logger(__name__)

_UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_MAX_PATH_BYTES = 107  # sizeof(sun_path) - 1 on Linux
_PROBE_TIMEOUT_S = 1.0


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a connected Unix socket."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return pid, uid, gid


def socket_identity(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of the socket file at ``path``, or None if there is none."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISSOCK(st.st_mode) else None


def unlink_if_same(path: Path, identity: tuple[int, int] | None) -> None:
    """Remove the socket file only if it is still the one we bound (a successor may own the path)."""
    if identity is not None and socket_identity(path) == identity:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


class UnsafeSocketDir(DaemonError):
    """The socket's directory exists and is not private to us; ``directory`` and ``mode`` name it."""

    def __init__(self, directory: Path, mode: int, why: str) -> None:
        super().__init__(
            f"refusing the socket directory {directory} (mode {mode:04o}): {why}; memoryd never changes the "
            "mode of a directory it did not create. Choose a socket path in a private directory, e.g. "
            "$XDG_RUNTIME_DIR/memoryd/memoryd.sock (the default)"
        )
        self.directory = directory
        self.mode = mode


def _prepare_dir(directory: Path) -> None:
    """Create ``directory`` 0700 if missing; else check it is ours and not writable by others."""
    old = os.umask(0o077)
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    finally:
        os.umask(old)
    st = os.stat(directory)
    mode = stat.S_IMODE(st.st_mode)
    if not stat.S_ISDIR(st.st_mode):
        raise DaemonError(f"socket directory {directory} is not a directory")
    if st.st_uid != os.geteuid():
        raise UnsafeSocketDir(directory, mode, f"it belongs to uid {st.st_uid}, not to us (uid {os.geteuid()})")
    if mode & 0o022:
        raise UnsafeSocketDir(directory, mode, "other users can write to it and could replace the socket")


def _clear_stale(path: Path) -> None:
    """Remove a stale socket at ``path``; raise if it is live or not a socket."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(st.st_mode):
        raise DaemonError(f"refusing to use {path} as the socket: it exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(_PROBE_TIMEOUT_S)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        log.info("server.stale_socket", path=str(path))
        os.unlink(path)
        return
    except TimeoutError:  # a full backlog: someone is listening but busy
        raise SocketInUseError(f"another memoryd is already running on {path} (not answering)") from None
    except OSError as exc:
        raise DaemonError(f"cannot check the existing socket {path}: {exc.strerror or exc}") from None
    else:
        pid = peer_credentials(probe)[0]
        raise SocketInUseError(f"another memoryd is already running on {path} (pid {pid})")
    finally:
        probe.close()


def bind_unix_socket(path: Path, backlog: int = 512) -> socket.socket:
    """A non-blocking listening socket bound at ``path`` (dir 0700, socket 0600).

    Raises ``SocketInUseError`` when a live server answers on ``path`` and
    ``DaemonError`` for a path that is too long, not a socket, or in a directory
    that is not ours.
    """
    if len(os.fsencode(path)) > _MAX_PATH_BYTES:
        raise DaemonError(f"socket path {path} is too long for a Unix socket (max {_MAX_PATH_BYTES} bytes)")
    _prepare_dir(path.parent)
    _clear_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:  # another daemon won the race since the probe
            raise SocketInUseError(f"another memoryd is already running on {path}") from None
        raise DaemonError(f"cannot bind the socket {path}: {exc.strerror or exc}") from None
    finally:
        os.umask(old)
    sock.listen(backlog)
    sock.setblocking(False)
    return sock


def adopt_listening_socket(fd: int) -> socket.socket:
    """Wrap a listening Unix socket passed by systemd (socket activation); raise if it is not one."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise DaemonError(f"listen fd {fd} is not a socket: {exc.strerror or exc}") from None
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        sock.detach()
        raise DaemonError(f"listen fd {fd} is not a Unix stream socket")
    sock.setblocking(False)
    return sock


def check_socket_path(path: Path) -> None:
    """Fail early, before the model loads, for a socket path that :func:`bind_unix_socket` would refuse.

    The same checks (length, private directory, a live server answering, not a socket),
    without binding; a stale socket from a crash is removed as the bind would.
    """
    if len(os.fsencode(path)) > _MAX_PATH_BYTES:
        raise DaemonError(f"socket path {path} is too long for a Unix socket (max {_MAX_PATH_BYTES} bytes)")
    _prepare_dir(path.parent)
    _clear_stale(path)
