"""``memoryd ui`` against other local users (issue #38, items 6 and 17).

6: the browser was started with the token URL as an argument (``/proc/PID/cmdline`` is
readable by every local user). Now it gets a ``file://`` URL of a 0600 page that forwards it,
removed once the token has reached the server. (The port-bound cookie: tests/ui/test_ui_http.py.)
17: half-sent requests held the UI's connections forever and nothing bounded them. Now each
request has a deadline and past a cap the connection that waited longest is closed.
"""

from __future__ import annotations

import os
import re
import select
import socket
import stat
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("jinja2", reason="the ui's dependencies are missing from this venv")

from memoryd.daemon.ui import limits
from memoryd.daemon.ui.launch import Launcher
from memoryd.daemon.ui.peers import tcp_peer_uid
from memoryd.daemon.ui.server import build
from tests.helpers import wait_for

URL = re.compile(r"^memoryd ui: (http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+))$", re.M)
FAKE_BROWSER = "#!/bin/sh\nprintf '%s\\n' \"$@\" > {out}.tmp && mv {out}.tmp {out}\n"


# -- item 6: the token never goes on a command line ----------------------------------------------

def test_the_browser_gets_a_private_file_not_the_token(tmp_path: Path, short_dir: Path) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    argv_file = tmp_path / "browser-argv"
    browser = tmp_path / "browser"
    browser.write_text(FAKE_BROWSER.format(out=argv_file))
    browser.chmod(0o700)
    env = {**os.environ, "DISPLAY": ":99", "WAYLAND_DISPLAY": "", "BROWSER": str(browser),
           "XDG_RUNTIME_DIR": str(runtime)}
    proc = subprocess.Popen([sys.executable, "-m", "memoryd.daemon.cli", "ui", "--socket", str(short_dir / "n.sock")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        m = URL.match(proc.stdout.readline().strip())
        assert m is not None
        url, token = m.group(1), m.group(3)
        wait_for(argv_file.exists, timeout=20, what="the fake browser to run")
        argv = argv_file.read_text()
        assert token not in argv  # what every local user could read in /proc/PID/cmdline
        (given,) = argv.split()
        assert given.startswith(f"file://{runtime}/memoryd-ui-") and given.endswith(".html")
        page = Path(given.removeprefix("file://"))
        assert stat.S_IMODE(page.stat().st_mode) == 0o600 and page.stat().st_uid == os.geteuid()
        assert f'url={url.replace("&", "&amp;")}"' in page.read_text()  # it forwards to the token URL
        with urllib.request.urlopen(url.replace("/?", "/static/ui.js?"), timeout=10) as r:  # the browser, following
            assert r.status == 200
        wait_for(lambda: not page.exists(), timeout=10, what="the page to be removed once used")
    finally:
        proc.kill()
        proc.communicate(timeout=10)


def test_the_launcher_file_is_private_and_removed(tmp_path: Path) -> None:
    launcher = Launcher({"XDG_RUNTIME_DIR": str(tmp_path)})
    uri = launcher.write("http://127.0.0.1:1/?token=a&b=<c>")
    assert launcher.path is not None and uri == launcher.path.as_uri()
    assert stat.S_IMODE(launcher.path.stat().st_mode) == 0o600
    assert "token=a&amp;b=&lt;c&gt;" in launcher.path.read_text()  # escaped into the page
    path = launcher.path
    launcher.remove()
    launcher.remove()  # twice is fine (the first token request, then the stop)
    assert not path.exists()


# -- item 17: half-sent requests cannot hold the UI -------------------------------------------------

@pytest.fixture
def ui_server(short_dir: Path, request: pytest.FixtureRequest,
              monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[int, str]]:
    kw: dict[str, Any] = dict(getattr(request, "param", {}))
    if kw.pop("h11", False):  # uvicorn's fallback parser, where httptools is missing
        from uvicorn.protocols.http.h11_impl import H11Protocol

        monkeypatch.setattr(limits, "_base", lambda: H11Protocol)
    server, sock, url = build(short_dir / "none.sock", 0, **kw)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="ui-limits-server")
    thread.start()
    try:
        wait_for(lambda: server.started, timeout=20, what="the ui server")
        yield sock.getsockname()[1], url
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()
        server.config.app.state.ui.close()


def _half_sent(port: int, head: bytes = b"") -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    if head:
        s.sendall(head)
    return s


def _closed_by_server(s: socket.socket) -> bool:
    readable, _, _ = select.select([s], [], [], 0)
    if not readable:
        return False
    try:
        return s.recv(65536) == b""
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("ui_server", [{"request_timeout_s": 0.5}, {"request_timeout_s": 0.5, "h11": True}],
                         indirect=True)
def test_a_half_sent_request_or_a_silent_connection_is_closed_at_its_deadline(ui_server: tuple[int, str]) -> None:
    port, _url = ui_server
    head = _half_sent(port, f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode())
    silent = _half_sent(port)
    body = _half_sent(port, f"POST /forget HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 100\r\n\r\nab"
                      .encode())
    try:
        for s in (head, silent, body):
            wait_for(lambda s=s: _closed_by_server(s), timeout=15, what="the server to close it")
    finally:
        for s in (head, silent, body):
            s.close()


@pytest.mark.parametrize("ui_server", [{"request_timeout_s": 60.0, "max_connections": 20},
                                       {"request_timeout_s": 60.0, "max_connections": 20, "h11": True}], indirect=True)
def test_many_half_sent_connections_leave_room_for_a_valid_request(ui_server: tuple[int, str]) -> None:
    port, url = ui_server
    flood = [_half_sent(port, f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()) for _ in range(60)]
    try:
        # no token is needed to flood; the owner still gets in (no daemon here: the static script answers)
        with urllib.request.urlopen(url.replace("/?", "/static/ui.js?"), timeout=20) as r:
            assert r.status == 200
        closed: set[int] = set()

        def enough_closed() -> bool:
            closed.update(i for i, s in enumerate(flood) if i not in closed and _closed_by_server(s))
            return len(closed) >= len(flood) - 20

        wait_for(enough_closed, timeout=15, what="the oldest half-sent connections to be closed")
    finally:
        for s in flood:
            s.close()



# -- only the owner's connections are served (the cookie replayed by another uid) --------------------

PEEK = r"""
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=20)
s.sendall(("GET " + sys.argv[2] + " HTTP/1.1\r\nHost: 127.0.0.1:" + sys.argv[1] + "\r\nConnection: close\r\n\r\n")
          .encode())
try:
    data = s.recv(65536)
except ConnectionResetError:
    data = b""
print(repr(data[:12]))
"""


def test_the_peer_uid_is_read_from_the_kernel_table(tmp_path: Path) -> None:
    table = tmp_path / "tcp"
    table.write_text("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt uid timeout inode\n"
                     "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1\n"
                     "   1: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1001        0 2\n"
                     "   2: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 3\n")
    assert tcp_peer_uid(("127.0.0.1", 0xD431), ("127.0.0.1", 0x1F90), [str(table)]) == 1001
    assert tcp_peer_uid(("127.0.0.1", 0xD432), ("127.0.0.1", 0x1F90), [str(table)]) is None


def test_our_own_connection_is_found(ui_server: tuple[int, str]) -> None:
    port, _url = ui_server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        assert tcp_peer_uid(s.getsockname()[:2], ("127.0.0.1", port)) == os.geteuid()


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="creating a second user needs root")
def test_another_users_connection_gets_no_answer_even_with_the_token(ui_server: tuple[int, str]) -> None:
    import pwd
    import secrets
    import shutil

    from tests.e2e.test_second_uid import TOOLS, _as, _interpreter, _run

    if any(shutil.which(t) is None for t in TOOLS):
        pytest.skip(f"needs {', '.join(TOOLS)}")
    port, url = ui_server
    target = url.split(str(port), 1)[1].replace("/?", "/static/ui.js?")  # a valid token: a replayed cookie alike
    name = f"mdtest{secrets.token_hex(4)}"
    if _run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name]).returncode != 0:
        pytest.skip("useradd failed")
    try:
        other = pwd.getpwnam(name)
        res = _run([*_as(other), _interpreter(other), "-I", "-c", PEEK, str(port), target])
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == "b''"  # closed unanswered
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{target}", timeout=10) as r:
            assert r.status == 200  # the owner is served
    finally:
        _run(["userdel", name])
