"""Limits that hold (issue "Trust", reproduction 10).

MCP never sent a turn, so "3 writes per turn" never reached MCP agents (5
``memory_remember`` in a row were all appended); the limiter kept one bucket
per session key forever (30k new peer ids: +14 MB); the same flood rotated
~20 MB of audit history away in about a minute.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from memoryd.daemon.api.audit import DENIAL_WINDOW_S, MAX_DENIAL_KEYS, AuditLog
from memoryd.daemon.api.limits import MAX_SESSIONS_KEPT, WINDOW_S, RateLimited, WriteLimiter
from memoryd.daemon.client.mcp_server import DaemonBridge, TurnClock
from memoryd.daemon.client.mcp_tools import ToolError
from tests.write_fixtures import WriteDaemon, start_write_daemon


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def wd(tmp_path: Path, short_dir: Path) -> Iterator[WriteDaemon]:
    w = start_write_daemon(tmp_path, short_dir)
    try:
        yield w
    finally:
        w.close()


FACTS = [
    "The billing service runs on PostgreSQL 16 in the eu-west region.",
    "Alice owns the onboarding checklist for new engineers.",
    "The mobile app release train leaves every second Thursday.",
    "Customer support escalations go to the #support-tier2 channel.",
    "The staging cluster is rebuilt from scratch every Sunday night.",
]


def test_mcp_agent_is_held_to_the_per_turn_limit(wd: WriteDaemon) -> None:
    bridge = DaemonBridge(wd.socket, {"kind": "direct", "peer": "eve"})
    outcomes: list[str] = []
    for fact in FACTS:  # five remembers in a row: one turn
        try:
            outcomes.append(bridge.call_tool("memory_remember", {"content": fact})[1]["decision"])
        except ToolError as exc:
            outcomes.append(str(exc))
    per_turn = wd.d.cfg.write.max_per_turn
    assert outcomes[:per_turn] == ["appended"] * per_turn
    assert all("at most 3 writes per turn" in o for o in outcomes[per_turn:]), outcomes
    denied = [r for r in wd.client.call("audit", {"tail": 50})["entries"] if r.get("code") == -32021]
    assert denied and denied[0]["session"]["turn"].startswith("mcp-")


def test_a_pause_starts_a_new_mcp_turn() -> None:
    clock = FakeClock()
    turns = TurnClock(gap_s=30.0, max_s=300.0, clock=clock)
    first = turns.tick()
    clock.now += 10
    assert turns.tick() == first  # a burst: same turn
    clock.now += 31
    second = turns.tick()
    assert second != first  # a pause longer than the gap: the next turn
    for _ in range(40):  # calls every 10 s never pause, but a turn is cut after max_s
        clock.now += 10
        last = turns.tick()
    assert last != second


def test_turn_ids_differ_between_bridges() -> None:
    assert TurnClock().tick() != TurnClock().tick()


def test_limiter_state_is_bounded_for_100k_session_keys() -> None:
    clock = FakeClock()
    lim = WriteLimiter(per_turn=3, per_minute=10, clock=clock)
    tracemalloc.start()
    try:
        for i in range(MAX_SESSIONS_KEPT):
            lim.admit(f"direct:peer{i}", f"t{i}")
        base = tracemalloc.get_traced_memory()[0]
        for i in range(MAX_SESSIONS_KEPT, 100_000):
            lim.admit(f"direct:peer{i}", f"t{i}")
            clock.now += 0.0001
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert len(lim._recent) <= MAX_SESSIONS_KEPT  # the per-minute windows held
    assert grown < 1_000_000, f"memory kept growing: +{grown} bytes for 90k more keys"
    clock.now += WINDOW_S + 1
    lim.admit("owner", None)
    assert len(lim._recent) == 1  # expired windows are forgotten


def test_limits_still_hold_for_a_live_session_amid_a_flood() -> None:
    clock = FakeClock()
    lim = WriteLimiter(per_turn=3, per_minute=10, clock=clock)
    for _ in range(10):
        lim.admit("direct:alice", None)
    for i in range(5000):
        lim.admit(f"direct:p{i}", None)
    with pytest.raises(RateLimited, match="per minute"):
        lim.admit("direct:alice", None)


def _lines(path: Path) -> list[dict[str, object]]:
    out = []
    for f in sorted(path.parent.glob(path.name + "*")):
        out += [json.loads(x) for x in f.read_text().splitlines()]
    return out


def test_a_denial_flood_keeps_the_audit_history(tmp_path: Path) -> None:
    clock = FakeClock()
    log = AuditLog(tmp_path / "audit.jsonl", 5_000_000, 3, clock=clock)
    log.record(uid=1000, session={"kind": "owner"}, action="remember", path="MEMORY.md", line=3,
               decision="appended", reason="new fact")
    for i in range(30_000):  # 30k new peer ids, each refused, plus one session hammering
        log.record(uid=1000, session={"kind": "direct", "peer": f"p{i}"}, action="remember",
                   decision="denied", reason="rate limit: at most 10 writes per minute", code=-32022)
        log.record(uid=1000, session={"kind": "direct", "peer": "mallory"}, action="remember",
                   decision="denied", reason="permission denied", code=-32020)
    log.flush()
    records = _lines(tmp_path / "audit.jsonl")
    assert records[0]["decision"] == "appended" and records[0]["path"] == "MEMORY.md"  # history kept
    assert len(records) <= 2 * MAX_DENIAL_KEYS + 2
    assert sum(int(str(r.get("count", 1))) for r in records if r["decision"] == "denied") == 60_000
    mallory = [r for r in records if r.get("session") == {"kind": "direct", "peer": "mallory"}]
    assert mallory[0].get("count") is None and mallory[-1]["count"] == 29_999  # first in full, then a summary
    assert not list(tmp_path.glob("audit.jsonl.*")), "the flood rotated the log"


def test_sustained_denials_write_a_bounded_number_of_records_per_window(tmp_path: Path) -> None:
    clock = FakeClock()
    log = AuditLog(tmp_path / "audit.jsonl", 5_000_000, 3, clock=clock)
    for window in range(10):
        for i in range(1000):
            log.record(session={"kind": "direct", "peer": f"w{window}p{i}"}, action="remember",
                       decision="rejected", reason="looks like a secret", rule="privacy.api_key")
        clock.now += DENIAL_WINDOW_S
    log.flush()
    records = _lines(tmp_path / "audit.jsonl")
    assert len(records) <= 10 * (MAX_DENIAL_KEYS + 1)
    assert sum(int(str(r.get("count", 1))) for r in records) == 10_000


def test_allowed_writes_and_errors_are_never_aggregated(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", 5_000_000, 3)
    for i in range(100):
        log.record(session={"kind": "owner"}, action="remember", decision="appended", line=i)
    assert len(_lines(tmp_path / "audit.jsonl")) == 100


def test_tail_shows_counts_so_far(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", 5_000_000, 3)
    for _ in range(5):
        log.record(session={"kind": "owner"}, action="forget", decision="denied", reason="x", code=-32028)
    tail = log.tail(10)
    assert [r.get("count") for r in tail] == [None, 4]


@pytest.mark.slow
def test_spawned_memoryd_mcp_applies_the_turn_limit(wd: WriteDaemon, tmp_path: Path) -> None:
    """The same through the real ``memoryd mcp`` process and the SDK's client, as a host runs it."""
    from typing import Any

    from tests.client.test_mcp import run_session, text_of

    async def body(s: Any) -> list[Any]:
        return [await s.call_tool("memory_remember", {"content": fact}) for fact in FACTS]

    results = run_session(wd.socket, tmp_path / "mcp.log", body, "--session", "direct", "--peer", "eve")
    assert [r.isError for r in results] == [False, False, False, True, True]
    assert all("writes per turn" in text_of(r) for r in results[3:])
