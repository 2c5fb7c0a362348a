"""The CLI as users run it: subprocesses, exit codes, human and JSON output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.daemon.client.render import parse_target, render_status
from memoryd.daemon.client.rpc_client import Client
from tests.helpers import listening, wait_for

REPO = Path(__file__).resolve().parents[2]


def memoryd(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    e["XDG_CONFIG_HOME"] = "/nonexistent-memoryd-test"
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "memoryd.daemon.cli", *args], cwd=REPO, env=e, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def hash_config(tmp_path: Path) -> Path:
    c = tmp_path / "c.toml"
    c.write_text('[embedding]\nprovider = "hash"\n')
    return c


@pytest.mark.slow
def test_index_then_offline_search(tmp_path: Path, hash_config: Path) -> None:
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "2024-05-01.md").write_text("# 2024-05-01\n\n- Chose PostgreSQL for the ledger.\n")
    (root / "bin.md").write_bytes(b"\x00\x01")
    data = tmp_path / "data"
    r = memoryd("index", "--config", str(hash_config), "--root", str(root), "--data-dir", str(data))
    assert r.returncode == 0, r.stderr
    assert "index: 1 files" in r.stdout and "1 skipped" in r.stdout
    assert oct(data.stat().st_mode & 0o777) == "0o700"
    s = memoryd("search", "--offline", "--config", str(hash_config), "--data-dir", str(data), "--json", "-k", "1",
                "--", "which database for the ledger")
    assert s.returncode == 0, s.stderr
    hit = json.loads(s.stdout)["hits"][0]
    assert hit["path"] == "memory/2024-05-01.md" and hit["start_line"] <= 3 <= hit["end_line"]
    human = memoryd("search", "--offline", "--config", str(hash_config), "--data-dir", str(data), "PostgreSQL")
    assert human.returncode == 0 and "memory/2024-05-01.md:" in human.stdout and "PostgreSQL" in human.stdout
    again = memoryd("index", "--config", str(hash_config), "--root", str(root), "--data-dir", str(data))
    assert "embedded 0" in again.stdout and "1 unchanged" in again.stdout


@pytest.mark.slow
def test_offline_search_without_an_index_says_so(tmp_path: Path, hash_config: Path) -> None:
    r = memoryd("search", "--offline", "--config", str(hash_config), "--data-dir", str(tmp_path / "none"), "x")
    assert r.returncode == 1 and "memoryd index" in r.stderr


def test_client_commands_without_daemon_exit_4_naming_the_socket(tmp_path: Path) -> None:
    sock = tmp_path / "nope.sock"
    for cmd in (["status"], ["search", "x"], ["reindex", "a.md"], ["get", "a.md"]):
        r = memoryd(*cmd, "--socket", str(sock))
        assert r.returncode == 4 and str(sock) in r.stderr and "memoryd run" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


def test_bad_config_file_is_a_startup_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[server]\nsocket = [\n")
    assert memoryd("status", "--config", str(bad)).returncode == 3
    assert memoryd("status", "--config", str(tmp_path / "missing.toml")).returncode == 3


def test_client_uses_the_socket_named_in_the_config(tmp_path: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text(f'[server]\nsocket = "{tmp_path}/from-config.sock"\n')
    r = memoryd("status", "--config", str(conf))
    assert r.returncode == 4 and "from-config.sock" in r.stderr


def test_parse_target() -> None:
    assert parse_target("a.md") == {"path": "a.md"}
    assert parse_target("memory/x.md:10-20") == {"path": "memory/x.md", "start_line": 10, "end_line": 20}
    assert parse_target("x.md:7") == {"path": "x.md", "start_line": 7, "end_line": 7}


@pytest.mark.slow
def test_sighup_adds_a_root(tmp_path: Path, short_dir: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "x.md").write_text("alpha note\n")
    (b / "y.md").write_text("beta note about zanzibar\n")
    conf = tmp_path / "c.toml"
    conf.write_text(f'[embedding]\nprovider = "hash"\n[watch]\nroots = ["{a}"]\n')
    sock = short_dir / "s.sock"
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    proc = subprocess.Popen([sys.executable, "-m", "memoryd.daemon.cli", "run", "--config", str(conf), "--data-dir",
                             str(tmp_path / "d"), "--socket", str(sock)], cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: listening(sock), what="socket")
        with Client(sock) as c:
            wait_for(lambda: c.call("status")["files"] == 1, what="first root indexed")
            conf.write_text(f'[embedding]\nprovider = "hash"\n[watch]\nroots = ["{a}", "{b}"]\n')
            proc.send_signal(signal.SIGHUP)
            wait_for(lambda: c.call("search", {"query": "zanzibar", "mode": "keyword"})["hits"], what="new root")
            assert {r["path"] for r in c.call("status")["roots"]} == {str(a), str(b)}
            conf.write_text(f'[embedding]\nprovider = "hash"\n[watch]\nroots = ["{b}"]\n')
            proc.send_signal(signal.SIGHUP)
            wait_for(lambda: c.call("status")["files"] == 1 and
                     not c.call("search", {"query": "alpha", "mode": "keyword"})["hits"], what="root dropped")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_status_table_says_how_queries_are_embedded() -> None:
    st = {"model": {"id": "multilingual-e5-small-q4:abc", "dim": 384, "queries": "int8"},
          "index": {"type": "flat", "vectors": 3}, "cache": {"entries": 3, "hits": 0, "misses": 3}}
    assert "multilingual-e5-small-q4:abc (384 d, int8 queries)" in render_status(st)
    older = {**st, "model": {"id": "m", "dim": 8}}  # a daemon from before the key existed
    assert "m (8 d, exact queries)" in render_status(older)
