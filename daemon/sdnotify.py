"""The systemd service protocols memoryd speaks, without libsystemd.

Two protocols, both defined by systemd and stable for a decade:

* **notify** (``sd_notify(3)``): one datagram of newline-separated
  ``KEY=VALUE`` lines to the ``AF_UNIX`` socket named by ``$NOTIFY_SOCKET``
  (a path, or ``@name`` for the abstract namespace). ``Type=notify`` waits for
  ``READY=1``; ``WatchdogSec=`` expects ``WATCHDOG=1`` at least every
  ``$WATCHDOG_USEC`` microseconds; ``STATUS=`` shows in ``systemctl status``.
* **socket activation** (``sd_listen_fds(3)``): systemd passes listening
  sockets as fds 3, 4, ... and says how many in ``$LISTEN_FDS``, for the pid in
  ``$LISTEN_PID``, named by ``$LISTEN_FDNAMES``: :func:`listen_fds`.

Every function takes the environment as a parameter (the caller passes
``os.environ``): no module reads environment variables on its own. Outside
systemd every notify call is a cheap no-op returning False, so the daemon calls
them unconditionally. A failed send is logged once per socket address and
never raises: losing a status line must not take the daemon down (a missed
``READY=1`` or watchdog ping is then reported by systemd itself).
"""

from __future__ import annotations

import fcntl
import os
import socket
import threading
from collections.abc import Mapping

import structlog

from memoryd.indexer.errors import DaemonError

__all__ = [
    "SD_LISTEN_FDS_START",
    "SystemdNotifier",
    "extend_timeout",
    "listen_fds",
    "listen_fds_with_names",
    "notify",
    "ready",
    "status",
    "stopping",
    "watchdog_interval_s",
    "watchdog_ping",
]

log = structlog.get_logger(__name__)

SD_LISTEN_FDS_START = 3  # the first fd systemd passes (after stdin, stdout, stderr)

# A send blocks only when systemd's receive queue is full (systemd stalled);
# bound it so a stuck manager cannot stall the watchdog thread for long.
_SEND_TIMEOUT_S = 2.0

# Addresses whose send failure was already logged: each is logged once per
# process, so a watchdog ping every 15 s cannot flood the journal.
_warned: set[str] = set()
_warned_lock = threading.Lock()


def notify(state: str, env: Mapping[str, str]) -> bool:
    """Send ``state`` (``KEY=VALUE`` lines) to ``$NOTIFY_SOCKET``.

    Returns True when the datagram was sent, False when ``$NOTIFY_SOCKET`` is
    unset or empty (not run by systemd) or the send failed (logged once per
    address as ``sdnotify.send_failed``). Never raises.
    """
    address = env.get("NOTIFY_SOCKET", "")
    if not address:
        return False
    return _send(address, state)


def ready(env: Mapping[str, str], status_text: str | None = None) -> bool:
    """Tell systemd start-up is complete (``READY=1``), optionally with a status line.

    Send it once the socket accepts connections: ``Type=notify`` units count
    as started only then, and ``WatchdogSec=`` is enforced from then on.
    """
    state = "READY=1" if status_text is None else f"READY=1\n{_status_line(status_text)}"
    return notify(state, env)


def status(text: str, env: Mapping[str, str]) -> bool:
    """Set the one-line status ``systemctl status`` shows (newlines become spaces)."""
    return notify(_status_line(text), env)


def stopping(env: Mapping[str, str]) -> bool:
    """Tell systemd shutdown has begun (``STOPPING=1``), so it does not count it as a crash."""
    return notify("STOPPING=1", env)


def watchdog_ping(env: Mapping[str, str]) -> bool:
    """Send the keep-alive ping (``WATCHDOG=1``); call every :func:`watchdog_interval_s`."""
    return notify("WATCHDOG=1", env)


def extend_timeout(seconds: float, env: Mapping[str, str]) -> bool:
    """Ask for ``seconds`` more before the start (or stop) timeout fires (``EXTEND_TIMEOUT_USEC``).

    For a start-up step that may outlast ``TimeoutStartSec=`` (a first model
    build); each call re-arms the extension from now. ``seconds`` must be > 0.
    """
    if not seconds > 0:
        raise ValueError(f"extend_timeout: seconds must be > 0, got {seconds!r}")
    return notify(f"EXTEND_TIMEOUT_USEC={int(seconds * 1_000_000)}", env)


def watchdog_interval_s(env: Mapping[str, str], pid: int | None = None) -> float | None:
    """Seconds between watchdog pings, or None when no watchdog is expected of us.

    Half of ``$WATCHDOG_USEC`` (systemd's own recommendation, leaving a full
    half-period of slack), and only when ``$WATCHDOG_PID`` is absent or equals
    ``pid`` (default: this process), so a child that inherited the variables
    does not ping on its parent's behalf. A malformed or non-positive value is
    logged (``sdnotify.bad_watchdog_env``) and treated as no watchdog.
    """
    raw = env.get("WATCHDOG_USEC", "")
    if not raw:
        return None
    owner = env.get("WATCHDOG_PID", "")
    if owner and owner != str(os.getpid() if pid is None else pid):
        return None
    try:
        usec = int(raw)
    except ValueError:
        usec = 0
    if usec <= 0:
        log.warning("sdnotify.bad_watchdog_env", WATCHDOG_USEC=raw)
        return None
    return usec / 2 / 1_000_000


def listen_fds(env: Mapping[str, str], pid: int | None = None) -> list[int]:
    """The listening fds systemd passed us (socket activation), in order; [] if none.

    See :func:`listen_fds_with_names`, which this wraps. The daemon adopts the
    first one with ``socket.socket(fileno=fd)`` instead of binding the path,
    and must then never unlink the socket path (systemd owns it).
    """
    return [fd for fd, _name in listen_fds_with_names(env, pid)]


def listen_fds_with_names(env: Mapping[str, str], pid: int | None = None) -> list[tuple[int, str]]:
    """``(fd, name)`` for each fd passed by socket activation, fds counting from 3.

    Only when ``$LISTEN_PID`` equals ``pid`` (default: this process): the
    variables leak into children, whose fds 3.. are something else. Names come
    from ``$LISTEN_FDNAMES`` (``FileDescriptorName=``; ``"unknown"`` when it is
    unset). Each fd gets ``FD_CLOEXEC``, so processes we spawn do not inherit
    the listener. Raises :class:`DaemonError` naming the variable when the
    variables are malformed or an fd they announce is not open.
    """
    raw_pid = env.get("LISTEN_PID", "")
    if not raw_pid:
        return []
    if _parse_int("LISTEN_PID", raw_pid) != (os.getpid() if pid is None else pid):
        return []
    count = _parse_int("LISTEN_FDS", env.get("LISTEN_FDS", "0") or "0")
    if count < 0:
        raise DaemonError(f"socket activation: LISTEN_FDS={count} is negative")
    raw_names = env.get("LISTEN_FDNAMES")
    names = raw_names.split(":") if raw_names is not None and count else ["unknown"] * count
    if len(names) != count:
        raise DaemonError(
            f"socket activation: LISTEN_FDNAMES={raw_names!r} names {len(names)} fds, LISTEN_FDS={count}"
        )
    fds = list(range(SD_LISTEN_FDS_START, SD_LISTEN_FDS_START + count))
    for fd in fds:
        _set_cloexec(fd)
    return list(zip(fds, names, strict=True))


def _parse_int(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise DaemonError(f"socket activation: {name}={raw!r} is not an integer") from None


def _set_cloexec(fd: int) -> None:
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFD)
        fcntl.fcntl(fd, fcntl.F_SETFD, flags | fcntl.FD_CLOEXEC)
    except OSError as exc:
        raise DaemonError(f"socket activation: fd {fd} announced by LISTEN_FDS is not open ({exc})") from None


class SystemdNotifier:
    """The notify helpers bound to one environment (the daemon makes one with ``os.environ``).

    Reads the environment once, at construction, so later changes to it (a
    test, a child's setup) cannot redirect notifications. Thread-safe: each
    send uses its own short-lived socket.
    """

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = {k: env[k] for k in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID") if k in env}
        self.watchdog_interval_s = watchdog_interval_s(self._env)

    @property
    def enabled(self) -> bool:
        """True when run by systemd with a notify socket (else every call is a no-op)."""
        return bool(self._env.get("NOTIFY_SOCKET"))

    def notify(self, state: str) -> bool:
        return notify(state, self._env)

    def ready(self, status_text: str | None = None) -> bool:
        return ready(self._env, status_text)

    def status(self, text: str) -> bool:
        return status(text, self._env)

    def stopping(self) -> bool:
        return stopping(self._env)

    def watchdog_ping(self) -> bool:
        return watchdog_ping(self._env)

    def extend_timeout(self, seconds: float) -> bool:
        return extend_timeout(seconds, self._env)


def _status_line(text: str) -> str:
    # A newline would start a new assignment inside the datagram (e.g. a
    # file name containing "\nREADY=1"): flatten it.
    return "STATUS=" + " ".join(text.splitlines())


def _send(address: str, state: str) -> bool:
    if address.startswith("@"):
        target = "\0" + address[1:]  # abstract namespace
    elif address.startswith("/"):
        target = address
    else:  # e.g. "vsock:..." (systemd >= 253, for VMs): not a case memoryd meets
        _warn_once(address, f"unsupported NOTIFY_SOCKET address {address!r}")
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.settimeout(_SEND_TIMEOUT_S)
            sock.connect(target)
            sock.sendall(state.encode("utf-8"))
    except OSError as exc:
        _warn_once(address, f"{type(exc).__name__}: {exc}")
        return False
    return True


def _warn_once(address: str, error: str) -> None:
    with _warned_lock:
        if address in _warned:
            return
        _warned.add(address)
    log.warning("sdnotify.send_failed", notify_socket=address, error=error)
