"""Keyword first in the daemon and in ``memoryd index``: progress in ``status``, the log and the
status line, one log line per indexed batch, and the one-shot command's bars."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import structlog

from memoryd.daemon.client.render import render_status
from memoryd.daemon.logs import reset_logging
from memoryd.daemon.oneshot import run_index
from memoryd.daemon.sdnotify import SystemdNotifier
from memoryd.daemon.work.progress import backlog_line, format_eta
from tests.helpers import make_config, running_daemon, wait_for


def _notes(n_files: int, sections: int = 4) -> dict[str, str]:
    return {f"n{i:03d}.md": f"# Note {i}\n\n" + "".join(f"## Part {j}\n\nThe tern{i}x{j} topic, item {j}.\n\n"
                                                      for j in range(sections)) for i in range(n_files)}


def test_a_large_start_is_keyword_first_with_progress_in_status_and_log(
        tmp_path: Path, short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines: list[str] = []
    monkeypatch.setattr(SystemdNotifier, "status", lambda self, text: lines.append(text) or True)
    with structlog.testing.capture_logs() as logs, running_daemon(tmp_path, short_dir / "s.sock", _notes(150)) as (
            _d, client, root):
        st = wait_for(lambda: (s := client.call("status"))["vectors"]["pending"] == 0 and s, what="vectors filled")
        assert st["index"]["vectors"] == st["chunks"] == 600
        assert set(st["vectors"]) == {"pending", "per_s", "eta_s"}
        (root / "n000.md").write_text("# Note 0\n\nA fresh line about herons.\n")
        wait_for(lambda: client.call("search", {"query": "herons", "k": 1, "mode": "vector"})["hits"], what="save")
        batch = wait_for(lambda: [e for e in logs if e["event"] == "index.batch"], what="index.batch log")
    events = [e["event"] for e in logs]
    assert "vectors.backlog" in events and "vectors.progress" in events and "vectors.done" in events
    progress = next(e for e in logs if e["event"] == "vectors.progress")
    assert progress["pending"] > 0 and "eta_s" in progress and "per_s" in progress
    done = next(e for e in logs if e["event"] == "vectors.done")
    assert done["chunks"] == 600
    reconciled = next(e for e in logs if e["event"] == "reconcile.done")
    assert reconciled["embedded"] == 0 and reconciled["vectors_pending"] == 600  # committed before any vector
    assert batch[0]["files"] == 1 and batch[0]["source"] == "changes" and "ms" in batch[0]
    backlog = [i for i, line in enumerate(lines) if line.startswith("embedding: ")]
    assert backlog and "chunks pending" in lines[backlog[0]]  # the systemd status line says the same
    assert lines[-1].startswith("watching"), lines[backlog[-1]:]  # and is put back when the backlog is done


def test_a_small_start_embeds_before_commit_as_before(tmp_path: Path, short_dir: Path) -> None:
    with running_daemon(tmp_path, short_dir / "s.sock", _notes(3)) as (_d, client, _root):
        st = client.call("status")
        assert st["vectors"]["pending"] == 0 and st["index"]["vectors"] == st["chunks"] == 12


def test_backlog_words_for_status_line_and_cli() -> None:
    assert backlog_line({"pending": 1200, "per_s": 12.0, "eta_s": 100.0}) == (
        "embedding: 1200 chunks pending, 12.0/s, about 2 min left (ranking from keywords only for them meanwhile)")
    assert backlog_line({"pending": 5, "per_s": None, "eta_s": None}).startswith("embedding: 5 chunks pending (")
    assert format_eta(42) == "42 s" and format_eta(3900) == "1 h 05 min"
    rows = dict(line.split("  ", 1) for line in render_status(
        {"vectors": {"pending": 300, "per_s": 10.0, "eta_s": 30.0}, "model": {}, "index": {},
         "cache": {"entries": 0, "hits": 0, "misses": 0}}).splitlines())
    assert rows["vectors pending"].strip() == \
        "300 (10.0/s, about 30 s left; ranking from keywords only: 300 vectors pending)"
    idle = render_status({"vectors": {"pending": 0}, "model": {}, "index": {},
                          "cache": {"entries": 0, "hits": 0, "misses": 0}})
    assert "vectors pending  0" in idle


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_index_command_shows_files_then_chunks_and_logs_above_the_bar(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "root"
    root.mkdir()
    for rel, text in _notes(20).items():
        (root / rel).write_text(text)
    err = _Tty()
    monkeypatch.setattr("sys.stderr", err)
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.setenv("LINES", "40")
    monkeypatch.setattr("tqdm.std.tqdm.monitor_interval", 0)  # no monitor thread left behind
    cfg = make_config(root, tmp_path / "data")
    try:
        assert run_index(cfg) == 0
    finally:
        reset_logging()  # run_index pointed the log handler at the fake terminal
    out = err.getvalue()
    assert "reading" in out and "file/s" in out
    assert "embedding" in out and "80/80" in out and "chunk/s" in out
    line = next(line for line in out.split("\n") if "reconcile.done" in line)
    assert "reconcile.done" in line.split("\r")[-1] and "reading" not in line.split("\r")[-1]  # the bar was cleared
    assert "embedded 80" in capsys.readouterr().out  # the summary line stays
