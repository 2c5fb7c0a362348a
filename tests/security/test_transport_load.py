"""Clients under load (issue "Trust", reproduction 8).

With the old default ``max_clients = 64``, 200 concurrent ``Client`` searches
got 112 "server busy" failures, and 64 idle connections locked every other
client out for ``idle_timeout_s`` (300 s). Now: defaults sized for 200 at once,
a client told "busy" retries with backoff within its timeout, and the
connection idle longest is closed (-32004) to make room when the table is full.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from memoryd.daemon.client.rpc_client import Client, RpcClientError
from memoryd.daemon.rpc.errors import IDLE_CLOSED, SERVER_BUSY
from memoryd.daemon.rpc.jsonrpc import Peer
from memoryd.daemon.rpc.server import SocketServer
from memoryd.indexer.config import Config
from memoryd.indexer.errors import DaemonError
from tests.helpers import running_daemon, socket_server, wait_for

FILES = {"MEMORY.md": "# Memory\n\n- The user prefers Neovim.\n- Deploys run on Fridays.\n"}


def test_defaults_are_sized_for_two_hundred_clients() -> None:
    assert Config().server.max_clients >= 200


def test_two_hundred_concurrent_searches_on_default_config(tmp_path: Path, short_dir: Path) -> None:
    results: list[Any] = []
    lock = threading.Lock()
    with running_daemon(tmp_path, short_dir / "m.sock", FILES) as (d, _client, _root):
        assert d.cfg.server.max_clients == Config().server.max_clients  # the defaults, not a bigger fixture
        path = d.cfg.socket_path
        start = threading.Barrier(200)

        def one() -> None:
            start.wait(30)
            try:
                with Client(path, timeout=60) as c:
                    out: Any = c.call("search", {"query": "Neovim", "k": 2})
            except DaemonError as exc:
                out = exc
            with lock:
                results.append(out)

        threads = [threading.Thread(target=one) for _ in range(200)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    failed = [r for r in results if not isinstance(r, dict) or not r["hits"]]
    assert len(results) == 200 and not failed, f"{len(failed)}/200 failed, e.g. {failed[:2]}"


def _raw(path: Path) -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(str(path))
    return s


def _read_line(s: socket.socket) -> dict[str, Any]:
    buf = b""
    while b"\n" not in buf:
        part = s.recv(65536)
        if not part:
            break
        buf += part
    return dict(json.loads(buf.split(b"\n", 1)[0])) if buf else {}


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    ev = threading.Event()
    yield ev
    ev.set()


def _server(path: Path, gate: threading.Event, **kw: Any) -> SocketServer:
    def slow(params: dict[str, Any], peer: Peer) -> str:
        gate.wait(30)
        return "slow done"

    return socket_server(path, {"ping": lambda p, peer: "pong", "slow": slow}, **kw)


def test_idle_connections_cannot_starve_a_newcomer(short_dir: Path, gate: threading.Event) -> None:
    server = _server(short_dir / "s.sock", gate, max_clients=4, evict_idle_after_s=0.0)
    server.start()
    idle: list[socket.socket] = []
    try:
        for i in range(4):  # fill the table, oldest first
            idle.append(_raw(server.address))
            wait_for(lambda: len(server._conns) == len(idle), what=f"{i + 1} connections accepted")
        with Client(server.address, timeout=10) as c:
            assert c.call("ping") == "pong"
        goodbye = _read_line(idle[0])  # the one idle longest made room
        assert goodbye["id"] is None and goodbye["error"]["code"] == IDLE_CLOSED
        assert "idle" in goodbye["error"]["message"]
        assert idle[0].recv(1) == b""
    finally:
        for s in idle:
            s.close()
        server.stop()


def test_default_server_evicts_idle_connections_after_a_second(tmp_path: Path, short_dir: Path) -> None:
    """The issue's reproduction on defaults: max_clients idle connections, then a normal client call."""
    with running_daemon(tmp_path, short_dir / "m.sock", FILES) as (d, client, _root):
        client.close()
        n = d.cfg.server.max_clients
        idle = [_raw(d.cfg.socket_path) for _ in range(n)]
        try:
            assert d.server is not None
            wait_for(lambda: len(d.server._conns) >= n, what="the table full")
            with Client(d.cfg.socket_path, timeout=30) as c:  # retried until one idle connection is old enough
                assert c.call("search", {"query": "Neovim", "k": 1})["hits"]
        finally:
            for s in idle:
                s.close()


def test_a_request_sent_on_an_evicted_connection_never_runs(short_dir: Path, gate: threading.Event) -> None:
    runs: list[int] = []

    def count(params: dict[str, Any], peer: Peer) -> int:
        runs.append(1)
        return len(runs)

    server = socket_server(short_dir / "s.sock", {"count": count}, max_clients=1, evict_idle_after_s=0.0)
    server.start()
    try:
        with Client(server.address, timeout=10) as first:
            assert first.call("count") == 1  # now idle, holding the only slot
            with Client(server.address, timeout=10) as second:
                assert second.call("count") == 2  # evicts `first`
            assert first.call("count") == 3  # reconnects (it saw the goodbye), the request runs once
        assert len(runs) == 3
    finally:
        server.stop()


def test_busy_client_retries_within_its_timeout(short_dir: Path, gate: threading.Event) -> None:
    server = _server(short_dir / "s.sock", gate, max_clients=1, evict_idle_after_s=3600.0)
    server.start()
    answers: list[Any] = []
    try:
        holder = _raw(server.address)
        holder.sendall(b'{"jsonrpc":"2.0","id":1,"method":"slow"}\n')  # holds the only slot, busy
        wait_for(lambda: len(server._conns) == 1, what="the slot taken")

        def call() -> None:
            with Client(server.address, timeout=30) as c:
                answers.append(c.call("ping"))

        t = threading.Thread(target=call)
        with capture_logs() as logs:
            t.start()
            wait_for(lambda: any(e["event"] == "server.busy" for e in logs), what="a busy refusal")
        gate.set()
        assert _read_line(holder)["result"] == "slow done"
        holder.close()  # the slot frees; the retrying client gets in
        t.join(30)
        assert answers == ["pong"]
    finally:
        server.stop()


def test_busy_client_gives_up_with_the_busy_error_after_its_timeout(short_dir: Path, gate: threading.Event) -> None:
    server = _server(short_dir / "s.sock", gate, max_clients=1, evict_idle_after_s=3600.0)
    server.start()
    try:
        holder = _raw(server.address)
        holder.sendall(b'{"jsonrpc":"2.0","id":1,"method":"slow"}\n')
        wait_for(lambda: len(server._conns) == 1, what="the slot taken")
        with Client(server.address, timeout=0.3) as c, pytest.raises(RpcClientError) as err:
            c.call("ping")
        assert err.value.code == SERVER_BUSY
        gate.set()
        holder.close()
    finally:
        server.stop()
