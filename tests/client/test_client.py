"""The light client against a real in-process server."""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.client.rpc_client import Client, RpcClientError
from memoryd.daemon.rpc.errors import InvalidParams, RpcError
from memoryd.daemon.rpc.jsonrpc import Peer
from memoryd.daemon.rpc.server import SocketServer
from memoryd.indexer.errors import DaemonError, NotRunningError
from tests.helpers import socket_server

WAIT_S = 5.0
REPO = Path(__file__).resolve().parents[2]


def _fail(params: dict[str, Any], peer: Peer) -> Any:
    raise RpcError(-32020, "no such file: a.md", {"path": "a.md"})


def _needs_k(params: dict[str, Any], peer: Peer) -> Any:
    raise InvalidParams("param 'k' must be int, got str")


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def noted() -> threading.Event:
    return threading.Event()


@pytest.fixture
def serve(
    short_dir: Path, release: threading.Event, noted: threading.Event
) -> Iterator[Callable[..., SocketServer]]:
    servers: list[SocketServer] = []
    handlers = {
        "note": lambda params, peer: noted.set(),
        "echo": lambda params, peer: params,
        "thread": lambda params, peer: threading.current_thread().name,
        "block": lambda params, peer: release.wait(WAIT_S),
        "fail": _fail,
        "needs_k": _needs_k,
    }

    def start(**kw: Any) -> SocketServer:
        server = socket_server(short_dir / "md.sock", handlers, **kw)
        server.start()
        servers.append(server)
        return server

    yield start
    release.set()
    for server in servers:
        server.stop()


def test_call_returns_results_on_one_connection(serve: Callable[..., SocketServer]) -> None:
    server = serve()
    with Client(server.address) as client:
        assert client.call("echo", {"q": "记忆"}) == {"q": "记忆"}
        assert client.call("echo") == {}
        names = {client.call("thread") for _ in range(20)}
    assert len(names) == 1  # every call was served by the same connection thread


def test_error_responses_raise_rpc_client_error(serve: Callable[..., SocketServer]) -> None:
    server = serve()
    with Client(server.address) as client:
        with pytest.raises(RpcClientError) as info:
            client.call("fail")
        assert (info.value.code, info.value.message, info.value.data) == (
            -32020,
            "no such file: a.md",
            {"path": "a.md"},
        )
        assert str(info.value) == "no such file: a.md"
        with pytest.raises(RpcClientError, match="param 'k'") as info:
            client.call("needs_k")
        assert info.value.code == -32602
        with pytest.raises(RpcClientError, match="method not found: nope"):
            client.call("nope")
        assert client.call("echo", {"after": 1}) == {"after": 1}  # the connection survives errors


def test_not_running_names_the_socket_and_how_to_start(short_dir: Path) -> None:
    path = short_dir / "absent.sock"
    with pytest.raises(NotRunningError) as info, Client(path) as client:
        client.call("ping")
    message = str(info.value)
    assert message.startswith(f"memoryd is not running (no socket at {path}).")
    assert "`memoryd run`" in message and "systemctl --user start memoryd" in message


def test_stale_socket_is_not_running(short_dir: Path) -> None:
    path = short_dir / "stale.sock"
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))
    dead.close()
    with pytest.raises(NotRunningError, match=f"nothing listens on {path}"):
        Client(path).call("ping")


def test_timeout_raises_then_the_next_call_reconnects(
    serve: Callable[..., SocketServer], release: threading.Event
) -> None:
    server = serve()
    with Client(server.address, timeout=0.2) as client:
        first = client.call("thread")
        with pytest.raises(DaemonError, match=r"did not answer 'block' within 0.2 s"):
            client.call("block")
        release.set()
        client.timeout = WAIT_S
        assert client.call("echo", {"x": 1}) == {"x": 1}
        assert client.call("thread") != first  # the timed-out connection was dropped


def test_reconnects_after_the_daemon_closed_an_idle_connection(serve: Callable[..., SocketServer]) -> None:
    server = serve(idle_timeout_s=0.2)
    with Client(server.address) as client:
        first = client.call("thread")
        deadline = time.monotonic() + WAIT_S
        while any(t.name == first for t in threading.enumerate()) and time.monotonic() < deadline:
            threading.Event().wait(0.01)
        assert not any(t.name == first for t in threading.enumerate())
        assert client.call("echo", {"back": True}) == {"back": True}
        assert client.call("thread") != first


def test_denied_peer_raises_with_the_servers_message(serve: Callable[..., SocketServer]) -> None:
    server = serve(owner_uid=os.geteuid() + 4242)
    with pytest.raises(RpcClientError, match=rf"permission denied: uid {os.geteuid()}") as info:
        Client(server.address).call("echo")
    assert info.value.code == -32001


def test_notify_sends_without_waiting(serve: Callable[..., SocketServer], noted: threading.Event) -> None:
    server = serve()
    with Client(server.address) as client:
        client.notify("note", {"path": "a.md"})
        assert noted.wait(WAIT_S)
        assert client.call("echo", {"n": 1}) == {"n": 1}  # no stray reply was queued


def test_round_trip_latency(serve: Callable[..., SocketServer]) -> None:
    server = serve()
    samples = []
    with Client(server.address) as client:
        for _ in range(1000):
            t0 = time.perf_counter()
            client.call("echo", {"ping": 1})
            samples.append(time.perf_counter() - t0)
    samples.sort()
    p50, p99 = statistics.median(samples) * 1000, samples[989] * 1000
    print(f"echo round trip over one connection: p50 {p50:.3f} ms, p99 {p99:.3f} ms")
    assert p50 < 20.0  # generous: a shared 2-core CI box


@pytest.mark.slow
def test_import_is_light() -> None:
    code = (
        "import sys; before = set(sys.modules); import memoryd.daemon.client.rpc_client; "
        "heavy = [m for m in ('numpy', 'structlog', 'typing', 'pathlib', 'memoryd.indexer.config', "
        "'memoryd.daemon.rpc.server') "
        "if m in sys.modules and m not in before]; print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=30, check=True
    )
    assert out.stdout.strip() == "[]"
