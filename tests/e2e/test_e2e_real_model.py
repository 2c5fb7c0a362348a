"""End to end with every real part: the e5 model, watchdog, the Unix socket, a subprocess daemon."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memoryd.daemon.client.rpc_client import Client
from tests.helpers import listening, wait_for

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow

NOTES = {
    "MEMORY.md": "# Memory\n\n## Preferences\n\n- The user prefers Neovim over Vim for editing.\n"
                 "- Deploys happen on Fridays after the standup.\n",
    "memory/2024-03-01.md": "# 2024-03-01\n\n- Booked flights to Lisbon for the conference.\n"
                            "- 周末和朋友去爬山，天气很好。\n",
}


@pytest.mark.timeout(240)
def test_real_model_watcher_and_socket(tmp_path: Path, short_dir: Path) -> None:
    root = tmp_path / "root"
    for rel, text in NOTES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    sock = short_dir / "s.sock"
    env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "noconfig")  # built-in defaults: the real e5 model
    cmd = [sys.executable, "-m", "memoryd.daemon.cli", "run", "--root", str(root), "--data-dir", str(tmp_path / "data"),
           "--socket", str(sock)]
    log = open(tmp_path / "daemon.log", "wb")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: listening(sock), timeout=120, what="daemon socket (model build on first start)")
        with Client(sock, timeout=60) as c:
            wait_for(lambda: (st := c.call("status"))["files"] == 2 and not st["reconciling"] and not st["pending"],
                     timeout=120, what="start-up index")
            assert c.call("status")["model"]["id"].startswith("multilingual-e5-small")
            assert c.call("status")["model"]["queries"] == "int8"
            # semantic: no shared keyword between the question and the line
            hit = c.call("search", {"query": "which text editor does the user like", "k": 1, "mode": "vector"})
            assert hit["hits"][0]["path"] == "MEMORY.md"
            zh = c.call("search", {"query": "爬山", "k": 1})["hits"][0]
            assert zh["path"] == "memory/2024-03-01.md" and zh["start_line"] <= 4 <= zh["end_line"]
            # a save is picked up by the watcher and embedded by the real model
            (root / "memory" / "2024-03-02.md").write_text(
                "# 2024-03-02\n\n- Adopted a grey cat named Pixel from the shelter.\n", encoding="utf-8")

            def found() -> bool:
                hits = c.call("search", {"query": "did we get a pet", "k": 1, "mode": "hybrid"})["hits"]
                return bool(hits) and hits[0]["path"] == "memory/2024-03-02.md"

            wait_for(found, timeout=30, what="new note searchable")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0 and not sock.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
