"""``memoryd ui`` as a command: the URL it prints, loopback only, a token per start, Ctrl-C, a taken
port, and the CLI staying light (the ``ui`` extra is imported only by this command)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.daemon.client.cli import build_parser
from memoryd.daemon.client.install_hint import detect
from tests.helpers import wait_for

pytest.importorskip("jinja2", reason="the ui's dependencies are missing from this venv")

URL = re.compile(r"^memoryd ui: (http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]+))$", re.M)


class Started:
    def __init__(self, proc: subprocess.Popen[str], url: str, port: int, token: str) -> None:
        self.proc, self.url, self.port, self.token = proc, url, port, token


def _start(socket_path: Path, *extra: str) -> Started:
    env = {**os.environ, "DISPLAY": "", "WAYLAND_DISPLAY": ""}
    proc = subprocess.Popen([sys.executable, "-m", "memoryd.daemon.cli", "ui", "--socket", str(socket_path), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # printed before serving; a crash gives "" here
    m = URL.match(line.strip())
    if m is None:
        proc.kill()
        pytest.fail(f"no URL line: {line!r} {proc.communicate(timeout=10)}")
    return Started(proc, m.group(1), int(m.group(2)), m.group(3))


def _stop(s: Started) -> tuple[int, str]:
    if s.proc.poll() is None:
        s.proc.send_signal(signal.SIGINT)
    _, err = s.proc.communicate(timeout=20)
    return s.proc.returncode, err


@pytest.fixture
def started(short_dir: Path) -> Iterator[Started]:
    s = _start(short_dir / "none.sock", "--no-browser")
    try:
        yield s
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.communicate(timeout=10)


def _get(url: str, host: str | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _answers(url: str) -> bool:
    try:
        _get(url)
    except OSError:
        return False
    return True


def _listening(port: int) -> list[str]:
    """The local addresses listening on ``port`` (from /proc/net/tcp and tcp6)."""
    found = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        with open(table, encoding="ascii") as f:
            for row in f.read().splitlines()[1:]:
                local, state = row.split()[1], row.split()[3]
                address, hexport = local.split(":")
                if state == "0A" and int(hexport, 16) == port:
                    found.append(address)
    return found


def test_prints_a_loopback_url_with_a_token_and_listens_on_loopback_only(started: Started) -> None:
    wait_for(lambda: _answers(started.url), timeout=20, what="the ui server")
    assert _listening(started.port) == ["0100007F"]  # 127.0.0.1, and no IPv6 or wildcard socket
    status, body = _get(started.url)
    assert status == 503 and "memoryd is not running" in body  # the page says so; the server stays up
    assert _get(started.url.split("?")[0])[0] == 401
    assert _get(started.url, host="evil.example")[0] == 403
    code, err = _stop(started)
    assert code == 130  # Ctrl-C, as for every memoryd command
    assert started.token not in err  # no access log: the token stays out of the terminal


def test_each_start_gets_a_new_token(short_dir: Path) -> None:
    a = _start(short_dir / "none.sock", "--no-browser")
    b = _start(short_dir / "none.sock", "--no-browser")
    try:
        assert a.token != b.token and a.port != b.port
    finally:
        _stop(a)
        _stop(b)


def test_a_taken_port_exits_3_with_a_message(short_dir: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "memoryd.daemon.cli", "ui", "--no-browser", "--port", str(port),
                            "--socket", str(short_dir / "none.sock")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3
    assert f"cannot listen on 127.0.0.1:{port}" in r.stderr


def test_no_display_means_no_browser_and_says_so(short_dir: Path) -> None:
    s = _start(short_dir / "none.sock")  # no --no-browser, but DISPLAY is empty
    try:
        assert s.proc.stdout is not None
        rest = [s.proc.stdout.readline() for _ in range(3)]
        assert any("no display here" in line for line in rest)
    finally:
        _stop(s)


@pytest.mark.parametrize("argv", [["ui", "--port", "-1"], ["ui", "--port", "70000"], ["ui", "--port", "x"]])
def test_bad_ports_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2


def test_the_cli_does_not_import_the_ui() -> None:
    code = ("import sys, memoryd.daemon.client.cli as c; c.build_parser(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('starlette', 'uvicorn', 'jinja2', "
            "'markupsafe') or m.startswith('memoryd.daemon.ui')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_a_missing_dependency_names_the_command_for_this_install(tmp_path: Path, short_dir: Path) -> None:
    shadow = tmp_path / "shadow"
    (shadow / "jinja2").mkdir(parents=True)
    (shadow / "jinja2" / "__init__.py").write_text("raise ImportError('no jinja2 here', name='jinja2')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-m", "memoryd.daemon.cli", "ui", "--no-browser",
                        "--socket", str(short_dir / "x.sock")], capture_output=True, text=True, timeout=60, env=env)
    assert r.returncode == 3
    assert "'jinja2'" in r.stderr and "memoryd[ui]" not in r.stderr
    assert detect().command() in r.stderr  # this venv's own python -m pip (or uv pip), not a bare pip
