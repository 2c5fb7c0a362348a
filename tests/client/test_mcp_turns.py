"""An MCP write turn ends when the person answers or the agent stops writing (#42 item 6).

Before: every tool call, a search included, kept the turn open, so an agent that kept searching
after three writes never got its allowance back (until the 5-minute cut); and nothing the host
knew about a new user prompt reached the limiter. Clocks are injected: no test sleeps.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.daemon.api.limits import WriteLimiter
from memoryd.daemon.client import cli
from memoryd.daemon.client.mcp_server import DaemonBridge, TurnClock
from memoryd.daemon.client.mcp_tools import ToolError
from memoryd.daemon.client.rpc_client import RpcClientError
from memoryd.daemon.rpc.errors import ACCESS_DENIED
from tests.write_fixtures import WriteDaemon, start_write_daemon

FACTS = [
    "The billing service runs on PostgreSQL 16 in Frankfurt.",
    "Alice owns the onboarding checklist for new engineers.",
    "Mobile releases leave every second Thursday afternoon.",
    "Support escalations go to the tier2 Slack channel.",
    "Staging is rebuilt from scratch each Sunday night.",
]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def wd(tmp_path: Path, short_dir: Path) -> Iterator[WriteDaemon]:
    w = start_write_daemon(tmp_path, short_dir)  # 3 writes per turn, 10 per minute
    try:
        yield w
    finally:
        w.close()


def _fill_the_turn(bridge: DaemonBridge, clock: FakeClock) -> None:
    for fact in FACTS[:3]:
        clock.now += 2
        assert bridge.call_tool("memory_remember", {"content": fact})[1]["decision"] == "appended"
    with pytest.raises(ToolError, match="at most 3 writes per turn"):
        bridge.call_tool("memory_remember", {"content": FACTS[3]})


def test_searching_does_not_keep_a_write_turn_open(wd: WriteDaemon) -> None:
    clock = FakeClock()
    bridge = DaemonBridge(wd.socket, turns=TurnClock(gap_s=30.0, max_s=300.0, clock=clock))
    _fill_the_turn(bridge, clock)
    for _ in range(4):  # the agent keeps searching, every 10 s, for 40 s: no write meanwhile
        clock.now += 10
        bridge.call_tool("memory_search", {"query": "billing service"})
    assert bridge.turns.next_turn_in() == 0.0
    assert bridge.call_tool("memory_remember", {"content": FACTS[3]})[1]["decision"] == "appended"


def test_a_users_prompt_ends_every_agent_turn_at_once(
        wd: WriteDaemon, capsys: pytest.CaptureFixture[str]) -> None:
    clock = FakeClock()
    bridge = DaemonBridge(wd.socket, turns=TurnClock(gap_s=30.0, max_s=300.0, clock=clock))
    _fill_the_turn(bridge, clock)
    # What the Claude Code prompt hook runs for the person's next prompt (no time passes on the clock).
    assert cli.main(["context", "--user-prompt", "--json", "--socket", str(wd.socket), "billing"]) == 0
    assert '"text"' in capsys.readouterr().out
    assert bridge.call_tool("memory_remember", {"content": FACTS[3]})[1]["decision"] == "appended"


def test_only_the_owners_own_command_may_end_agent_turns(wd: WriteDaemon) -> None:
    for session in ({"kind": "owner", "turn": "mcp-1"}, {"kind": "direct", "peer": "alice"}):
        with pytest.raises(RpcClientError) as err:
            wd.client.call("user_prompt", {"session": session})
        assert err.value.code == ACCESS_DENIED and "only the owner's own commands" in err.value.message
    assert wd.client.call("user_prompt", {}) == {"turns_ended": 0}


def test_the_limiter_forgets_every_turn_at_a_prompt() -> None:
    limiter = WriteLimiter(per_turn=1, per_minute=100, clock=FakeClock())
    limiter.admit("owner", "t1")
    limiter.admit("group:g", "t2")
    assert limiter.user_prompt() == 2
    limiter.admit("owner", "t1")  # a fresh allowance under the same turn id
    limiter.admit("group:g", "t2")
