"""Files and sockets are ours only (issue "Trust", reproduction 7).

A socket path inside a shared 1777 directory used to turn that directory into
0700; a pre-existing data directory was not checked and the index, its WAL and
the vector snapshot were created 0644.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from memoryd.daemon.private import PRIVATE_UMASK, check_data_dir, set_private_umask
from memoryd.daemon.rpc.server import SocketServer
from memoryd.daemon.rpc.sockpath import UnsafeSocketDir
from tests.helpers import running_daemon, socket_server

REPO = Path(__file__).resolve().parents[2]


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _server(path: Path) -> SocketServer:
    return socket_server(path, {"ping": lambda params, peer: "pong"})


def test_socket_in_a_shared_sticky_dir_is_refused_and_the_dir_left_alone(short_dir: Path) -> None:
    shared = short_dir / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp
    with pytest.raises(UnsafeSocketDir) as err:
        _server(shared / "m.sock").start()
    assert str(shared) in str(err.value) and "1777" in str(err.value)
    assert _mode(shared) == 0o1777, "a directory memoryd did not create must never be chmod-ed"
    assert not (shared / "m.sock").exists()


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_group_or_world_writable_dir_is_refused(short_dir: Path, mode: int) -> None:
    d = short_dir / "open"
    d.mkdir()
    os.chmod(d, mode)
    with pytest.raises(UnsafeSocketDir, match="other users can write"):
        _server(d / "m.sock").start()
    assert _mode(d) == mode


def test_home_like_dir_is_used_but_not_tightened(short_dir: Path) -> None:
    home = short_dir / "home"
    home.mkdir()
    os.chmod(home, 0o755)  # `--socket ~/m.sock`
    server = _server(home / "m.sock")
    server.start()
    try:
        assert _mode(home) == 0o755 and _mode(home / "m.sock") == 0o600
    finally:
        server.stop()


def test_missing_dirs_are_created_private(short_dir: Path) -> None:
    server = _server(short_dir / "a" / "b" / "m.sock")
    with _umask(0):
        server.start()
    try:
        assert _mode(short_dir / "a") == 0o700 and _mode(short_dir / "a" / "b") == 0o700
        assert _mode(short_dir / "a" / "b" / "m.sock") == 0o600
    finally:
        server.stop()


def test_memoryd_run_refuses_a_shared_socket_dir_with_exit_3(tmp_path: Path, short_dir: Path) -> None:
    shared = short_dir / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    (tmp_path / "root").mkdir()
    cfg = tmp_path / "memoryd.toml"
    cfg.write_text('[embedding]\nprovider = "hash"\n', encoding="utf-8")
    res = subprocess.run(
        [sys.executable, "-m", "memoryd.daemon.cli", "run", "--config", str(cfg),
         "--socket", str(shared / "memoryd.sock"),
         "--root", str(tmp_path / "root"), "--data-dir", str(tmp_path / "data")],
        cwd=REPO, capture_output=True, text=True, timeout=120, env={**os.environ, "NOTIFY_SOCKET": ""},
    )
    assert res.returncode == 3, res.stderr[-2000:]
    assert f"refusing the socket directory {shared}" in res.stderr
    assert _mode(shared) == 0o1777


def _files(data: Path) -> dict[str, int]:
    return {str(p.relative_to(data)): _mode(p) for p in data.rglob("*") if p.is_file()}


@pytest.mark.parametrize("mask", [0o022, 0o000])
def test_every_data_file_is_0600_whatever_the_umask(tmp_path: Path, short_dir: Path, mask: int) -> None:
    files = {"MEMORY.md": "# Memory\n\n- The user prefers Neovim.\n"}
    with _umask(mask), running_daemon(tmp_path, short_dir / "m.sock", files) as (d, client, _root):
        client.call("remember", {"content": "The team deploys on Tuesdays after the standup."})
        task = d.worker.call(lambda: d.index.save(force=True))
        task.result(30)
        while_open = _files(d.cfg.data_dir)
    after = _files(tmp_path / "data")
    for name in ("index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm", "memoryd.lock", "audit.jsonl"):
        assert name in while_open, sorted(while_open)
    assert any(n.startswith("vectors.faiss") for n in after), sorted(after)
    loose = {n: oct(m) for n, m in {**while_open, **after}.items() if m & 0o077}
    assert not loose, f"files readable by others under umask {mask:03o}: {loose}"
    assert _mode(tmp_path / "data") == 0o700


def test_sqlite_wal_and_shm_follow_the_database_mode(tmp_path: Path) -> None:
    from memoryd.indexer.storage.embedded.store import connect

    with _umask(0):
        conn = connect(tmp_path / "x.sqlite3")
        conn.execute("CREATE TABLE t (a)")
        conn.execute("INSERT INTO t VALUES (1)")
        modes = {p.name: _mode(p) for p in tmp_path.iterdir()}
        conn.close()
    assert modes == {"x.sqlite3": 0o600, "x.sqlite3-wal": 0o600, "x.sqlite3-shm": 0o600}


def test_permissive_data_dir_is_reported_not_changed_and_old_files_tightened(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    os.chmod(data, 0o755)
    old = data / "index.sqlite3"
    old.write_bytes(b"")
    os.chmod(old, 0o644)  # left by an older memoryd
    notes = data / "notes.txt"  # not a memoryd file: never touched
    notes.write_text("mine")
    os.chmod(notes, 0o644)
    with capture_logs() as logs:
        fixed = check_data_dir(data)
    assert fixed == [old] and _mode(old) == 0o600 and _mode(notes) == 0o644
    assert _mode(data) == 0o755
    warn = [e for e in logs if e["event"] == "datadir.permissive"]
    assert warn and warn[0]["dir"] == str(data) and warn[0]["mode"] == "0755"


def test_daemon_start_reports_a_permissive_data_dir(tmp_path: Path, short_dir: Path) -> None:
    (tmp_path / "data").mkdir()
    os.chmod(tmp_path / "data", 0o750)
    with capture_logs() as logs, running_daemon(tmp_path, short_dir / "m.sock", {"a.md": "# A\n\n- one fact\n"}):
        pass
    assert any(e["event"] == "datadir.permissive" and e["dir"] == str(tmp_path / "data") for e in logs)
    assert _mode(tmp_path / "data") == 0o750


def test_a_symlink_named_like_a_data_file_is_not_followed(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("x")
    os.chmod(victim, 0o644)
    (data / "audit.jsonl.1").symlink_to(victim)
    assert check_data_dir(data) == [] and _mode(victim) == 0o644


def test_memoryd_run_sets_a_private_umask() -> None:
    old = set_private_umask()
    try:
        assert os.umask(PRIVATE_UMASK) == PRIVATE_UMASK == 0o077
    finally:
        os.umask(old)
