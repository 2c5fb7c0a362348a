"""The daemon in-process (hash embedder, real socket, real watcher) and as a subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.app import Daemon
from memoryd.daemon.client.rpc_client import Client, RpcClientError
from memoryd.indexer.errors import DaemonError, NotRunningError
from tests.helpers import listening, make_config, ready, running_daemon, wait_for

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def running(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Daemon, Client, Path]]:
    files = {"MEMORY.md": "# Memory\n\n- The user prefers Neovim.\n",
             "memory/2024-01-02.md": "# 2024-01-02\n\n- Met Alice about the budget.\n"}
    with running_daemon(tmp_path, short_dir / "run" / "m.sock", files) as started:
        yield started


def test_status_and_search_over_the_socket(running) -> None:
    d, client, root = running
    st = client.call("status")
    assert st["files"] == 2 and st["chunks"] >= 2 and st["model"]["id"] == "hash-64"
    assert st["model"]["queries"] == "exact"  # the hash embedder has no int8 twin
    assert st["roots"][0]["alive"] and st["roots"][0]["path"] == str(root)
    assert st["index"]["vectors"] == st["chunks"]
    sock = d.cfg.socket_path
    assert os.stat(sock).st_mode & 0o777 == 0o600 and os.stat(sock.parent).st_mode & 0o777 == 0o700
    res = client.call("search", {"query": "Neovim", "k": 2, "mode": "keyword"})
    assert res["hits"][0]["path"] == "MEMORY.md" and res["hits"][0]["start_line"] <= 3
    assert client.call("ping")["version"]


def test_a_save_becomes_searchable(running) -> None:
    _d, client, root = running
    (root / "memory" / "2024-01-03.md").write_text("# 2024-01-03\n\n- zebracorn000000017 spotted.\n")

    def found() -> bool:
        hits = client.call("search", {"query": "zebracorn000000017", "mode": "keyword"})["hits"]
        return any("zebracorn000000017" in h["text"] for h in hits)

    wait_for(found, what="new text searchable")
    # atomic rename-over save (VS Code / JetBrains style)
    tmp = root / "MEMORY.md.tmp"
    tmp.write_text("# Memory\n\n- The user now prefers Helix.\n")
    os.replace(tmp, root / "MEMORY.md")
    wait_for(lambda: client.call("search", {"query": "Helix", "mode": "keyword"})["hits"], what="rename-over")
    assert not client.call("search", {"query": "Neovim", "mode": "keyword"})["hits"]
    (root / "MEMORY.md").unlink()
    wait_for(lambda: not client.call("search", {"query": "Helix", "mode": "keyword"})["hits"], what="delete")


def test_change_made_right_after_start_is_not_lost(tmp_path: Path, short_dir: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for i in range(30):
        (root / f"n{i}.md").write_text(f"note {i} about gardening\n")
    cfg = make_config(root, tmp_path / "data", debounce_ms=50, max_delay_ms=500)
    cfg = replace(cfg, server=replace(cfg.server, socket=short_dir / "m.sock"))
    d = Daemon(cfg, env={})
    d.startup()
    try:
        (root / "n3.md").write_text("note 3 is now about quasarwhale\n")  # during the start-up reconcile
        with Client(cfg.socket_path) as c:
            wait_for(lambda: c.call("search", {"query": "quasarwhale", "mode": "keyword"})["hits"],
                     what="edit made during start-up")
    finally:
        d.shutdown()


def test_reindex_wait_get_and_errors(running) -> None:
    _d, client, root = running
    f = root / "memory" / "2024-01-02.md"
    f.write_text(f.read_text() + "- Decided to ship on Friday.\n")
    res = client.call("reindex", {"paths": [str(f)], "wait": True})
    assert res["done"] and res["files"] == 1
    got = client.call("get", {"path": "memory/2024-01-02.md", "start_line": 3, "end_line": 4})
    assert got["text"] == "- Met Alice about the budget.\n- Decided to ship on Friday.\n"
    assert client.call("reindex", {"wait": True})["done"]
    for params, code in [
        ({"path": "/etc/passwd"}, -32010),
        ({"path": "../../etc/passwd"}, -32024),  # ".." is refused before any lookup (docs/security/paths.md)
        ({"path": "MEMORY.md", "start_line": 0}, -32602),
    ]:
        with pytest.raises(RpcClientError) as err:
            client.call("get", params)
        assert err.value.code == code
    for params in [{}, {"query": ""}, {"query": "x", "k": 0}, {"query": "x", "mode": "fuzzy"}, {"query": "x", "z": 1}]:
        with pytest.raises(RpcClientError) as err:
            client.call("search", params)
        assert err.value.code == -32602
    with pytest.raises(RpcClientError) as err:
        client.call("reindex", {"paths": ["/nowhere/x.md"]})
    assert "not inside any memory root" in err.value.message


def test_second_daemon_on_same_socket_or_data_dir_refuses(running, tmp_path: Path) -> None:
    d, client, _root = running
    twin = Daemon(d.cfg, env={})
    with pytest.raises(DaemonError, match=r"in use|already running"):
        twin.startup()
    assert client.call("ping")  # the first one is untouched


def test_client_names_the_socket_when_daemon_is_down(short_dir: Path) -> None:
    with pytest.raises(NotRunningError, match=str(short_dir / "none.sock")):
        Client(short_dir / "none.sock").call("ping")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    env["XDG_CONFIG_HOME"] = "/nonexistent-memoryd-test"
    return env


@pytest.mark.slow
def test_subprocess_run_sigterm_exits_zero_and_removes_socket(tmp_path: Path, short_dir: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.md").write_text("hello world\n")
    conf = tmp_path / "c.toml"
    conf.write_text('[embedding]\nprovider = "hash"\n')
    sock = short_dir / "s.sock"
    cmd = [sys.executable, "-m", "memoryd.daemon.cli", "run", "--config", str(conf), "--root", str(root),
           "--data-dir", str(tmp_path / "data"), "--socket", str(sock)]
    proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: listening(sock), what="socket")
        with Client(sock) as c:
            wait_for(lambda: ready(c), what="ready")
        out = subprocess.run([sys.executable, "-m", "memoryd.daemon.cli", "search", "--socket", str(sock), "--json",
                              "hello"], cwd=REPO, env=_env(), capture_output=True, text=True, timeout=30)
        assert out.returncode == 0 and json.loads(out.stdout)["hits"][0]["path"] == "a.md"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        assert not sock.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
    down = subprocess.run([sys.executable, "-m", "memoryd.daemon.cli", "status", "--socket", str(sock)], cwd=REPO,
                          env=_env(), capture_output=True, text=True, timeout=30)
    assert down.returncode == 4 and str(sock) in down.stderr and "memoryd run" in down.stderr


@pytest.mark.slow
def test_startup_failure_has_its_own_exit_code(tmp_path: Path, short_dir: Path) -> None:
    conf = tmp_path / "c.toml"
    conf.write_text("[watch]\ndebounce_ms = 'soon'\n")
    r = subprocess.run([sys.executable, "-m", "memoryd.daemon.cli", "run", "--config", str(conf)], cwd=REPO,
                       env=_env(), capture_output=True, text=True, timeout=30)
    assert r.returncode == 3 and "watch.debounce_ms" in r.stderr


def test_context_over_the_socket_fits_the_budget(running) -> None:
    _d, client, _root = running
    out = client.call("context", {"query": "budget Alice", "max_tokens": 60})
    assert out["text"].startswith("## Relevant memories") and out["tokens"] <= 60
    assert any(s["path"] == "memory/2024-01-02.md" for s in out["sources"])
    assert "### memory/2024-01-02.md:" in out["text"]
    with pytest.raises(RpcClientError) as err:
        client.call("context", {"query": "x", "max_tokens": 2})
    assert err.value.code == -32602 and "max_tokens" in err.value.message


def test_namespaces_never_leak(running) -> None:
    _d, client, root = running
    for rel, text in {"peers/alice/MEMORY.md": "- Alice keeps her kayak in the garage.\n",
                      "groups/rowing/MEMORY.md": "- The rowing club keeps a kayak at the lake.\n",
                      "notes.md": "- The owner sold the old kayak.\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    client.call("reindex", {"wait": True})

    def paths(**params: Any) -> set[str]:
        res = client.call("search", {"query": "kayak", "k": 10, "mode": "keyword", **params})
        return {h["path"] for h in res["hits"]}

    assert paths() == {"peers/alice/MEMORY.md", "groups/rowing/MEMORY.md", "notes.md"}
    assert paths(namespace="peer:alice") == {"peers/alice/MEMORY.md"}
    assert paths(namespace="group:rowing") == {"groups/rowing/MEMORY.md"}
    assert paths(namespace="default") == {"notes.md"}
    assert paths(namespace="peer:bob") == set()
    hybrid = client.call("search", {"query": "kayak", "k": 10, "namespace": "peer:alice"})["hits"]
    assert {h["path"] for h in hybrid} == {"peers/alice/MEMORY.md"}  # the vector leg is confined too
    bob = {"kind": "direct", "peer": "bob"}
    assert paths(session=bob) == set()  # a peer session reads only its own folder
    assert paths(session=bob, namespace="peer:alice") == set()
    ctx = client.call("context", {"query": "kayak", "max_tokens": 200, "namespace": "group:rowing"})
    assert [s["path"] for s in ctx["sources"]] == ["groups/rowing/MEMORY.md"]
    with pytest.raises(RpcClientError) as err:
        client.call("search", {"query": "kayak", "namespace": "../etc"})
    assert err.value.code == -32602
