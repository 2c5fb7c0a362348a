"""``memoryd mcp`` ends quietly (issue #27, item 8).

Measured on main at 7c97e41: every normal shutdown (the host closes stdin) exited 1 with
``ValueError: I/O operation on closed file`` from the CLI's last ``sys.stdout.flush()``: the
SDK's stdio streams wrap ``sys.stdout.buffer`` and close it. Every MCP host logged a crash
per session. Now: exit 0 and nothing on stderr, with a real SDK client and with stdin at EOF.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import running_daemon

REPO = Path(__file__).resolve().parents[1]
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
