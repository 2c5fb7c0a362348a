"""Memory comes back after work (#42 item 3): a real daemon with the default model, a bulk re-index
and its line vectors, then idle again within 1.2x its idle before the work and at most 250 MB.

Before: the idle RSS was 250-300 MB (the 60 MB word table read whole into anonymous memory, and a
daemon after work held ~20-45 MB more than a fresh one). No timing is relied on: each step waits
for the daemon's own word (``status`` idle, the ``model.bulk_session_released`` log line), bounded.
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

from memoryd.daemon.client.rpc_client import Client
from memoryd.daemon.procstat import rss_bytes
from tests.helpers import listening, wait_for

REPO = Path(__file__).resolve().parents[2]
MB = 2**20
IDLE_CEILING_MB = 250
pytestmark = pytest.mark.slow

WORDS = ["deploy", "billing", "service", "onboarding", "checklist", "migration", "review", "backups", "dashboard",
         "latency", "release", "postgres", "cache", "incident", "retro", "部署", "数据库", "会议", "周末", "flights",
         "Lisbon", "conference"]


def _note(i: int, lines: int) -> str:
    body = [f"- {WORDS[(i + n) % len(WORDS)]} {WORDS[(i * 7 + n) % len(WORDS)]} note {i}.{n}: decided to "
            f"{WORDS[(i + 3 * n) % len(WORDS)]} before {WORDS[(n * 5) % len(WORDS)]}" for n in range(lines)]
    return f"# Note {i}\n\n" + "\n".join(body) + "\n"


def _events(log: Path, name: str) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("event") == name:
            out.append(rec)
    return out


def _idle(c: Client) -> bool:
    st = c.call("status")
    return bool(st["fresh"] and not (st.get("line_vectors") or {}).get("pending"))


def _settled_rss(proc: subprocess.Popen[bytes], c: Client, log: Path, released_before: int) -> float:
    """Idle, line vectors in, and the bulk session (if one was opened) released: the RSS then, in MB."""
    wait_for(lambda: _idle(c), timeout=300, what="the daemon idle with every line vector")
    if len(_events(log, "model.bulk_session_opened")) > released_before:
        wait_for(lambda: len(_events(log, "model.bulk_session_released")) > released_before, timeout=180,
                 what="model.bulk_session_released")
    rss = rss_bytes(Path(f"/proc/{proc.pid}/status"))
    assert rss is not None
    return rss / MB


@pytest.mark.timeout(900)
def test_idle_memory_after_a_bulk_reindex_and_line_fill_comes_back(tmp_path: Path, short_dir: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for i in range(40):
        (root / f"n{i:02d}.md").write_text(_note(i, 3), encoding="utf-8")
    sock, log = short_dir / "m.sock", tmp_path / "daemon.log"
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "noconfig")  # built-in defaults: the default model
    cmd = [sys.executable, "-m", "memoryd.daemon.cli", "run", "--root", str(root), "--data-dir",
           str(tmp_path / "data"), "--socket", str(sock)]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: listening(sock), timeout=240, what="the daemon socket")
        with Client(sock, timeout=60) as c:
            before = _settled_rss(proc, c, log, 0)
            released = len(_events(log, "model.bulk_session_released"))
            for i in range(40):  # every chunk and line new: bulk embedding on the background session
                (root / f"n{i:02d}.md").write_text(_note(i + 100, 20) + "- zebracorn\n", encoding="utf-8")

            def rewritten() -> bool:  # keyword first: every new chunk is in before its vectors are
                hits = c.call("search", {"query": "zebracorn", "mode": "keyword", "k": 50})["hits"]
                return len({h["path"] for h in hits}) == 40

            wait_for(rewritten, timeout=300, what="the rewritten notes indexed")
            after = _settled_rss(proc, c, log, released)
            lines = c.call("status").get("line_vectors")
        assert len(_events(log, "model.bulk_session_opened")) > released, "the work ran on the bulk session"
        assert lines is None or not lines.get("pending")
        assert after <= 1.2 * before, (before, after)
        assert after <= IDLE_CEILING_MB, (before, after)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
