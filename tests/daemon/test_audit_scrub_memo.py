"""The audit's secret scrub runs once per recurring string (daemon/api/audit.py ``_scrubbed``).

Every read writes a record whose strings (session kind, action, decision, hit paths) mostly
recur from one search to the next; the detector cost ~0.5 ms of each search for answers it
already had. Remembered answers must still be the detector's: a secret stays redacted.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.api import audit
from memoryd.daemon.api.audit import AuditLog


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = audit.privacy.redact

    def redact(text: str, level: str = "all") -> str:
        calls.append(text)
        return real(text, level)

    monkeypatch.setattr(audit.privacy, "redact", redact)
    return calls


def _read_record(tag: str) -> dict[str, Any]:
    return {"uid": 1000, "pid": 42, "session": {"kind": "owner"}, "action": "search", "decision": "read",
            "hits": 2, "paths": [f"notes/{tag}.md", "notes/ghp_1234567890abcdefghijklmnopqrstuvwxyzAB.md"]}


def test_a_recurring_record_is_not_scanned_again_and_its_secret_stays_redacted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    log = AuditLog(tmp_path / "audit-reads.jsonl", 1_000_000, 2)
    tag = uuid.uuid4().hex  # strings no earlier test can have scanned
    log.record(**_read_record(tag))
    first = len(calls)
    log.record(**_read_record(tag))
    assert len(calls) == first  # every string of the second record was answered from the memo
    lines = [json.loads(x) for x in (tmp_path / "audit-reads.jsonl").read_text().splitlines()]
    assert [r["paths"] for r in lines] == [[f"notes/{tag}.md", "notes/[REDACTED:github_token].md"]] * 2
    assert all("ghp_" not in json.dumps(r) for r in lines)


def test_a_new_string_is_scanned_and_a_time_not_of_our_own_shape_is_scrubbed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    log = AuditLog(tmp_path / "audit-reads.jsonl", 1_000_000, 2)
    tag = uuid.uuid4().hex
    log.record(**_read_record(tag))
    assert f"notes/{tag}.md" in calls
    assert not any(c.endswith("+00:00") for c in calls)  # the record's own time is not client text
    assert audit._scrub_field("since", "ghp_1234567890abcdefghijklmnopqrstuvwxyzAB") == "[REDACTED:github_token]"


def test_long_strings_are_scanned_every_time_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _counting(monkeypatch)
    log = AuditLog(tmp_path / "audit-reads.jsonl", 1_000_000, 2)
    reason = "x" * (audit.SCRUB_MEMO_CHARS + 1)
    for _ in range(2):
        log.record(uid=1, session={"kind": "owner"}, action="search", decision="error", reason=reason)
    assert calls.count(reason) == 2
