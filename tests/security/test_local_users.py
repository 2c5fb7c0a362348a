"""Other local users (issue #38, items 7 and 13): a socket folder or a config file they prepared.

Tests run as root here, so ownership is shown with ``os.chown`` to uid 65534 (nobody)
and with the injectable ``uid`` of the check functions; the last test runs a fake daemon
as a real second user (``useradd``), as the red-team script did.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from memoryd.daemon.client.rpc_client import Client
from memoryd.daemon.rpc.sockpath import UnsafeSocketDir, bind_unix_socket, check_dir_chain, check_socket_path
from memoryd.indexer import config as configmod
from memoryd.indexer.errors import ConfigError, UntrustedListenerError
from memoryd.indexer.paths import client_daemon_uid, client_socket_path
from memoryd.indexer.settings.trust import check_config_file
from tests.e2e.test_second_uid import TOOLS, _as, _interpreter, other_user  # noqa: F401 (other_user: a fixture)

ME = os.geteuid()
NOBODY = 65534


# -- item 7: the socket folder ----------------------------------------------------------------

def _foreign_fallback(short_dir: Path, mode: int) -> Path:
    """``/tmp/memoryd-UID`` as another user would prepare it before we start."""
    base = short_dir / f"memoryd-{ME}"
    base.mkdir()
    os.chmod(base, mode)
    os.chown(base, NOBODY, NOBODY)
    return base


@pytest.mark.skipif(ME != 0, reason="chown to another uid needs root")
def test_a_fallback_folder_another_user_made_is_refused_at_start(short_dir: Path) -> None:
    base = _foreign_fallback(short_dir, 0o777)
    sock = base / "memoryd" / "memoryd.sock"
    with pytest.raises(UnsafeSocketDir, match=f"{base} .*belongs to uid {NOBODY}"):
        check_socket_path(sock)
    with pytest.raises(UnsafeSocketDir, match=str(base)):
        bind_unix_socket(sock)
    assert not (base / "memoryd").exists()  # nothing of ours was created inside their folder


def test_a_folder_above_that_others_can_write_is_refused(short_dir: Path) -> None:
    base = short_dir / "shared"
    base.mkdir()
    os.chmod(base, 0o777)
    with pytest.raises(UnsafeSocketDir, match=f"{base} \\(mode 0777\\).*chmod go-w"):
        check_socket_path(base / "memoryd" / "memoryd.sock")


def test_the_check_takes_the_uid_to_compare_against(short_dir: Path) -> None:
    """Our own private folder is refused for any other expected owner (the seam the tests use)."""
    sock_dir = short_dir / "run"
    sock_dir.mkdir(mode=0o700)
    check_dir_chain(sock_dir, ME)
    with pytest.raises(UnsafeSocketDir, match=f"belongs to uid {ME}, not to us \\(uid {NOBODY}\\)"):
        check_socket_path(sock_dir / "memoryd.sock", uid=NOBODY)


@pytest.mark.skipif(ME != 0, reason="a root-owned sticky folder, as /tmp is")
def test_a_sticky_root_folder_like_tmp_is_fine(short_dir: Path) -> None:
    os.chmod(short_dir, 0o1777)
    check_dir_chain(short_dir / f"memoryd-{ME}" / "memoryd", ME)


def _fake_daemon(path: Path) -> tuple[socket.socket, list[bytes], threading.Event]:
    """A listener that records what a client sends before it hangs up."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(path))
    srv.listen(1)
    got: list[bytes] = []
    done = threading.Event()

    def serve() -> None:
        conn, _ = srv.accept()
        conn.settimeout(10)
        with conn:
            while data := conn.recv(65536):
                got.append(data)
        done.set()

    threading.Thread(target=serve, daemon=True).start()
    return srv, got, done


def test_a_client_sends_nothing_to_a_listener_of_another_uid(short_dir: Path) -> None:
    sock = short_dir / "memoryd.sock"
    srv, got, done = _fake_daemon(sock)
    try:
        with Client(sock, timeout=5, expect_uid=NOBODY) as client, pytest.raises(UntrustedListenerError) as err:
            client.call("remember", {"content": "the safe combination is 12-34-56"})
        assert done.wait(10)
        assert got == []
        msg = str(err.value)
        assert str(sock) in msg and f"served by uid {ME}" in msg and f"not by uid {NOBODY}" in msg
    finally:
        srv.close()


def test_the_daemon_uid_opt_in_is_read_from_the_config(tmp_path: Path) -> None:
    cfg = tmp_path / "memoryd.toml"
    cfg.write_text("[server]\ndaemon_uid = 1001\n", encoding="utf-8")
    assert client_daemon_uid(cfg, {}) == 1001
    assert configmod.load(cfg, {"HOME": str(tmp_path)}).server.daemon_uid == 1001
    cfg.write_text("[server]\n", encoding="utf-8")
    assert client_daemon_uid(cfg, {}) is None
    cfg.write_text("[server]\ndaemon_uid = -1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"server\.daemon_uid"):
        configmod.load(cfg, {"HOME": str(tmp_path)})
    with pytest.raises(ConfigError, match=r"server\.daemon_uid"):
        client_daemon_uid(cfg, {})


# -- item 13: the config file -------------------------------------------------------------------

def test_a_config_file_others_can_write_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "memoryd.toml"
    cfg.write_text('[embedding]\nprovider = "openai"\n', encoding="utf-8")
    os.chmod(cfg, 0o666)
    with pytest.raises(ConfigError, match=f"{cfg} \\(mode 0666\\).*chmod 600 {cfg}"):
        configmod.load(cfg, {"HOME": str(tmp_path)})
    with pytest.raises(ConfigError, match="chmod 600"):  # the clients read the socket key from it too
        client_socket_path(cfg, {})


def test_a_config_folder_others_can_write_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    cfg = folder / "memoryd.toml"
    cfg.write_text("", encoding="utf-8")
    os.chmod(cfg, 0o600)
    os.chmod(folder, 0o777)
    with pytest.raises(ConfigError, match=f"its folder {folder} \\(mode 0777\\).*chmod go-w {folder}"):
        configmod.load(cfg, {"HOME": str(tmp_path)})


@pytest.mark.skipif(ME != 0, reason="chown to another uid needs root")
def test_a_config_file_of_another_uid_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "memoryd.toml"
    cfg.write_text("", encoding="utf-8")
    os.chmod(cfg, 0o644)
    os.chown(cfg, NOBODY, NOBODY)
    with pytest.raises(ConfigError, match=f"{cfg}: it belongs to uid {NOBODY}"):
        configmod.load(cfg, {"HOME": str(tmp_path)})


def test_the_owner_check_takes_the_uid(tmp_path: Path) -> None:
    cfg = tmp_path / "memoryd.toml"
    cfg.write_text("", encoding="utf-8")
    os.chmod(cfg, 0o600)
    check_config_file(cfg, ME)
    if ME != 0:  # root is always accepted as an owner
        with pytest.raises(ConfigError, match=f"belongs to uid {ME}"):
            check_config_file(cfg, NOBODY)


def test_a_private_config_loads(tmp_path: Path) -> None:
    cfg = tmp_path / "memoryd.toml"
    cfg.write_text("", encoding="utf-8")
    os.chmod(cfg, 0o644)  # readable by others is fine: only writing decides where memories go
    configmod.load(cfg, {"HOME": str(tmp_path)})


# -- the red-team case, with a real second user ----------------------------------------------

FAKE = r"""
import os, socket, sys
d = sys.argv[1]
os.makedirs(d + "/memoryd", mode=0o755)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(d + "/memoryd/memoryd.sock")
s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
c.settimeout(20)
n = 0
while True:
    part = c.recv(65536)
    if not part:
        break
    n += len(part)
print(n, flush=True)
"""


@pytest.mark.slow
@pytest.mark.skipif(ME != 0, reason="creating a second user needs root")
@pytest.mark.skipif(any(shutil.which(x) is None for x in TOOLS), reason=f"needs {', '.join(TOOLS)}")
def test_a_fake_daemon_of_another_user_in_the_tmp_fallback_gets_nothing(
    short_dir: Path, other_user: pwd.struct_passwd,  # noqa: F811 (the fixture imported above)
) -> None:
    other = other_user
    os.chmod(short_dir, 0o1777)  # a /tmp of our own
    base = short_dir / f"memoryd-{ME}"
    base.mkdir()
    os.chown(base, other.pw_uid, other.pw_gid)
    python = _interpreter(other)
    proc = subprocess.Popen([shutil.which("setpriv") or "setpriv", *_as(other)[1:], python, "-I", "-c", FAKE,
                             str(base)], stdout=subprocess.PIPE, text=True, env={"PATH": "/usr/bin:/bin"})
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        sock = base / "memoryd" / "memoryd.sock"
        with pytest.raises(UnsafeSocketDir, match=str(base)):
            check_socket_path(sock)  # our daemon refuses to start there
        with Client(sock, timeout=5) as client, pytest.raises(UntrustedListenerError, match=str(sock)):
            client.call("remember", {"content": "the safe combination is 12-34-56"})
        out, _ = proc.communicate(timeout=20)
        assert out.strip() == "0"  # it received not one byte
    finally:
        proc.kill()
        proc.wait(timeout=10)
