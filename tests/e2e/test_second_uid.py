"""A real second uid against the real daemon: the socket's two locks, each shown to hold on its own.

``tests/daemon/test_server.py`` simulates a foreign peer by giving the server a
foreign *owner*. Here a throw-away system user (``useradd``, removed with
``userdel``) connects for real, through ``setpriv``, to an in-process daemon
run by root. Lock one is the 0700 socket directory: the user cannot even reach
the socket. Lock two is the ``SO_PEERCRED`` check: after the test loosens the
permissions (a simulated misconfiguration) the user connects, and the daemon
sends one JSON-RPC -32001 error and closes. The owner is served throughout.

Needs root, ``useradd``, ``userdel`` and ``setpriv``; skipped otherwise.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import running_daemon

TOOLS = ("useradd", "userdel", "setpriv")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="creating a second user needs root"),
    pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS), reason=f"needs {', '.join(TOOLS)}"),
]

# Runs as the other user, stdlib only: connect, send one request, report what happened as one JSON line.
CLIENT = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print(json.dumps({"connected": False, "errno": exc.errno, "error": type(exc).__name__}))
    sys.exit(0)
try:
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"status"}\n')
except OSError:
    pass  # refused before reading: the error line may still be waiting
buf = b""
while not buf.endswith(b"\n"):
    part = s.recv(65536)
    if not part:
        break
    buf += part
try:
    closed = "eof" if s.recv(1) == b"" else "open"
except ConnectionResetError:
    closed = "reset"  # closed with our request unread: Linux reports a reset, not an EOF
print(json.dumps({"connected": True, "reply": json.loads(buf) if buf else None, "closed": closed}))
"""


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``argv[0]`` resolved on our PATH; the child gets a bare environment (nothing of root's leaks in)."""
    exe = shutil.which(argv[0]) or argv[0]
    return subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=30, check=False,
                          env={"PATH": "/usr/bin:/bin"})


@pytest.fixture
def other_user() -> Iterator[pwd.struct_passwd]:
    """A fresh system user with no home and no login shell; deleted afterwards."""
    name = f"mdtest{secrets.token_hex(4)}"
    res = _run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name])
    if res.returncode != 0:
        pytest.skip(f"useradd {name} failed: {res.stderr.strip()}")
    try:
        yield pwd.getpwnam(name)
    finally:
        _run(["userdel", name])


def _interpreter(user: pwd.struct_passwd) -> str:
    """A Python the other user can execute (the venv's resolves under /root, which is 0700 here)."""
    for candidate in (sys.executable, "/usr/bin/python3"):
        if _run([*_as(user), candidate, "-I", "-c", "pass"]).returncode == 0:
            return candidate
    pytest.skip(f"no Python interpreter executable by uid {user.pw_uid}")


def _as(user: pwd.struct_passwd) -> list[str]:
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]


def _connect_as(user: pwd.struct_passwd, python: str, sock: Path) -> dict[str, Any]:
    res = _run([*_as(user), python, "-I", "-c", CLIENT, str(sock)])
    assert res.returncode == 0, res.stderr
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def test_second_uid_is_kept_out_by_the_directory_then_by_peercred(
    tmp_path: Path, short_dir: Path, other_user: pwd.struct_passwd,
) -> None:
    os.chmod(short_dir, 0o755)  # only the daemon's own socket directory may stand in the way
    sock = short_dir / "run" / "memoryd.sock"
    python = _interpreter(other_user)
    with running_daemon(tmp_path, sock, {"a.md": "# A\n\n- The deploy window is Tuesday.\n"}) as (_d, client, _root):
        default = _connect_as(other_user, python, sock)
        assert default == {"connected": False, "errno": 13, "error": "PermissionError"}

        os.chmod(sock.parent, 0o755)  # a misconfiguration: now only SO_PEERCRED protects the daemon
        os.chmod(sock, 0o666)
        loose = _connect_as(other_user, python, sock)
        assert loose["connected"] is True
        assert loose["reply"]["error"] == {
            "code": -32001, "message": f"permission denied: uid {other_user.pw_uid} is not allowed"}
        assert loose["reply"]["id"] is None
        assert loose["closed"] in ("eof", "reset"), "the daemon must close a refused connection"

        assert client.call("ping") is not None
        hits = client.call("search", {"query": "deploy window", "k": 3})["hits"]
        assert hits and hits[0]["path"] == "a.md"
