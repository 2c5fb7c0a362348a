"""memoryd.daemon.sdnotify: the notify and socket-activation protocols, against real sockets."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from memoryd.daemon import sdnotify
from memoryd.indexer.errors import DaemonError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def receiver(short_dir: Path):
    """A datagram socket standing in for systemd's notify socket; yields (env, recv)."""
    path = short_dir / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(5.0)

    def recv() -> str:
        return sock.recv(4096).decode()

    try:
        yield {"NOTIFY_SOCKET": str(path)}, recv
    finally:
        sock.close()


def test_unset_or_empty_notify_socket_is_a_quiet_no_op():
    with capture_logs() as logs:
        assert sdnotify.notify("READY=1", {}) is False
        assert sdnotify.ready({"NOTIFY_SOCKET": ""}) is False
        assert sdnotify.watchdog_ping({}) is False
    assert logs == []


def test_messages_reach_the_socket(receiver):
    env, recv = receiver
    assert sdnotify.ready(env) is True
    assert recv() == "READY=1"
    assert sdnotify.status("indexing 3 files", env) is True
    assert recv() == "STATUS=indexing 3 files"
    assert sdnotify.watchdog_ping(env) is True
    assert recv() == "WATCHDOG=1"
    assert sdnotify.stopping(env) is True
    assert recv() == "STOPPING=1"
    assert sdnotify.extend_timeout(2.5, env) is True
    assert recv() == "EXTEND_TIMEOUT_USEC=2500000"


def test_ready_with_status_is_one_datagram(receiver):
    env, recv = receiver
    assert sdnotify.ready(env, "serving 12 files")
    assert recv() == "READY=1\nSTATUS=serving 12 files"


def test_status_newlines_cannot_inject_assignments(receiver):
    env, recv = receiver
    sdnotify.status("evil.md\nREADY=1", env)
    assert recv() == "STATUS=evil.md READY=1"


def test_abstract_namespace_address():
    name = f"md-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0" + name)
        sock.settimeout(5.0)
        assert sdnotify.watchdog_ping({"NOTIFY_SOCKET": "@" + name}) is True
        assert sock.recv(100) == b"WATCHDOG=1"


def test_send_failure_returns_false_and_is_logged_once(short_dir):
    env = {"NOTIFY_SOCKET": str(short_dir / f"gone-{uuid.uuid4().hex[:8]}")}
    with capture_logs() as logs:
        assert sdnotify.watchdog_ping(env) is False
        assert sdnotify.watchdog_ping(env) is False
    failures = [e for e in logs if e["event"] == "sdnotify.send_failed"]
    assert len(failures) == 1
    assert failures[0]["notify_socket"] == env["NOTIFY_SOCKET"]
    assert "FileNotFoundError" in failures[0]["error"]


def test_unsupported_address_kind_is_refused_without_raising():
    env = {"NOTIFY_SOCKET": f"vsock:2:{uuid.uuid4().int % 60000}"}
    with capture_logs() as logs:
        assert sdnotify.ready(env) is False
    assert [e["event"] for e in logs] == ["sdnotify.send_failed"]


def test_extend_timeout_rejects_non_positive():
    with pytest.raises(ValueError, match="seconds must be > 0"):
        sdnotify.extend_timeout(0, {})


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"WATCHDOG_USEC": "30000000"}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid() + 1)}, None),
        ({"WATCHDOG_USEC": "500000"}, 0.25),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "thirty"}, None),
    ],
)
def test_watchdog_interval(env, expected):
    assert sdnotify.watchdog_interval_s(env) == expected


def test_watchdog_interval_for_an_explicit_pid():
    env = {"WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "4242"}
    assert sdnotify.watchdog_interval_s(env, pid=4242) == 1.0
    assert sdnotify.watchdog_interval_s(env, pid=4243) is None


def test_notifier_snapshots_its_environment(receiver):
    env, recv = receiver
    mutable = {**env, "WATCHDOG_USEC": "20000000"}
    notifier = sdnotify.SystemdNotifier(mutable)
    mutable.clear()
    assert notifier.enabled
    assert notifier.watchdog_interval_s == 10.0
    assert notifier.ready("up")
    assert recv() == "READY=1\nSTATUS=up"
    assert notifier.status("busy") and recv() == "STATUS=busy"
    assert notifier.watchdog_ping() and recv() == "WATCHDOG=1"
    assert notifier.stopping() and recv() == "STOPPING=1"


def test_notifier_outside_systemd_is_disabled():
    notifier = sdnotify.SystemdNotifier({})
    assert not notifier.enabled
    assert notifier.watchdog_interval_s is None
    assert notifier.ready() is False


@pytest.mark.parametrize(
    "env",
    [{}, {"LISTEN_FDS": "2"}, {"LISTEN_PID": str(os.getpid() + 1), "LISTEN_FDS": "2"}],
)
def test_listen_fds_not_for_us(env):
    assert sdnotify.listen_fds(env) == []


def test_listen_fds_zero():
    assert sdnotify.listen_fds({"LISTEN_PID": str(os.getpid()), "LISTEN_FDS": "0"}) == []


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"LISTEN_PID": "me", "LISTEN_FDS": "1"}, "LISTEN_PID"),
        ({"LISTEN_FDS": "one"}, "LISTEN_FDS"),
        ({"LISTEN_FDS": "-1"}, "LISTEN_FDS"),
        ({"LISTEN_FDS": "2", "LISTEN_FDNAMES": "a"}, "LISTEN_FDNAMES"),
    ],
)
def test_listen_fds_malformed_variables_name_the_variable(env, names):
    env = {"LISTEN_PID": str(os.getpid()), **env}
    with pytest.raises(DaemonError, match=names):
        sdnotify.listen_fds_with_names(env)


# Runs in a child: moves the inherited fds onto 3, 4, ... exactly as systemd
# does, sets LISTEN_* for its own pid, then exec()s (same pid) the check.
_WRAPPER = """
import fcntl, os, sys
high = [fcntl.fcntl(int(fd), fcntl.F_DUPFD, 100) for fd in sys.argv[2:]]
for fd in sys.argv[2:]:
    os.close(int(fd))
for i, fd in enumerate(high):
    os.dup2(fd, 3 + i)  # inheritable, like systemd's
    os.close(fd)
os.environ.update(LISTEN_PID=str(os.getpid()), LISTEN_FDS=str(len(high)),
                  LISTEN_FDNAMES="memoryd:extra")
os.execv(sys.executable, [sys.executable, "-c", sys.argv[1]])
"""

_CHECK = """
import fcntl, json, os, socket
from memoryd.daemon.sdnotify import listen_fds_with_names
pairs = listen_fds_with_names(os.environ)
cloexec = [bool(fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC) for fd, _ in pairs]
listener = socket.socket(fileno=pairs[0][0])
conn, _ = listener.accept()
conn.sendall(b"hello from fd 3")
conn.close()
print(json.dumps({"pairs": pairs, "cloexec": cloexec, "family": int(listener.family)}))
"""


@pytest.mark.slow
def test_listen_fds_adopts_a_really_inherited_listener(short_dir):
    path = short_dir / "memoryd.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    extra = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    with listener, extra:
        listener.bind(str(path))
        listener.listen()
        fds = (listener.fileno(), extra.fileno())
        child = subprocess.Popen(
            [sys.executable, "-c", _WRAPPER, _CHECK, *map(str, fds)],
            pass_fds=fds, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
                client.settimeout(20.0)
                client.connect(str(path))
                greeting = client.recv(100)
            out, err = child.communicate(timeout=20)
        finally:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    assert greeting == b"hello from fd 3"
    report = json.loads(out)
    assert report["pairs"] == [[3, "memoryd"], [4, "extra"]]
    assert report["cloexec"] == [True, True]
    assert report["family"] == socket.AF_UNIX


@pytest.mark.slow
def test_listen_fds_announced_but_not_open_raises():
    code = (
        "import os\n"
        "try:\n    os.close(3)\nexcept OSError:\n    pass\n"
        "from memoryd.daemon.sdnotify import listen_fds\n"
        "from memoryd.indexer.errors import DaemonError\n"
        "try:\n"
        "    listen_fds({'LISTEN_PID': str(os.getpid()), 'LISTEN_FDS': '1'})\n"
        "except DaemonError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert "fd 3 announced by LISTEN_FDS is not open" in done.stdout
