"""Refusal counts not yet summarised survive a kill (daemon/api/audit.py, ``audit.jsonl.pending``).

Repeated refusals are only counted in memory until their window ends; before the
pending file they were lost on ``kill -9``. These tests kill a real process with
SIGKILL, and check the save rate and that a recovered count is never written twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.api import audit
from memoryd.daemon.api.audit import PENDING_SAVE_S, AuditLog


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


REFUSAL: dict[str, Any] = {"uid": 1000, "session": {"kind": "direct", "peer": "eve"}, "action": "remember",
                           "decision": "rejected", "reason": "looks like a secret", "rule": "privacy.password"}


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def _counts(path: Path) -> list[int | None]:
    return [r.get("count") for r in _records(path)]


CHILD = """
import os, sys
from memoryd.daemon.api.audit import AuditLog
log = AuditLog(__import__("pathlib").Path(sys.argv[1]), 5_000_000, 3, clock=lambda: 0.0)  # time stands still
rec = {"uid": 1000, "session": {"kind": "direct", "peer": "eve"}, "action": "remember",
       "decision": "rejected", "reason": "looks like a secret", "rule": "privacy.password"}
for _ in range(6):
    log.record(**rec)
print("counted", flush=True)
sys.stdin.read()  # wait here until killed
"""


def test_counts_survive_sigkill_and_are_written_at_the_next_start(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    with subprocess.Popen([sys.executable, "-c", CHILD, str(path)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().strip() == "counted"
            os.kill(child.pid, signal.SIGKILL)
            assert child.wait(timeout=30) == -signal.SIGKILL
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=30)
    assert _counts(path) == [None]  # the first refusal in full; its repeats only counted when killed
    log = AuditLog(path, 5_000_000, 3)
    assert log.recover() == 1
    records = _records(path)
    assert [r.get("count") for r in records] == [None, 1]  # 1st repeat saved at once; the rest fell in its interval
    assert records[1]["session"] == REFUSAL["session"] and records[1]["rule"] == REFUSAL["rule"]
    assert not log.pending_path.exists()
    assert AuditLog(path, 5_000_000, 3).recover() == 0 and len(_records(path)) == 2


def test_saves_are_bounded_to_one_per_interval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    saves: list[bytes] = []
    monkeypatch.setattr(audit, "atomic_write_bytes", lambda _p, data, **_kw: saves.append(data))
    clock = FakeClock()
    log = AuditLog(tmp_path / "audit.jsonl", 5_000_000, 3, clock=clock)
    for _ in range(1000):
        log.record(**REFUSAL)
    assert len(saves) == 1
    clock.now += PENDING_SAVE_S
    log.record(**REFUSAL)
    assert len(saves) == 2 and json.loads(saves[-1])[0]["count"] == 1000


def test_every_count_is_recovered_when_the_last_save_came_after_the_last_refusal(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, 5_000_000, 3, clock=clock)
    for _ in range(5):
        log.record(**REFUSAL)
    clock.now += PENDING_SAVE_S
    log.record(**REFUSAL)  # "killed" here: log is dropped without flush
    assert AuditLog(path, 5_000_000, 3).recover() == 1
    assert _counts(path) == [None, 5]


def test_a_summary_already_in_the_log_is_not_written_twice(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, 5_000_000, 3, clock=clock)
    for _ in range(3):
        log.record(**REFUSAL)
    left = log.pending_path.read_bytes()  # saved with count 1
    log.flush()  # the summary (count 2) is appended and the file removed ...
    assert not log.pending_path.exists()
    log.pending_path.write_bytes(left)  # ... as if killed between the two
    assert AuditLog(path, 5_000_000, 3).recover() == 0
    assert _counts(path) == [None, 2]
    assert not log.pending_path.exists()


def test_a_new_window_removes_the_file_and_an_unreadable_one_is_dropped(tmp_path: Path) -> None:
    clock = FakeClock()
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, 5_000_000, 3, clock=clock)
    log.record(**REFUSAL)
    log.record(**REFUSAL)
    assert log.pending_path.exists() and oct(log.pending_path.stat().st_mode & 0o777) == "0o600"
    clock.now += audit.DENIAL_WINDOW_S
    log.record(uid=1000, session={"kind": "owner"}, action="remember", decision="appended")
    assert not log.pending_path.exists()
    assert _counts(path) == [None, 1, None]
    log.pending_path.write_text("{not json", encoding="utf-8")
    assert AuditLog(path, 5_000_000, 3).recover() == 0
    assert not log.pending_path.exists() and len(_records(path)) == 3
