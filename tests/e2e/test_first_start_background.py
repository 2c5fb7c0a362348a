"""A real first start (``memoryd run``, the e5 model, an empty model cache): the model builds in the
background, then search is hybrid; the next start loads it before serving, as every warm start does."""

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
from tests.helpers import listening, wait_for

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

NOTE = "# Memory\n\n- The user prefers Neovim over Vim for editing.\n"


def _events(log: Path, name: str) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith("{") and f'"{name}"' in line:
            event = json.loads(line)
            if event.get("event") == name:
                out.append(event)
    return out


def _start(tmp_path: Path, sock: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "noconfig")  # built-in defaults: the real e5 model
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # a model cache of its own: empty at the first start
    cmd = [sys.executable, "-m", "memoryd.daemon.cli", "run", "--root", str(tmp_path / "root"),
           "--data-dir", str(tmp_path / "data"), "--socket", str(sock)]
    with log.open("ab") as out:
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.timeout(300)
def test_a_first_start_serves_while_the_model_builds_and_the_next_start_loads_it(
        tmp_path: Path, short_dir: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "MEMORY.md").write_text(NOTE, encoding="utf-8")
    sock, log = short_dir / "s.sock", tmp_path / "daemon.log"
    proc = _start(tmp_path, sock, log)
    try:
        wait_for(lambda: listening(sock), timeout=60, what="the socket (no model needed)")
        with Client(sock, timeout=60) as c:
            found = wait_for(lambda: c.call("search", {"query": "Neovim", "mode": "keyword"})["hits"], timeout=60,
                             what="a keyword hit")
            assert found[0]["path"] == "MEMORY.md"
            wait_for(lambda: "model_build" not in (st := c.call("status")) and st["vectors"]["pending"] == 0,
                     timeout=240, what="the model built in the background and every vector")
            hit = c.call("search", {"query": "which text editor does the user like", "k": 1, "mode": "vector"})
            assert "degraded" not in hit and hit["hits"][0]["path"] == "MEMORY.md"  # semantic: the model's
        assert _stop(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    (ready,) = _events(log, "daemon.ready")
    assert ready["model_state"] == "building in the background"
    assert [e["model"] for e in _events(log, "model.ready")] == [ready["model"]]
    assert not _events(log, "model.build_failed")

    proc = _start(tmp_path, sock, log)  # warm: the cache holds the model
    try:
        wait_for(lambda: listening(sock), timeout=60, what="the warm start's socket")
        with Client(sock, timeout=60) as c:
            assert "model_build" not in c.call("status")
        assert _stop(proc) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert [e["model_state"] for e in _events(log, "daemon.ready")] == ["building in the background", "loaded"]
    assert len(_events(log, "model.built")) == 1  # built once
