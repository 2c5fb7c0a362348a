"""The socket server over a real Unix socket: permissions, protocol errors, limits, lifecycle.

Peer denial is simulated with ``owner_uid``: a server whose owner is a foreign
uid (and whose ``allowed_uids`` lack ours) must refuse our own connections.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.rpc.errors import RpcError
from memoryd.daemon.rpc.jsonrpc import Peer
from memoryd.daemon.rpc.server import SocketServer
from memoryd.indexer.errors import DaemonError, SocketInUseError
from tests.helpers import socket_server, wait_for

WAIT_S = 5.0  # bound of every wait in these tests


def conn_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("memoryd-conn-")]


class Handlers:
    """Fake methods: echo, block until released, fail in the ways the protocol maps."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()
        self.barrier = threading.Barrier(20, timeout=WAIT_S)

    def table(self) -> dict[str, Callable[[dict[str, Any], Peer], Any]]:
        return {
            "echo": lambda params, peer: params,
            "whoami": lambda params, peer: {"pid": peer.pid, "uid": peer.uid, "gid": peer.gid},
            "thread": lambda params, peer: threading.current_thread().name,
            "block": self._block,
            "meet": lambda params, peer: self.barrier.wait(),
            "app_error": self._app_error,
            "boom": self._boom,
            "big": lambda params, peer: "z" * 2_000_000,
        }

    def _block(self, params: dict[str, Any], peer: Peer) -> Any:
        self.entered.set()
        return self.release.wait(WAIT_S)

    @staticmethod
    def _app_error(params: dict[str, Any], peer: Peer) -> Any:
        raise RpcError(-32011, "not ready", {"why": "test"})

    @staticmethod
    def _boom(params: dict[str, Any], peer: Peer) -> Any:
        raise ValueError("kaboom")


class Raw:
    """A bare client socket that speaks bytes, to send what a good client never would."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(WAIT_S)
        self.sock.connect(str(path))
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def line(self) -> dict[str, Any]:
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            assert chunk, "server closed the connection before answering"
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        decoded: dict[str, Any] = json.loads(line)
        return decoded

    def call(self, method: str, params: Any = None, rid: int = 1) -> dict[str, Any]:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(json.dumps(msg).encode() + b"\n")
        return self.line()

    def closed_by_server(self) -> bool:
        """Wait (bounded) for EOF from the server, discarding anything else it sends."""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def handlers() -> Iterator[Handlers]:
    h = Handlers()
    yield h
    h.release.set()


@pytest.fixture
def sock_path(short_dir: Path) -> Path:
    return short_dir / "run" / "md.sock"


@pytest.fixture
def serve(sock_path: Path, handlers: Handlers) -> Iterator[Callable[..., SocketServer]]:
    """Start a server on ``sock_path`` with the fake handlers; stopped at teardown."""
    started: list[SocketServer] = []

    def start(**kw: Any) -> SocketServer:
        server = socket_server(kw.pop("path", sock_path), handlers.table(), **kw)
        server.start()
        started.append(server)
        return server

    yield start
    handlers.release.set()
    for server in started:
        server.stop()


@pytest.fixture
def raw(sock_path: Path) -> Iterator[Callable[[], Raw]]:
    opened: list[Raw] = []

    def connect() -> Raw:
        conn = Raw(sock_path)
        opened.append(conn)
        return conn

    yield connect
    for conn in opened:
        conn.close()


def test_fresh_dir_is_0700_and_socket_0600(serve: Callable[..., SocketServer], sock_path: Path) -> None:
    assert not sock_path.parent.exists()
    serve()
    assert stat.S_IMODE(os.stat(sock_path.parent).st_mode) == 0o700
    assert stat.S_IMODE(os.lstat(sock_path).st_mode) == 0o600
    assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)


def test_umask_is_restored(serve: Callable[..., SocketServer]) -> None:
    old = os.umask(0o022)
    try:
        serve()
        assert os.umask(0o022) == 0o022
    finally:
        os.umask(old)


def test_readable_existing_dir_is_left_alone(serve: Callable[..., SocketServer], sock_path: Path) -> None:
    sock_path.parent.mkdir()
    os.chmod(sock_path.parent, 0o755)  # not ours to change; the 0600 socket keeps others out
    serve()
    assert stat.S_IMODE(os.stat(sock_path.parent).st_mode) == 0o755
    assert stat.S_IMODE(os.stat(sock_path).st_mode) == 0o600


def test_foreign_dir_is_refused(sock_path: Path, handlers: Handlers, monkeypatch: pytest.MonkeyPatch) -> None:
    sock_path.parent.mkdir()
    server = socket_server(sock_path, handlers.table())
    monkeypatch.setattr("memoryd.daemon.rpc.sockpath.os.geteuid", lambda: os.getuid() + 4242)
    with pytest.raises(DaemonError, match=r"belongs to uid \d+, not to us"):
        server.start()
    assert not sock_path.exists()


def test_protocol_errors_keep_the_connection(
    serve: Callable[..., SocketServer], raw: Callable[[], Raw]
) -> None:
    serve()
    c = raw()
    c.send(b"{not json\n")
    assert c.line()["error"]["code"] == -32700
    c.send(b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"a":"\xff"}}\n')
    assert c.line()["error"]["code"] == -32700
    c.send(b"[1, 2]\n")
    assert c.line()["error"]["code"] == -32600
    c.send(b'"hello"\n')
    assert c.line()["error"]["code"] == -32600
    assert c.call("nope", rid=4) == {
        "jsonrpc": "2.0",
        "id": 4,
        "error": {"code": -32601, "message": "method not found: nope"},
    }
    assert c.call("echo", [1, 2])["error"]["code"] == -32602
    assert c.call("app_error")["error"] == {"code": -32011, "message": "not ready", "data": {"why": "test"}}
    assert c.call("boom", rid=7)["error"]["code"] == -32603
    assert c.call("echo", {"still": "alive"}, rid=8)["result"] == {"still": "alive"}


def test_notifications_get_no_reply_and_pipelining_keeps_order(
    serve: Callable[..., SocketServer], raw: Callable[[], Raw]
) -> None:
    serve()
    c = raw()
    lines = [json.dumps({"jsonrpc": "2.0", "method": "echo", "params": {"n": -1}})]
    lines += [
        json.dumps({"jsonrpc": "2.0", "id": i, "method": "echo", "params": {"n": i}}) for i in range(200)
    ]
    lines.insert(50, "")  # blank lines are ignored, not errors
    c.send(("\n".join(lines) + "\n").encode())
    got = [c.line() for _ in range(200)]
    assert [r["id"] for r in got] == list(range(200))
    assert all(r["result"] == {"n": r["id"]} for r in got)


def test_last_request_without_newline_is_answered_at_eof(
    serve: Callable[..., SocketServer], raw: Callable[[], Raw]
) -> None:
    serve()
    c = raw()
    c.send(b'{"jsonrpc":"2.0","id":3,"method":"echo","params":{"x":1}}')
    c.sock.shutdown(socket.SHUT_WR)
    assert c.line()["result"] == {"x": 1}
    assert c.closed_by_server()


def test_peer_credentials_reach_the_handler(
    serve: Callable[..., SocketServer], raw: Callable[[], Raw]
) -> None:
    serve()
    assert raw().call("whoami")["result"] == {"pid": os.getpid(), "uid": os.geteuid(), "gid": os.getegid()}


def test_twenty_concurrent_clients(serve: Callable[..., SocketServer], raw: Callable[[], Raw]) -> None:
    serve()
    clients = [raw() for _ in range(20)]
    for i, c in enumerate(clients):  # "meet" returns only once 20 handlers run at the same time
        c.send(json.dumps({"jsonrpc": "2.0", "id": i, "method": "meet"}).encode() + b"\n")
    answers = [c.line() for c in clients]
    assert sorted(a["result"] for a in answers) == list(range(20))
    assert [a["id"] for a in answers] == list(range(20))


def test_oversized_line_errors_then_closes_only_that_client(
    serve: Callable[..., SocketServer], raw: Callable[[], Raw]
) -> None:
    serve(max_request_bytes=1000)
    bystander = raw()
    big = raw()
    with contextlib.suppress(OSError):  # the server may close while we are still sending
        big.send(b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"p":"' + b"x" * 5000 + b'"}}\n')
    err = big.line()
    assert err["error"]["code"] == -32600
    assert err["error"]["message"].startswith("request too large: ")
    assert err["error"]["message"].endswith(" bytes > 1000")
    assert big.closed_by_server()
    assert bystander.call("echo", {"ok": True})["result"] == {"ok": True}
    assert raw().call("echo", {"p": "y" * 900})["result"] == {"p": "y" * 900}


def test_complete_line_over_the_limit_is_refused(
    serve: Callable[..., SocketServer], raw: Callable[[], Raw]
) -> None:
    serve(max_request_bytes=100)
    c = raw()
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "echo", "params": {"p": "x" * 80}}).encode()
    c.send(line + b"\n")
    assert c.line()["error"]["message"] == f"request too large: {len(line)} bytes > 100"
    assert c.closed_by_server()


def test_stuck_client_does_not_block_others_and_is_cut(
    serve: Callable[..., SocketServer], raw: Callable[[], Raw]
) -> None:
    serve(read_timeout_s=0.3)
    stuck = raw()
    t0 = time.monotonic()  # before the first byte: the server's read deadline can only start later
    stuck.send(b'{"jsonrpc":"2.0","id":1,"meth')
    other = raw()
    assert other.call("echo", {"a": 1})["result"] == {"a": 1}
    assert stuck.closed_by_server()  # a bounded wait (WAIT_S): a server that never cuts it fails here
    assert time.monotonic() - t0 >= 0.3  # cut by the read timeout, not at once (a lower bound load cannot break)


def test_trickling_bytes_does_not_reset_the_read_timeout(
    serve: Callable[..., SocketServer], raw: Callable[[], Raw]
) -> None:
    serve(read_timeout_s=0.3)
    c = raw()
    t0 = time.monotonic()
    c.send(b"{")
    closed = threading.Event()
    # A byte every 50 ms, for up to WAIT_S (over 16 read timeouts): a timeout that each byte reset would
    # never fire, so the bounded loop ends with the connection still open.
    while not closed.wait(0.05) and time.monotonic() - t0 < WAIT_S:
        try:
            c.send(b" ")
        except OSError:
            closed.set()
    assert closed.is_set()
    assert time.monotonic() - t0 >= 0.3


def test_idle_connection_is_closed(serve: Callable[..., SocketServer], raw: Callable[[], Raw]) -> None:
    serve(idle_timeout_s=0.3)
    c = raw()
    t0 = time.monotonic()  # before the request: the idle clock starts after its answer
    assert c.call("echo", {})["result"] == {}
    assert c.closed_by_server()  # bounded (WAIT_S)
    assert time.monotonic() - t0 >= 0.3  # closed for being idle, not at once


def test_client_that_never_reads_only_blocks_itself(
    serve: Callable[..., SocketServer], raw: Callable[[], Raw]
) -> None:
    serve(write_timeout_s=0.3)
    hog = raw()
    hog.send(b'{"jsonrpc":"2.0","id":1,"method":"big"}\n')  # ~2 MB answer, never read
    other = raw()
    assert other.call("echo", {"b": 2})["result"] == {"b": 2}
    # the server gives up writing to the hog after write_timeout_s and closes it
    wait_for(lambda: len(conn_threads()) == 1, WAIT_S, "one connection thread")
    assert hog.closed_by_server()
    assert other.call("echo", {"b": 3})["result"] == {"b": 3}


def test_denied_peer_gets_one_error_and_is_closed(
    serve: Callable[..., SocketServer], raw: Callable[[], Raw]
) -> None:
    serve(owner_uid=os.geteuid() + 4242)
    c = raw()
    err = c.line()
    assert err["error"] == {
        "code": -32001,
        "message": f"permission denied: uid {os.geteuid()} is not allowed",
    }
    assert c.closed_by_server()


def test_allowed_uids_extend_the_owner(serve: Callable[..., SocketServer], raw: Callable[[], Raw]) -> None:
    serve(owner_uid=os.geteuid() + 4242, allowed_uids={os.geteuid(): "peer:alice"})
    # connected (no -32001 and no close), but served only the confined methods: tests/daemon/test_bound_uids.py
    assert raw().call("echo", {"in": 1})["error"]["code"] == -32020


def test_busy_server_refuses_beyond_max_clients(
    serve: Callable[..., SocketServer], raw: Callable[[], Raw]
) -> None:
    serve(max_clients=1)
    first = raw()
    assert first.call("echo", {})["result"] == {}
    second = raw()
    assert second.line()["error"]["code"] == -32002
    assert second.closed_by_server()
    assert first.call("echo", {"still": 1})["result"] == {"still": 1}


def test_stale_socket_is_replaced(
    serve: Callable[..., SocketServer], sock_path: Path, raw: Callable[[], Raw]
) -> None:
    sock_path.parent.mkdir(mode=0o700)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(sock_path))
    dead.close()  # leaves the file behind, like a crashed daemon
    assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)
    serve()
    assert raw().call("echo", {"new": 1})["result"] == {"new": 1}


def test_live_server_on_the_path_is_not_replaced(
    serve: Callable[..., SocketServer], sock_path: Path, handlers: Handlers, raw: Callable[[], Raw]
) -> None:
    serve()
    before = os.lstat(sock_path).st_ino
    second = socket_server(sock_path, handlers.table())
    with pytest.raises(SocketInUseError, match=rf"already running on {sock_path} \(pid {os.getpid()}\)"):
        second.start()
    second.stop()  # a server that never started stops as a no-op
    assert os.lstat(sock_path).st_ino == before
    assert raw().call("echo", {})["result"] == {}


def test_regular_file_at_the_path_is_refused_and_untouched(sock_path: Path, handlers: Handlers) -> None:
    sock_path.parent.mkdir(mode=0o700)
    sock_path.write_text("my notes\n")
    with pytest.raises(DaemonError, match="exists and is not a socket"):
        socket_server(sock_path, handlers.table()).start()
    assert sock_path.read_text() == "my notes\n"


def test_too_long_path_is_refused(short_dir: Path, handlers: Handlers) -> None:
    with pytest.raises(DaemonError, match="too long"):
        socket_server(short_dir / ("x" * 120), handlers.table()).start()


def test_stop_is_prompt_unlinks_and_is_idempotent(
    sock_path: Path, handlers: Handlers, raw: Callable[[], Raw]
) -> None:
    server = socket_server(sock_path, handlers.table())
    server.start()
    with pytest.raises(DaemonError, match="already started"):
        server.start()
    idle = [raw() for _ in range(3)]
    assert idle[0].call("echo", {})["result"] == {}
    # Prompt: idle connections are woken at once, not waited for. With an hour to spare, a stop that
    # waited for them (up to half its timeout) would still be running when the bounded join gives up.
    stopper = threading.Thread(target=server.stop, kwargs={"timeout": 3600.0})
    stopper.start()
    stopper.join(WAIT_S)
    assert not stopper.is_alive()
    assert not sock_path.exists()
    assert all(c.closed_by_server() for c in idle)
    server.stop()
    assert not [t for t in threading.enumerate() if t.name.startswith("memoryd-")]


def test_stop_lets_an_inflight_request_finish(
    sock_path: Path, handlers: Handlers, raw: Callable[[], Raw]
) -> None:
    server = socket_server(sock_path, handlers.table())
    server.start()
    c = raw()
    c.send(b'{"jsonrpc":"2.0","id":1,"method":"block"}\n')
    assert handlers.entered.wait(WAIT_S)
    stopper = threading.Thread(target=server.stop, kwargs={"timeout": 2.0})
    stopper.start()
    handlers.release.set()
    assert c.line() == {"jsonrpc": "2.0", "id": 1, "result": True}
    stopper.join(WAIT_S)
    assert not stopper.is_alive()


def test_stop_leaves_a_successors_socket_alone(sock_path: Path, handlers: Handlers) -> None:
    server = socket_server(sock_path, handlers.table())
    server.start()
    os.unlink(sock_path)
    successor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        successor.bind(str(sock_path))
        server.stop()
        assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)
    finally:
        successor.close()


def test_adopted_listen_fd_is_served_and_not_unlinked(short_dir: Path, handlers: Handlers) -> None:
    path = short_dir / "activated.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen()
    server = socket_server(short_dir / "ignored.sock", handlers.table(), listen_fd=listener.detach())
    server.start()
    client = Raw(path)
    try:
        assert server.address == path
        assert client.call("echo", {"sd": 1})["result"] == {"sd": 1}
    finally:
        client.close()
        server.stop()
    assert path.exists()


def test_listen_fd_that_is_not_a_unix_socket_is_refused(handlers: Handlers, short_dir: Path) -> None:
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(DaemonError, match="not a Unix stream socket"):
            socket_server(short_dir / "x.sock", handlers.table(), listen_fd=tcp.fileno()).start()
    finally:
        tcp.close()
