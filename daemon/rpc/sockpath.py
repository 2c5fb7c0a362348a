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
  our socket); else :class:`UnsafeSocketDir` names it and the mode. Every existing folder
  *above* it must be ours or root's and not writable by others unless root's and sticky
  (``/tmp``), checked before we create anything (:func:`check_dir_chain`): the owner of a
  parent can rename our folder away and put their own socket in its place.
  One that is merely readable by others is fine: the socket itself is 0600,
  and Linux checks write permission on the socket file at ``connect``.
- With other uids bound (``server.allowed_uids``) the socket is *shared*: a missing
  directory is created 0711 (others may pass through to the socket by its name,
  not list or change the folder) and the socket bound 0666 under umask 0111, again
  with no chmod afterwards. Connecting is then open to every local user who can
  reach the path; the ``SO_PEERCRED`` check in the server is what admits only the
  owner and the bound uids (a 0666 socket in a folder only a group can pass would
  need a group every bound user and the daemon share, which memoryd cannot create).
  An existing directory is still never chmod-ed: :func:`unreachable_for` says which
  folder keeps a bound uid out, and the server warns.
- An existing socket file is probed: something answering means another daemon
  (``SocketInUseError``); "connection refused" means a stale file from a crash,
  which we replace. Anything that is not a socket (a user's regular file, a
  symlink) is never deleted.
"""

from __future__ import annotations

import contextlib
import errno
import grp
import os
import pwd
import socket
import stat
import struct
from collections.abc import Iterable
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


def _prepare_dir(directory: Path, shared: bool = False, uid: int | None = None) -> None:
    """Create ``directory`` 0700 (``shared``: 0711) if missing; else check it is ours and not writable by others.

    ``uid`` is the owner to require (default: our effective uid); tests pass another one.
    """
    uid = os.geteuid() if uid is None else uid
    check_dir_chain(directory, uid)  # before mkdir: never create our folder inside someone else's
    old = os.umask(0o066 if shared else 0o077)
    try:
        directory.mkdir(mode=0o711 if shared else 0o700, parents=True, exist_ok=True)
    finally:
        os.umask(old)
    st = os.stat(directory)
    mode = stat.S_IMODE(st.st_mode)
    if not stat.S_ISDIR(st.st_mode):
        raise DaemonError(f"socket directory {directory} is not a directory")
    if st.st_uid != uid:
        raise UnsafeSocketDir(directory, mode, f"it belongs to uid {st.st_uid}, not to us (uid {uid})")
    if mode & 0o022:
        raise UnsafeSocketDir(directory, mode, "other users can write to it and could replace the socket")
    check_dir_chain(directory, uid)  # and again once it exists (a parent may have been created just now)


def check_dir_chain(directory: Path, uid: int) -> None:
    """Refuse when a folder above the socket's (that exists) lets another uid swap what lies below it.

    Why: checking only the socket's own folder let ``/tmp/memoryd-UID``, created first by
    another user (world-writable or theirs), hold our 0700 folder: its owner can rename ours
    away and put a folder and socket of their own in its place, and every client then talks
    to them. Each existing ancestor must belong to ``uid`` or root, and a group- or
    world-writable one must be root's with the sticky bit (``/tmp``: nobody can rename
    another user's entry in it).
    """
    for part in [directory, *directory.parents]:
        try:
            st = os.stat(part)
        except FileNotFoundError:
            continue  # created by us, 0700, below the nearest one that exists
        except OSError as exc:
            raise DaemonError(f"cannot check the socket directory {part}: {exc.strerror or exc}") from None
        mode = stat.S_IMODE(st.st_mode)
        if st.st_uid not in (uid, 0):
            raise UnsafeSocketDir(part, mode, f"it belongs to uid {st.st_uid}, not to us (uid {uid}) or root, "
                                  f"so its owner could replace the socket below it (remove it, or set "
                                  f"XDG_RUNTIME_DIR / server.socket to a folder of your own)")
        if mode & 0o022 and not (st.st_uid == 0 and mode & stat.S_ISVTX):
            raise UnsafeSocketDir(part, mode, "other users can write to it and could replace the socket below it "
                                  f"(chmod go-w {part}, or choose another folder)")


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


def bind_unix_socket(path: Path, backlog: int = 512, *, shared: bool = False) -> socket.socket:
    """A non-blocking listening socket bound at ``path`` (dir 0700, socket 0600; ``shared``: 0711, 0666).

    Raises ``SocketInUseError`` when a live server answers on ``path`` and
    ``DaemonError`` for a path that is too long, not a socket, or in a directory
    that is not ours.
    """
    if len(os.fsencode(path)) > _MAX_PATH_BYTES:
        raise DaemonError(f"socket path {path} is too long for a Unix socket (max {_MAX_PATH_BYTES} bytes)")
    _prepare_dir(path.parent, shared)
    _clear_stale(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o111 if shared else 0o177)
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


def check_socket_path(path: Path, uid: int | None = None) -> None:
    """Fail early, before the model loads, for a socket path that :func:`bind_unix_socket` would refuse.

    The same checks (length, private directory, a live server answering, not a socket),
    without binding; a stale socket from a crash is removed as the bind would. A missing
    directory is left to the bind, which creates it with the mode the server needs (0711
    when other uids are bound).
    """
    if len(os.fsencode(path)) > _MAX_PATH_BYTES:
        raise DaemonError(f"socket path {path} is too long for a Unix socket (max {_MAX_PATH_BYTES} bytes)")
    uid = os.geteuid() if uid is None else uid
    if not path.parent.exists():
        check_dir_chain(path.parent, uid)  # the folders above that exist must already be safe
        return
    _prepare_dir(path.parent, uid=uid)
    _clear_stale(path)


def unreachable_for(path: Path, uids: Iterable[int]) -> dict[int, str]:
    """For each uid that cannot connect to the socket at ``path``: the first thing in its way.

    Connecting needs search (x) permission on every folder above the socket and write
    permission on the socket file, judged by owner, group (the uid's groups from the
    password and group databases) and other bits. ACLs are not read, so this can only
    warn, never refuse. Root passes everything.
    """
    out: dict[int, str] = {}
    for uid in uids:
        if uid == 0:
            continue
        groups = _groups_of(uid)
        for part in [*reversed(path.parents), path]:
            need = 0o2 if part == path else 0o1
            why = _denies(part, uid, groups, need)
            if why is not None:
                out[uid] = why
                break
    return out


def _groups_of(uid: int) -> set[int]:
    try:
        user = pwd.getpwuid(uid)
    except KeyError:  # no passwd entry: only the "other" bits can let it in
        return set()
    try:
        return set(os.getgrouplist(user.pw_name, user.pw_gid))
    except OSError:
        return {user.pw_gid, *(g.gr_gid for g in grp.getgrall() if user.pw_name in g.gr_mem)}


def _denies(part: Path, uid: int, groups: set[int], need: int) -> str | None:
    """Why ``uid`` lacks ``need`` (x = 1, w = 2, in "other" position) on ``part``; None when it has it."""
    try:
        st = os.stat(part)
    except OSError as exc:
        return f"{part} ({exc.strerror})"
    mode = stat.S_IMODE(st.st_mode)
    shift = 6 if st.st_uid == uid else 3 if st.st_gid in groups else 0
    return None if mode & (need << shift) else f"{part} (mode {mode:04o}, owner uid {st.st_uid})"
