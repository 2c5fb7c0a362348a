"""Shutdown answers every request (issue "Trust", reproduction 12).

A ``reindex`` with ``wait`` and a queued ``remember`` used to get EOF when the
daemon stopped: the server cut connections before the worker was stopped, and
tasks left in the worker's queue were never answered. Now each gets its real
answer or -32003 "shutting down" with its own id.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.rpc.errors import SHUTTING_DOWN
from memoryd.daemon.rpc.jsonrpc import Peer
from memoryd.daemon.rpc.server import SocketServer
from tests.helpers import running_daemon, socket_server, wait_for

FILES = {"MEMORY.md": "# Memory\n\n- The user prefers Neovim.\n", "memory/2024-01-02.md": "# Day\n\n- standup\n"}


class Line:
    """A raw connection that sends request lines and reads answers ({} on EOF)."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(30)
        self.sock.connect(str(path))
        self.buf = b""

    def send(self, *requests: dict[str, Any]) -> None:
        self.sock.sendall(b"".join(json.dumps({"jsonrpc": "2.0", **r}).encode() + b"\n" for r in requests))

    def answer(self) -> dict[str, Any]:
        while b"\n" not in self.buf:
            part = self.sock.recv(65536)
            if not part:
                return {}
            self.buf += part
        line, self.buf = self.buf.split(b"\n", 1)
        return dict(json.loads(line))


def _answered(reply: dict[str, Any], rid: int) -> bool:
    """A reply with the request's id: its result, or the -32003 "shutting down" error."""
    return reply.get("id") == rid and ("result" in reply or reply.get("error", {}).get("code") == SHUTTING_DOWN)


@pytest.fixture
def gate() -> Iterator[threading.Event]:
    ev = threading.Event()
    yield ev
    ev.set()


def _server(path: Path, gate: threading.Event) -> SocketServer:
    def slow(params: dict[str, Any], peer: Peer) -> str:
        gate.wait(30)
        return "slow done"

    return socket_server(path, {"slow": slow, "ping": lambda p, peer: "pong"})


def test_a_request_still_running_at_stop_gets_shutting_down(short_dir: Path, gate: threading.Event) -> None:
    server = _server(short_dir / "s.sock", gate)
    server.start()
    conn = Line(server.address)
    conn.send({"id": 7, "method": "slow"})
    wait_for(lambda: any(c._inflight for c in server._conns.values()), what="the request running")
    stopper = threading.Thread(target=server.stop, kwargs={"timeout": 0.5})
    stopper.start()
    reply = conn.answer()
    gate.set()
    stopper.join(10)
    assert reply["id"] == 7 and reply["error"]["code"] == SHUTTING_DOWN
    assert "shutting down" in reply["error"]["message"]
    assert conn.answer() == {}, "exactly one answer per request: the handler's late one is dropped"
    conn.sock.close()


def test_requests_behind_one_finishing_during_the_stop_get_shutting_down(
    short_dir: Path, gate: threading.Event
) -> None:
    server = _server(short_dir / "s.sock", gate)
    server.start()
    conn = Line(server.address)
    conn.send({"id": 1, "method": "slow"}, {"id": 2, "method": "ping"}, {"id": 3, "method": "ping"})
    wait_for(lambda: any(c._inflight for c in server._conns.values()), what="the request running")
    stopper = threading.Thread(target=server.stop, kwargs={"timeout": 20})
    stopper.start()
    wait_for(server._stopping.is_set, what="the stop begun")
    gate.set()
    answers = [conn.answer() for _ in range(3)]
    stopper.join(20)
    assert answers[0] == {"jsonrpc": "2.0", "id": 1, "result": "slow done"}
    assert [(a["id"], a["error"]["code"]) for a in answers[1:]] == [(2, SHUTTING_DOWN), (3, SHUTTING_DOWN)]
    conn.sock.close()


def test_a_request_racing_the_stop_is_answered_not_dropped(short_dir: Path, gate: threading.Event) -> None:
    server = _server(short_dir / "s.sock", gate)
    server.start()
    conns = [Line(server.address) for _ in range(20)]
    wait_for(lambda: len(server._conns) == 20, what="20 connections")
    for i, c in enumerate(conns):
        c.send({"id": i, "method": "ping"})
    server.stop(timeout=5)
    replies = [c.answer() for c in conns]
    for i, r in enumerate(replies):
        assert _answered(r, i), (i, r)
    for c in conns:
        c.sock.close()


def _queue_behind_a_blocked_worker(d: Any, gate: threading.Event) -> None:
    started = threading.Event()

    def block() -> None:
        started.set()
        gate.wait(60)

    d.worker.call(block)
    assert started.wait(30)


def test_daemon_shutdown_answers_queued_requests(
    tmp_path: Path, short_dir: Path, gate: threading.Event, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker is stuck past its shutdown budget: what waits behind it is cancelled and answered -32003."""
    monkeypatch.setattr("memoryd.daemon.app.SHUTDOWN_BUDGET_S", 3.5)  # the worker's share: 0.5 s
    with running_daemon(tmp_path, short_dir / "m.sock", FILES) as (d, _client, root):
        _queue_behind_a_blocked_worker(d, gate)
        reindex, remember, sweep = (Line(d.cfg.socket_path) for _ in range(3))
        reindex.send({"id": 11, "method": "reindex", "params": {"paths": [str(root / "MEMORY.md")], "wait": True}})
        remember.send({"id": 12, "method": "remember",
                       "params": {"content": "The team deploys on Tuesdays after the standup."}})
        sweep.send({"id": 13, "method": "reindex", "params": {"wait": True}})
        wait_for(lambda: d.worker._queue.qsize() == 3, what="three requests queued")
        stopper = threading.Thread(target=d.shutdown)
        stopper.start()
        replies = [c.answer() for c in (reindex, remember, sweep)]
        gate.set()
        stopper.join(30)
    for rid, reply in zip((11, 12, 13), replies, strict=True):
        assert reply.get("id") == rid and reply["error"]["code"] == SHUTTING_DOWN, reply
        assert "shutting down" in reply["error"]["message"]
    assert "Tuesdays" not in (root / "MEMORY.md").read_text(), "a cancelled remember must write nothing"
    for c in (reindex, remember, sweep):
        c.sock.close()


def test_daemon_shutdown_lets_queued_requests_finish_when_it_can(
    tmp_path: Path, short_dir: Path, gate: threading.Event
) -> None:
    """The issue's reproduction: a ``reindex wait`` and a queued ``remember`` during a normal stop."""
    with running_daemon(tmp_path, short_dir / "m.sock", FILES) as (d, _client, _root):
        started = threading.Event()

        def block_until_stopping() -> None:
            started.set()
            d.should_exit.wait(60)

        d.worker.call(block_until_stopping)
        assert started.wait(30)
        sweep, remember = Line(d.cfg.socket_path), Line(d.cfg.socket_path)
        sweep.send({"id": 21, "method": "reindex", "params": {"wait": True}})
        remember.send({"id": 22, "method": "remember",
                       "params": {"content": "The team deploys on Tuesdays after the standup."}})
        wait_for(lambda: d.worker._queue.qsize() == 2, what="two requests queued")
        d.shutdown()
        replies = [sweep.answer(), remember.answer()]
    assert _answered(replies[0], 21) and _answered(replies[1], 22), replies
    for c in (sweep, remember):
        c.sock.close()
