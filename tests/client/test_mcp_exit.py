"""``memoryd mcp`` ends quietly (issue #27, item 8).

Measured on main at 7c97e41: every normal shutdown (the host closes stdin) exited 1 with
``ValueError: I/O operation on closed file`` from the CLI's last ``sys.stdout.flush()``: the
SDK's stdio streams wrap ``sys.stdout.buffer`` and close it. Every MCP host logged a crash
per session. Now: exit 0 and nothing on stderr, with a real SDK client and with stdin at EOF.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import running_daemon

REPO = Path(__file__).resolve().parents[2]
MCP_COMMANDS = {
    "memoryd": [sys.executable, "-m", "memoryd.daemon.cli", "mcp"],  # what the console script runs
    "stand-alone": [sys.executable, "-m", "memoryd.daemon.client.cli_mcp"],
}
# Runs the server with inherited stdin/stdout (the SDK client's pipes) and keeps what the client cannot
# see: the exit status and stderr. If the server outlives the client's grace period after stdin closes,
# the client kills this wrapper's whole group and no status is written.
WRAPPER = """
import subprocess, sys
with open(sys.argv[1], "wb") as err:
    rc = subprocess.run(sys.argv[3:], stderr=err).returncode
with open(sys.argv[2], "w") as out:
    out.write(str(rc))
"""


def _env() -> dict[str, str]:
    env = {"XDG_CONFIG_HOME": "/nonexistent-memoryd-test", "PATH": os.environ.get("PATH", "")}
    if os.environ.get("PYTHONPATH"):  # the server must import what the test imports
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


@pytest.fixture
def sock(tmp_path: Path, short_dir: Path) -> Iterator[Path]:
    files = {"MEMORY.md": "# Memory\n\n- The user prefers Neovim.\n"}
    with running_daemon(tmp_path, short_dir / "m.sock", files, timeout=20) as (d, client, _root):
        client.close()
        yield d.cfg.socket_path


@pytest.mark.parametrize("how", sorted(MCP_COMMANDS))
def test_stdin_at_eof_exits_0_with_nothing_on_stderr(sock: Path, how: str) -> None:
    r = subprocess.run([*MCP_COMMANDS[how], "--socket", str(sock)], stdin=subprocess.DEVNULL,
                       capture_output=True, cwd=REPO, env=_env(), timeout=60)
    assert (r.returncode, r.stderr.decode(), r.stdout) == (0, "", b"")


def test_without_a_daemon_the_only_line_is_the_warning(short_dir: Path) -> None:
    r = subprocess.run([*MCP_COMMANDS["memoryd"], "--socket", str(short_dir / "absent.sock")],
                       stdin=subprocess.DEVNULL, capture_output=True, cwd=REPO, env=_env(), timeout=60)
    lines = r.stderr.decode().splitlines()
    assert r.returncode == 0 and len(lines) == 1, r.stderr
    assert json.loads(lines[0])["event"] == "mcp.daemon_not_running"


def test_log_level_info_still_says_where_it_connects(sock: Path) -> None:
    r = subprocess.run([*MCP_COMMANDS["memoryd"], "--socket", str(sock), "--log-level", "info"],
                       stdin=subprocess.DEVNULL, capture_output=True, cwd=REPO, env=_env(), timeout=60)
    events = [json.loads(line)["event"] for line in r.stderr.decode().splitlines()]
    assert r.returncode == 0 and events == ["mcp.started"], r.stderr


def test_sdk_client_session_ends_with_exit_0_and_empty_stderr(sock: Path, tmp_path: Path) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    err, rc = tmp_path / "mcp.stderr", tmp_path / "mcp.rc"
    server = [*MCP_COMMANDS["memoryd"], "--socket", str(sock)]
    params = StdioServerParameters(command=sys.executable, args=["-c", WRAPPER, str(err), str(rc), *server],
                                   cwd=str(REPO), env=_env())

    async def session() -> dict[str, Any]:
        with open(tmp_path / "client.stderr", "w") as client_err:
            async with stdio_client(params, errlog=client_err) as (r, w), ClientSession(r, w) as s:
                await asyncio.wait_for(s.initialize(), 60)
                tools = {t.name for t in (await s.list_tools()).tools}
                found = await s.call_tool("memory_search", {"query": "Neovim", "mode": "keyword"})
                status = await s.call_tool("memory_status", {})
                return {"tools": tools, "found": found, "status": status}
        # leaving the block closes the server's stdin and waits (2 s) for it to exit

    out = asyncio.run(session())
    assert "memory_search" in out["tools"] and not out["found"].isError and not out["status"].isError
    assert out["found"].structuredContent["results"][0]["path"] == "MEMORY.md"
    assert rc.exists(), "the server did not exit after stdin closed: the client had to kill it"
    assert (rc.read_text(), err.read_text()) == ("0", "")


# -- at EOF, every request read is answered (issue #37, item 6) ------------------------------

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
HOLD_S = 3.0  # how long the slow daemon below holds each answer, unless the server exits first


def _call(rid: int, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def _answers(stdout: bytes) -> dict[int, dict[str, Any]]:
    return {m["id"]: m for m in (json.loads(x) for x in stdout.splitlines()) if "id" in m}


class SlowDaemon:
    """A daemon socket that holds each answer until the MCP server has exited or ``HOLD_S`` passed.

    Not a timing race: a server that drops the calls in flight at EOF exits while the answers are
    held, so they can never reach it (and exits at once); one that drains waits, gets them, and
    answers. Either way the outcome does not depend on how fast anything runs.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.exited = threading.Event()
        self.asked: list[str] = []
        self._stop = False
        self._srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._srv.bind(str(path))
        self._srv.listen(8)
        self._threads = [threading.Thread(target=self._serve, daemon=True)]
        self._threads[0].start()

    def _serve(self) -> None:
        while True:
            conn, _ = self._srv.accept()
            if self._stop:
                conn.close()
                return
            t = threading.Thread(target=self._answer, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _answer(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as f:
            req = json.loads(f.readline())
            self.asked.append(req["method"])
            self.exited.wait(HOLD_S)
            hit = {"path": "MEMORY.md", "start_line": 3, "end_line": 3, "text": "- The user prefers Neovim.",
                   "score": 0.9}
            result = {"hits": [hit], "mode": "keyword", "took_ms": 1.0} if req["method"] == "search" \
                else {"fresh": True, "files": 1, "roots": []}
            with contextlib.suppress(OSError):
                conn.sendall(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": result}).encode() + b"\n")

    def close(self) -> None:
        self._stop = True
        self.exited.set()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as wake:  # accept() returns, sees _stop
            wake.connect(str(self.path))
        for t in self._threads:
            t.join(10)
        self._srv.close()


@pytest.mark.slow
def test_calls_in_flight_at_eof_are_answered_before_exit(short_dir: Path) -> None:
    daemon = SlowDaemon(short_dir / "slow.sock")
    try:
        proc = subprocess.Popen([*MCP_COMMANDS["memoryd"], "--socket", str(short_dir / "slow.sock")],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                                env=_env())
        threading.Thread(target=lambda: (proc.wait(), daemon.exited.set()), daemon=True).start()
        lines = [INIT, INITIALIZED, _call(2, "memory_search", {"query": "Neovim", "mode": "keyword"}),
                 _call(3, "memory_status", {})]
        out, err = proc.communicate(b"".join(json.dumps(m).encode() + b"\n" for m in lines), timeout=120)
    finally:
        daemon.close()
    answers = _answers(out)
    assert (proc.returncode, err.decode()) == (0, "")
    assert sorted(answers) == [1, 2, 3], out.decode()
    assert answers[2]["result"]["structuredContent"]["results"][0]["path"] == "MEMORY.md"
    assert answers[3]["result"]["structuredContent"]["fresh"] is True
    assert sorted(daemon.asked) == ["search", "status"]


@pytest.mark.slow
def test_a_remember_sent_just_before_eof_is_written_and_answered(sock: Path, tmp_path: Path) -> None:
    """The reviewers' case against a real daemon: the answer is on stdout, and the memory in the file."""
    fact = "We decided to deploy the billing service on Fridays because traffic is lowest then."
    lines = [INIT, INITIALIZED, _call(2, "memory_remember", {"content": fact, "type": "decision"})]
    r = subprocess.run([*MCP_COMMANDS["memoryd"], "--socket", str(sock)], cwd=REPO, env=_env(), timeout=120,
                       input=b"".join(json.dumps(m).encode() + b"\n" for m in lines), capture_output=True)
    assert (r.returncode, r.stderr.decode()) == (0, "")
    done = _answers(r.stdout)[2]["result"]
    assert not done.get("isError") and done["structuredContent"]["decision"] == "appended"
