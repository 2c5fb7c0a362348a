"""Other uids are bound (issue #28 item 8): ``server.allowed_uids = { uid = "peer:ID" | "group:ID" }``.

A uid other than the owner's reaches only the confined reads and ``remember``, always as the one
session the config binds it to; ``status``, ``reindex`` and every owner method (and any method added
later) are refused. The socket is created so such uids can connect (0711 folder, 0666 socket) and
``SO_PEERCRED`` stays the gate. Three levels: the gate with fake peers, the server over a real socket
with a foreign owner (the way tests/daemon/test_server.py simulates other uids), and the real daemon against a
real second user (root only, like tests/e2e/test_second_uid.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import shutil
import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.api.session import BOUND_METHODS, bind_uids
from memoryd.daemon.cli import main
from memoryd.daemon.exits import EXIT_STARTUP
from memoryd.daemon.rpc.errors import ACCESS_DENIED, InvalidParams, RpcError
from memoryd.daemon.rpc.jsonrpc import Peer
from memoryd.daemon.rpc.server import SocketServer
from memoryd.daemon.rpc.sockpath import unreachable_for
from memoryd.indexer import config as configmod
from memoryd.indexer.access import DIRECT, GROUP, Session, parse_binding
from memoryd.indexer.errors import ConfigError, DaemonError
from tests.e2e.test_second_uid import TOOLS, _as, _interpreter, _run, other_user  # noqa: F401 (a fixture)
from tests.helpers import running_daemon, socket_server, wait_for

ME = os.geteuid()
OTHER = ME + 4242  # a uid with no passwd entry: never the owner, never a real user here
ALICE = Session(DIRECT, peer="alice")
NEW_FORM = 'allowed_uids = { 1001 = "peer:alice"'


# -- the config ----------------------------------------------------------------------


def _load(tmp_path: Path, body: str) -> configmod.Config:
    path = tmp_path / "memoryd.toml"
    path.write_text(body, encoding="utf-8")
    return configmod.load(path, env={"HOME": str(tmp_path)})


def test_a_table_binds_each_uid_to_one_session(tmp_path: Path) -> None:
    cfg = _load(tmp_path, '[server]\nallowed_uids = { 1001 = "peer:alice", 1002 = "group:dev" }\n')
    assert dict(cfg.server.allowed_uids) == {1001: "peer:alice", 1002: "group:dev"}
    assert parse_binding("peer:alice") == ALICE and parse_binding("group:dev") == Session(GROUP, group="dev")


def test_a_plain_list_is_refused_with_the_new_form(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        _load(tmp_path, "[server]\nallowed_uids = [1001]\n")
    assert "'server.allowed_uids'" in str(err.value) and NEW_FORM in str(err.value)


def test_an_empty_list_still_loads_as_nobody(tmp_path: Path) -> None:
    """Configs written from the old shipped file say ``allowed_uids = []``: it grants nothing either way."""
    assert dict(_load(tmp_path, "[server]\nallowed_uids = []\n").server.allowed_uids) == {}


@pytest.mark.parametrize("value", ['{ 1001 = "owner" }', '{ 1001 = "peer:../bob" }', '{ 1001 = "alice" }',
                                   '{ alice = "peer:alice" }', '{ 1001 = 7 }', '{ 4294967295 = "peer:a" }'])
def test_a_bad_binding_is_refused_naming_the_key(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"server\.allowed_uids"):
        _load(tmp_path, f"[server]\nallowed_uids = {value}\n")


def test_memoryd_run_refuses_the_list_at_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "memoryd.toml"
    path.write_text("[server]\nallowed_uids = [1001, 1002]\n", encoding="utf-8")
    assert main(["run", "--config", str(path)]) == EXIT_STARTUP
    err = capsys.readouterr().err
    assert "server.allowed_uids" in err and NEW_FORM in err


# -- the gate, with fake peers ------------------------------------------------------------


def _seen() -> tuple[dict[str, Any], Callable[[dict[str, Any], Peer], Any]]:
    calls: dict[str, Any] = {}

    def handler(params: dict[str, Any], peer: Peer) -> Any:
        calls["params"] = params
        return "served"

    return calls, handler


def _gate(*methods: str) -> tuple[dict[str, Any], dict[str, Callable[[dict[str, Any], Peer], Any]]]:
    calls, handler = _seen()
    return calls, bind_uids(dict.fromkeys(methods, handler), {OTHER: ALICE}, owner_uid=ME)


def _denied(call: Callable[[], Any]) -> str:
    with pytest.raises(RpcError) as err:
        call()
    assert err.value.code == ACCESS_DENIED
    return str(err.value)


@pytest.mark.parametrize("method", ["status", "reindex", "ping", "forget", "audit", "history", "undo", "import",
                                    "clear", "update_section", "promote", "a_method_added_next_year"])
def test_a_bound_uid_may_not_call_what_is_not_a_confined_read_or_write(method: str) -> None:
    calls, gated = _gate(method)
    msg = _denied(lambda: gated[method]({}, Peer(1, OTHER, OTHER)))
    assert "owner only" in msg and "peer:alice" in msg and "params" not in calls
    assert gated[method]({}, Peer(1, ME, ME)) == "served"  # the owner is untouched


def test_without_a_session_a_bound_uid_gets_its_own() -> None:
    calls, gated = _gate("search")
    assert gated["search"]({"query": "tea"}, Peer(1, OTHER, OTHER)) == "served"
    assert calls["params"] == {"query": "tea", "session": {"kind": "direct", "peer": "alice"}}


def test_a_bound_uid_may_add_a_turn_to_its_own_session() -> None:
    calls, gated = _gate("remember")
    gated["remember"]({"session": {"kind": "direct", "peer": "alice", "turn": "t7"}}, Peer(1, OTHER, OTHER))
    assert calls["params"]["session"] == {"kind": "direct", "peer": "alice", "turn": "t7"}


@pytest.mark.parametrize("claim", [{"kind": "direct", "peer": "bob"}, {"kind": "group", "group": "alice"},
                                   {"kind": "owner"}])
def test_a_bound_uid_may_not_pick_another_session(claim: dict[str, str]) -> None:
    calls, gated = _gate("search")
    _denied(lambda: gated["search"]({"query": "x", "session": claim}, Peer(1, OTHER, OTHER)))
    assert "params" not in calls


def test_a_malformed_session_is_invalid_params_and_an_unbound_uid_is_refused() -> None:
    calls, gated = _gate("search")
    with pytest.raises(InvalidParams):
        gated["search"]({"session": "alice"}, Peer(1, OTHER, OTHER))
    _denied(lambda: gated["search"]({}, Peer(1, OTHER + 1, OTHER + 1)))
    assert "params" not in calls


def test_the_owner_keeps_every_session() -> None:
    calls, gated = _gate("search")
    gated["search"]({"session": {"kind": "group", "group": "dev"}}, Peer(1, ME, ME))
    assert calls["params"]["session"] == {"kind": "group", "group": "dev"}


def test_the_bound_methods_are_the_confined_ones() -> None:
    assert {"search", "context", "get", "remember"} <= BOUND_METHODS
    assert not BOUND_METHODS & {"status", "reindex", "ping", "forget", "history", "undo", "clear", "import"}


# -- the server, over a real socket -------------------------------------------------------


class Line:
    """One client connection that sends a request and reads its answer line."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(str(path))
        self.buf = b""

    def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.sock.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}).encode()
                          + b"\n")
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            assert chunk, "the server closed the connection"
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        out: dict[str, Any] = json.loads(line)
        return out

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def serve(short_dir: Path) -> Iterator[Callable[..., SocketServer]]:
    started: list[SocketServer] = []

    def start(**kw: Any) -> SocketServer:
        table = {m: (lambda params, peer: params) for m in ("search", "status", "reindex")}
        server = socket_server(short_dir / "run" / "md.sock", table, **kw)
        server.start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def test_bound_uids_get_a_socket_they_can_reach(serve: Callable[..., SocketServer]) -> None:
    server = serve(owner_uid=OTHER, allowed_uids={ME: "peer:alice"})  # we are the bound uid here
    sock = server.address
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o666
    assert stat.S_IMODE(os.stat(sock.parent).st_mode) == 0o711
    c = Line(sock)
    assert c.call("status")["error"]["code"] == ACCESS_DENIED
    assert c.call("reindex", {"paths": ["/etc/shadow"]})["error"]["code"] == ACCESS_DENIED  # no existence oracle
    assert c.call("search", {"query": "x"})["result"] == {"query": "x", "session": {"kind": "direct", "peer": "alice"}}
    assert c.call("search", {"session": {"kind": "direct", "peer": "bob"}})["error"]["code"] == ACCESS_DENIED
    c.close()


def test_without_bound_uids_the_socket_stays_private(serve: Callable[..., SocketServer]) -> None:
    sock = serve().address
    assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(sock.parent).st_mode) == 0o700
    c = Line(sock)
    assert c.call("status")["result"] == {}
    c.close()


@pytest.mark.parametrize(("allowed", "why"), [([ME + 1], "no longer accepted"), ({ME: "peer:alice"}, "owner"),
                                              ({ME + 1: "owner"}, "peer:ID")])
def test_the_server_refuses_bindings_it_cannot_enforce(short_dir: Path, allowed: Any, why: str) -> None:
    with pytest.raises(DaemonError, match=why):
        socket_server(short_dir / "md.sock", {}, allowed_uids=allowed)


def test_a_folder_that_keeps_a_bound_uid_out_is_named(short_dir: Path) -> None:
    run = short_dir / "run"
    run.mkdir(mode=0o711)
    sock = run / "md.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(sock))
    os.chmod(sock, 0o666)
    os.chmod(short_dir, 0o700)
    assert unreachable_for(sock, [OTHER]) == {OTHER: f"{short_dir} (mode 0700, owner uid {ME})"}
    os.chmod(short_dir, 0o711)
    assert unreachable_for(sock, [OTHER]) == {}
    os.chmod(sock, 0o600)
    assert unreachable_for(sock, [OTHER]) == {OTHER: f"{sock} (mode 0600, owner uid {ME})"}


# -- the real daemon, a real second user ---------------------------------------------------

# Runs as the other user, stdlib only: one connection, each request of argv[2] in turn, the answers as JSON.
CLIENT = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(20)
s.connect(sys.argv[1])
buf, out = b"", []
for i, (method, params) in enumerate(json.loads(sys.argv[2])):
    s.sendall(json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}).encode() + b"\n")
    while b"\n" not in buf:
        part = s.recv(65536)
        if not part:
            raise SystemExit("closed")
        buf += part
    line, _, buf = buf.partition(b"\n")
    out.append(json.loads(line))
print(json.dumps(out))
"""


@pytest.mark.slow
@pytest.mark.skipif(ME != 0, reason="creating a second user needs root")
@pytest.mark.skipif(any(shutil.which(t) is None for t in TOOLS), reason=f"needs {', '.join(TOOLS)}")
def test_a_real_second_user_is_held_to_its_bound_session(
    tmp_path: Path, short_dir: Path, other_user: pwd.struct_passwd,  # noqa: F811 (the imported fixture)
) -> None:
    """The red-team's case: a uid in allowed_uids read bob's entries, and status/reindex served it."""
    python = _interpreter(other_user)
    os.chmod(short_dir, 0o755)  # the folder above the socket's own: others may pass
    sock = short_dir / "run" / "memoryd.sock"
    files = {"peers/alice/MEMORY.md": "# Alice\n\n- Alice drinks green tea every morning.\n",
             "peers/bob/MEMORY.md": "# Bob\n\n- Bob keeps the locker code in the blue drawer.\n"}

    def bind(cfg: configmod.Config) -> configmod.Config:
        return dataclasses.replace(cfg, server=dataclasses.replace(
            cfg.server, allowed_uids={other_user.pw_uid: "peer:alice"}))

    with running_daemon(tmp_path, sock, files, tweak=bind) as (_d, client, root):
        bob = str(root / "peers/bob/MEMORY.md")
        asks = [("search", {"query": "locker code blue drawer", "k": 5}),
                ("search", {"query": "locker code", "session": {"kind": "direct", "peer": "bob"}}),
                ("get", {"path": "peers/bob/MEMORY.md"}),
                ("status", {}), ("reindex", {"paths": [bob]}), ("reindex", {"paths": [bob + ".missing"]}),
                ("remember", {"content": "Alice's favourite colour is teal.", "type": "preference"})]
        res = _run([*_as(other_user), python, "-I", "-c", CLIENT, str(sock), json.dumps(asks)])
        assert res.returncode == 0, res.stderr
        search, as_bob, get_bob, status, reindex, reindex_missing, remember = json.loads(res.stdout)
        assert all(h["path"].startswith("peers/alice/") for h in search["result"]["hits"]), search
        for denied in (as_bob, get_bob, status, reindex, reindex_missing):
            assert denied["error"]["code"] == ACCESS_DENIED, denied
        assert reindex["error"]["message"] == reindex_missing["error"]["message"]  # no existence oracle
        assert "result" in remember, remember
        wait_for(lambda: "teal" in (root / "peers/alice/MEMORY.md").read_text(), what="alice's write")
        assert "teal" not in (root / "peers/bob/MEMORY.md").read_text()
        assert client.call("status")["files"] >= 2  # the owner is served throughout
