"""``memoryd remember / forget / audit``: the parsers ``memoryd.daemon.cli`` adds, run against a live socket."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from memoryd.daemon.client import cli_write
from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.indexer.errors import NotRunningError
from memoryd.indexer.write.router import TYPES
from tests.write_fixtures import WriteDaemon

# watchdog warns "Callback with id ... already exists" when memoryd creates nested folders (peers/ID/)
# faster than its inotify thread adds watches; harmless, but filterwarnings=error would kill that thread
# (same as tests/daemon/test_watcher.py).
pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")


def run(w: WriteDaemon | None, *argv: str, socket: str | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memoryd")
    cli_write.add_parsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args([argv[0], "--socket", socket or str(w.socket), *argv[1:]])  # type: ignore[union-attr]
    return cli_write.COMMANDS[args.command](args)


_LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \[")


def output(capsys: pytest.CaptureFixture[str]) -> str:
    """What the command printed (the in-process daemon's log lines share stdout here)."""
    return "".join(x for x in capsys.readouterr().out.splitlines(keepends=True) if not _LOG_LINE.match(x))


def test_types_match_the_router() -> None:
    assert cli_write.TYPES == TYPES


def test_remember_forget_audit(wd: WriteDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(wd, "remember", "The", "user", "prefers", "window", "seats", "on", "flights.") == 0
    out = output(capsys)
    assert out.startswith("appended: user/preferences.md:7 (")
    assert run(wd, "remember", "--json", "--type", "instruction", "Always book window seats on flights.") == 0
    res = json.loads(output(capsys))
    assert (res["decision"], res["path"], res["type"]) == ("appended", "user/instructions.md", "instruction")
    assert run(wd, "remember", "好的") == cli_write.EXIT_REJECTED
    assert output(capsys).startswith("rejected (too_short): too short")
    assert run(wd, "forget", "user/preferences.md:7") == 0
    assert output(capsys) == "removed: user/preferences.md:7: The user prefers window seats on flights.\n"
    assert run(wd, "forget", "no-line-number") == 2
    with pytest.raises(RpcClientError, match="no memory entry"):
        run(wd, "forget", "user/preferences.md:7")
    output(capsys)
    assert run(wd, "audit", "--tail", "3") == 0
    lines = output(capsys).splitlines()
    assert len(lines) == 3 and "rejected" in lines[0] and "removed" in lines[1] and "denied" in lines[2]
    assert run(wd, "audit", "--json", "--tail", "1") == 0
    assert json.loads(output(capsys))["entries"][0]["action"] == "forget"


def test_remember_with_a_namespace(wd: WriteDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(wd, "remember", "--namespace", "agent:coder", "We decided to use Redis for sessions.") == 0
    assert "agents/coder/agent/decisions.md" in output(capsys)
    assert (wd.root / "agents" / "coder" / "agent" / "decisions.md").is_file()


def test_no_daemon_is_not_running_error(tmp_path) -> None:
    with pytest.raises(NotRunningError, match="not running"):
        run(None, "audit", socket=str(tmp_path / "none.sock"))
