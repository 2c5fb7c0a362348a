"""Long writes never hold the index worker: an import runs in slices, a dry run never touches the worker,
and the CLI waits as long as the daemon reports progress (issue #27 item 5)."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.app import Daemon
from memoryd.daemon.client.long_call import call_with_progress
from memoryd.daemon.client.rpc_client import Client
from memoryd.indexer.config import Config
from memoryd.indexer.errors import DaemonError
from tests.helpers import running_daemon, wait_for
from tests.write_fixtures import HASH_WRITE

pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")


@pytest.fixture
def daemon(tmp_path: Path, short_dir: Path) -> Iterator[tuple[Daemon, Client, Path]]:
    def tweak(cfg: Config) -> Config:
        return dataclasses.replace(cfg, write=dataclasses.replace(cfg.write, **HASH_WRITE))  # type: ignore[arg-type]

    files = {"MEMORY.md": "# Memory\n\n- The office is in Lisbon.\n",
             "user/preferences.md": "## Preferences\n\n- The user prefers window seats on long flights.\n"}
    with running_daemon(tmp_path, short_dir / "m.sock", files, timeout=20, tweak=tweak) as started:
        yield started


def _jsonl(n: int) -> str:
    words = ["harbour", "violet", "granite", "lantern", "meadow", "copper", "thistle", "orchard", "falcon", "ember"]
    return "".join(json.dumps({"text": f"The user noted item {i}: the {words[i % 10]} plan uses "
                                       f"{words[(i * 3) % 10]} and {words[(i * 7) % 10]} number {i * 37}."}) + "\n"
                   for i in range(n))


def _slow_embedder(d: Daemon, delay_s: float) -> None:
    inner = d.index.embedder.embed_passages

    def slow(texts: Any) -> Any:
        time.sleep(delay_s)  # stands for a real model on a busy machine: each write costs real time
        return inner(texts)

    d.index.embedder.embed_passages = slow  # type: ignore[method-assign]


def test_a_save_during_a_long_import_is_searchable_before_the_import_ends(daemon) -> None:
    d, client, root = daemon
    _slow_embedder(d, 0.03)
    done = threading.Event()
    result: dict[str, Any] = {}

    def run_import() -> None:
        with Client(d.cfg.socket_path, timeout=600) as c:
            result["r"] = c.call("import", {"data": _jsonl(120)})
        done.set()

    threading.Thread(target=run_import, daemon=True).start()
    wait_for(lambda: any(j["done"] > 3 for j in client.call("status")["jobs"]), timeout=60, what="the import started")
    (root / "saved.md").write_text("# Saved\n\n- zanzibarquokka was saved in the editor.\n")
    wait_for(lambda: client.call("search", {"query": "zanzibarquokka", "mode": "keyword"})["hits"], timeout=60,
             what="the save is searchable")
    assert not done.is_set(), "the import had already finished: the save did not get in between its slices"
    job = client.call("status")["jobs"][0]
    assert job["kind"] == "import" and 0 < job["done"] < job["total"] == 240  # each line: decided, then done
    assert done.wait(300)
    assert sum(result["r"]["summary"].values()) == 120 and len(result["r"]["entries"]) == 120
    assert client.call("status")["jobs"] == []


def test_a_dry_run_never_waits_for_the_worker_and_writes_nothing(daemon) -> None:
    d, client, root = daemon
    before = {p: p.read_bytes() for p in root.rglob("*.md")}
    release = threading.Event()
    blocked = d.worker.call(lambda: release.wait(60))  # the worker is busy with something long
    try:
        line = json.dumps({"text": "The user prefers window seats on long flights."})  # in its route's file
        res = client.call("import", {"data": _jsonl(30) + line + "\n", "dry_run": True})
        assert not blocked.done(), "the dry run waited for the worker"
    finally:
        release.set()
    assert res["dry_run"] is True and sum(res["summary"].values()) == 31
    assert res["entries"][-1]["decision"] == "would_reinforce"
    assert {p: p.read_bytes() for p in root.rglob("*.md")} == before


def test_the_cli_call_gives_up_only_when_progress_stops(daemon) -> None:
    d, _client, _root = daemon
    release = threading.Event()
    d.worker.call(lambda: release.wait(60))  # a real import can make no progress while this holds the worker
    try:
        t0 = time.monotonic()
        with pytest.raises(DaemonError, match="no progress on import"):
            call_with_progress(d.cfg.socket_path, "import", {"data": _jsonl(5)}, "import", stall_s=1.5)
        assert time.monotonic() - t0 < 30  # the stall check, not a socket timeout, ended it
    finally:
        release.set()
    res = call_with_progress(d.cfg.socket_path, "import", {"data": _jsonl(5), "dry_run": True}, "import")
    assert res["dry_run"] is True and len(res["entries"]) == 5


def test_the_progress_bar_writes_its_carriage_returns_to_the_real_terminal(monkeypatch) -> None:
    """The CLI escapes control characters on stderr (termsafe); the bar must bypass that wrapper, or a
    terminal shows "\\x0d" between its frames (seen in tmux)."""
    import io
    import sys

    from memoryd.daemon.client import long_call
    from memoryd.daemon.client.termsafe import SafeStream

    raw = io.StringIO()
    monkeypatch.setattr(sys, "stderr", SafeStream(raw))
    assert long_call._terminal() is raw
    monkeypatch.setattr(sys, "stderr", raw)
    assert long_call._terminal() is raw
