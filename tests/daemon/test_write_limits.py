"""Rate limits (per turn, per minute, per session) and the audit log (append-only, rotated, no content)."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from memoryd.daemon.api.audit import AuditLog
from memoryd.daemon.api.limits import RateLimited, WriteLimiter


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_three_writes_per_turn_then_the_turn_limit() -> None:
    lim = WriteLimiter(3, 10, FakeClock())
    for _ in range(3):
        lim.admit("direct:alice", "t1")
    with pytest.raises(RateLimited) as e:
        lim.admit("direct:alice", "t1")
    assert e.value.limit == "write.max_per_turn" and e.value.maximum == 3 and "per turn" in str(e.value)
    lim.admit("direct:alice", "t2")  # a new turn
    lim.admit("direct:bob", "t1")  # another session, same turn id
    lim.admit("direct:alice", None)  # no turn id: only the minute counts


def test_ten_per_minute_sliding_window_and_refusals_are_not_counted() -> None:
    clock = FakeClock()
    lim = WriteLimiter(3, 10, clock)
    for i in range(10):
        clock.t += 1
        lim.admit("owner", None if i % 2 else f"turn{i}")
    for _ in range(5):  # refused attempts do not extend the lock-out
        with pytest.raises(RateLimited) as e:
            lim.admit("owner", None)
        assert e.value.limit == "write.max_per_minute" and e.value.retry_after_s == 51.0
    lim.admit("group:g", None)  # other sessions are unaffected
    clock.t += 51.0  # the first attempt leaves the window
    lim.admit("owner", None)
    with pytest.raises(RateLimited):
        lim.admit("owner", None)


def test_limiter_is_thread_safe() -> None:
    lim = WriteLimiter(1000, 50, FakeClock())
    admitted = []

    def hammer() -> None:
        for _ in range(20):
            try:
                lim.admit("owner", "t")
                admitted.append(1)
            except RateLimited:
                pass

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(admitted) == 50


def test_audit_records_are_json_lines_without_content(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", 10_000, 2)
    log.record(uid=1000, session={"kind": "owner"}, action="remember", namespace="default",
               path="user/preferences.md", line=7, bytes=42, decision="appended", reason="new fact")
    log.record(uid=1000, action="remember", decision="denied", reason="rate limit", code=-32022)
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    assert first["path"] == "user/preferences.md" and first["bytes"] == 42 and "time" in first
    assert json.loads(lines[1])["code"] == -32022 and "path" not in json.loads(lines[1])
    assert os.stat(tmp_path / "audit.jsonl").st_mode & 0o777 == 0o600
    with pytest.raises(ValueError, match="content"):
        log.record(action="remember", content="a secret must never get here")


def test_audit_rotation_keeps_backups_and_tail_spans_them(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", 4096, 2)
    for i in range(200):
        log.record(action="remember", line=i, decision="appended", reason="x" * 40)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["audit.jsonl", "audit.jsonl.1", "audit.jsonl.2"]
    assert all(p.stat().st_size <= 4096 for p in tmp_path.iterdir())
    tail = log.tail(60)
    assert [r["line"] for r in tail] == list(range(140, 200))
    assert log.tail(100_000)[-1]["line"] == 199 and len(log.tail(100_000)) < 200  # oldest dropped


def test_audit_without_backups_truncates(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl", 4096, 0)
    for i in range(100):
        log.record(action="forget", line=i)
    assert [p.name for p in tmp_path.iterdir()] == ["audit.jsonl"]
    assert log.tail(1)[0]["line"] == 99
