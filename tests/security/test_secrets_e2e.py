"""Issue 15 items 4-5 through a real socket: refused by ``remember``, never in the index, never in a log line."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from memoryd.indexer.storage.embedded.backend import DB_NAME
from tests.helpers import running_daemon
from tests.security.secrets_cases import REPRODUCTIONS
from tests.write_fixtures import WriteDaemon, start_write_daemon

# same watchdog warning as tests/e2e/test_write_e2e.py: harmless, but filterwarnings=error would kill its thread
pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")


@pytest.fixture
def wd(tmp_path: Path, short_dir: Path) -> Iterator[WriteDaemon]:
    w = start_write_daemon(tmp_path, short_dir, max_per_minute=1000, max_per_turn=1000)
    try:
        yield w
    finally:
        w.close()


def _distinctive(secret: str) -> list[str]:
    """The parts of a secret that could only come from it: runs with a digit, or of 8+ letters."""
    return [r for r in re.findall(r"[a-z0-9]{4,}", secret.lower()) if any(c.isdigit() for c in r) or len(r) >= 8]


def test_remember_refuses_every_reproduction_and_logs_no_secret(wd: WriteDaemon) -> None:
    before = {p: p.read_bytes() for p in wd.root.rglob("*.md")}
    with capture_logs() as logs:
        for name, note, _secret in REPRODUCTIONS:
            res = wd.client.call("remember", {"content": note})
            assert (res["decision"], res["stage"]) == ("rejected", "privacy"), (name, res)
    assert {p: p.read_bytes() for p in wd.root.rglob("*.md")} == before
    previews = [e["preview"] for e in logs if e["event"] == "write.rejected"]
    assert len(previews) == len(REPRODUCTIONS)
    dumped = json.dumps(logs, default=str, ensure_ascii=False)
    for name, _note, secret in REPRODUCTIONS:
        assert secret not in dumped, name
    assert all("[REDACTED:" in p or p == "[withheld]" for p in previews), previews
    audit = (wd.d.cfg.data_dir / "audit.jsonl").read_text(encoding="utf-8")
    assert all(secret not in audit for _n, _note, secret in REPRODUCTIONS)


def test_notes_written_by_hand_are_redacted_before_the_index(tmp_path: Path, short_dir: Path) -> None:
    """A file that already holds the secrets (an editor wrote it): the file keeps them, the index never sees them."""
    body = "\n\n".join(f"## {name}\n\n- {note}" for name, note, _secret in REPRODUCTIONS)
    files = {"MEMORY.md": f"# Memory\n\n{body}\n"}
    with running_daemon(tmp_path, short_dir / "m.sock", files, timeout=20) as (d, client, root):
        assert "AKIAIOSFODNN7EXAMPLE" in (root / "MEMORY.md").read_text(encoding="utf-8")
        hits = []
        for name, note, _secret in REPRODUCTIONS:
            for mode in ("keyword", "hybrid"):
                hits += client.call("search", {"query": f"{name} {note}", "mode": mode, "k": 50})["hits"]
        assert hits and any("[REDACTED:" in h["text"] for h in hits)
        d.index.save(force=True)
        db = sqlite3.connect(d.cfg.data_dir / DB_NAME)
        try:
            texts = "\n".join(t for (t,) in db.execute("SELECT heading || ' ' || text FROM chunks"))
            terms = "\n".join(t for (t,) in db.execute("SELECT terms FROM chunks_fts"))
        finally:
            db.close()
        served = "\n".join(f"{h.get('heading', '')} {h['text']}" for h in hits)
        for name, _note, secret in REPRODUCTIONS:
            assert secret not in texts and secret not in served, name
            for part in _distinctive(secret):
                assert part not in texts.lower() and part not in terms and part not in served.lower(), (name, part)
        assert texts.count("[REDACTED:") >= len(REPRODUCTIONS)
        assert "项目的OpenAI密钥[REDACTED:api_key]已经配置好了。" in texts  # the prose around it is kept as written
        for f in d.cfg.data_dir.rglob("*"):  # index, WAL, vectors, caches: not one byte of any secret
            data = f.read_bytes() if f.is_file() else b""
            for name, _note, secret in REPRODUCTIONS:
                assert secret.encode() not in data, (name, f)
