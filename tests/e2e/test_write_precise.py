"""SIGKILL aimed at each write-ahead step of ``clear`` and ``import``, in a real daemon process.

The daemon (``python -m memoryd.daemon.cli run``, hash embedder) runs with ``tests/shims`` on its
``PYTHONPATH``; the shim pauses it right after one step of an edit (``edit_journaled``: the journal
file is durable; ``edit_written``: the memory file is replaced; ``edit_recorded``: the history is
appended and fsynced) and the test SIGKILLs it there, restarts it and checks from the files and the
history: every entry is in a file or in the history, none twice, no history id twice, the journal is
empty, and the interrupted edit is either wholly absent (killed before the file changed) or complete
and undoable byte for byte. ``tests/write/test_write_ahead.py`` covers every kind of edit in-process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_chaos_precise import REPO, SHIMS, _bench
from tests.helpers import wait_for

POINTS = ("edit_journaled", "edit_written", "edit_recorded")
ACTIONS = ("clear", "import")
BOB = [f"Bob's note {i}: the {('harbour', 'granite', 'meadow')[i % 3]} plan, step {i * 7}." for i in range(300)]
# One new fact, 30 times: the first line appends it (a journaled edit without a record), the second
# reinforces it (an edit with a history record), the rest are repeats.
FACT = "Imported fact: the quartz juniper saffron budget is 13 units."
IMPORTED = [FACT] * 30


def _entries(root: Path) -> list[str]:
    from memoryd.indexer.markdown.mdlines import MdLines

    return [e.text for f in sorted(root.rglob("*.md")) for e in MdLines(f.read_bytes().decode()).entries]


def _history(data: Path) -> list[dict[str, Any]]:
    out = []
    for name in ("history.jsonl", "history-agents.jsonl"):
        p = data / name
        if p.exists():
            out += [json.loads(line) for line in p.read_bytes().splitlines() if line.strip()]
    return out


class Kill:
    def __init__(self, point: str, action: str, tmp: Path) -> None:
        self.point, self.action, self.tmp = point, action, tmp
        self.root, self.data, self.shim = tmp / "root", tmp / "data", tmp / "shim"
        self.out: dict[str, Any] = {}

    def run(self) -> None:
        common = _bench("_common")
        bob = self.root / "peers" / "bob"
        bob.mkdir(parents=True)
        (self.root / "MEMORY.md").write_text("# Memory\n\n- The office is in Lisbon.\n")
        body = "".join(f"- {t}\r\n" for t in BOB)
        self.bob_bytes = ("---\nupdated: 2024-01-01\n---\r\n# Bob\r\n\r\n" + body).encode()
        (bob / "notes.md").write_bytes(self.bob_bytes)
        self.shim.mkdir()
        cfg = common.write_config(self.tmp / "memoryd.toml", {"embedding": {"provider": "hash"},
                                                              "log": {"format": "json"}})
        self.cfg = cfg
        env = {"PYTHONPATH": os.pathsep.join([str(SHIMS), str(REPO)]), "MEMORYD_SHIM_POINT": self.point,
               "MEMORYD_SHIM_DIR": str(self.shim)}
        self.before = _entries(self.root)
        with common.Daemon(self.tmp, [self.root], self.data, cfg, name="shim", extra_env=env) as d:
            d.wait_idle(60)
            assert (self.shim / "loaded").exists(), "the shim did not load in the daemon"
            (self.shim / "armed").touch()
            t = threading.Thread(target=self._call, args=(d.socket,), daemon=True)
            t.start()
            wait_for(lambda: (self.shim / "reached").exists() or not t.is_alive(), 30,
                     f"the daemon to reach {self.point}")
            self.out["reached"] = json.loads((self.shim / "reached").read_text())
            assert d.proc is not None
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait(10)
            t.join(30)
        self.files_after_kill = {p: p.read_bytes() for p in self.root.rglob("*.md")}
        with common.Daemon(self.tmp, [self.root], self.data, cfg, name="after") as d:
            d.wait_idle(60)
            self.out["recovered"] = d.events("write.recovered")
            self.after = _entries(self.root)
            self.history = _history(self.data)
            self.out["journal_left"] = sorted(p.name for p in (self.data / "journal").iterdir())
            if self.action == "clear" and any(r.get("action") == "clear" for r in self.history):
                gid = next(r["group"] for r in self.history if r.get("action") == "clear")
                with d.client() as c:
                    self.out["undo"] = c.call("undo", {"id": gid})
                self.out["bob_after_undo"] = (bob / "notes.md").read_bytes()
            self.out["clean_exit"] = d.stop(30)

    def _call(self, sock: Path) -> None:
        from memoryd.daemon.client.rpc_client import Client
        from memoryd.indexer.errors import DaemonError

        params = ({"namespace": "peer:bob"} if self.action == "clear" else
                  {"data": "".join(json.dumps({"text": t, "namespace": "peer:bob"}) + "\n" for t in IMPORTED)})
        try:
            with Client(sock, timeout=60) as c:
                self.out["reply"] = c.call(self.action, params)
        except DaemonError as exc:  # the kill lands while this call waits: expected
            self.out["error"] = str(exc)


@pytest.fixture(scope="module", params=[(p, a) for a in ACTIONS for p in POINTS], ids=lambda pa: f"{pa[1]}-{pa[0]}")
def kill(request: pytest.FixtureRequest) -> Iterator[Kill]:
    tmp = Path(_bench("_common").bench_tmp("md-wprecise-"))
    k = Kill(request.param[0], request.param[1], tmp)
    try:
        k.run()
        yield k
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.slow
def test_nothing_lost_or_twice_and_the_journal_is_settled(kill: Kill) -> None:
    assert kill.out["reached"]["point"] == kill.point
    assert "reply" not in kill.out, "the killed request was acknowledged"
    kept = {str(r["old"]) for r in kill.history if r.get("action") == "forget" and r.get("old")}
    assert set(kill.before) <= set(kill.after) | kept, "an entry is in no file and in no history record"
    assert max(Counter(kill.after).values()) == 1, "an entry is in the files twice"
    ids = [r["id"] for r in kill.history]
    assert len(ids) == len(set(ids)), "a history record was appended twice"
    assert kill.out["journal_left"] == []
    outcome = {"edit_journaled": "not_started", "edit_written": "completed", "edit_recorded": "completed"}[kill.point]
    assert [e["outcome"] for e in kill.out["recovered"]] == [outcome]
    assert kill.out["clean_exit"] == 0


@pytest.mark.slow
def test_the_interrupted_edit_is_absent_or_complete_and_undoable(kill: Kill) -> None:
    bob = kill.root / "peers" / "bob" / "notes.md"
    if kill.point == "edit_journaled":  # killed before the file changed: it is as it was, and no record says otherwise
        assert bob.read_bytes() == kill.bob_bytes and kill.history == []
        return
    if kill.action == "clear":
        assert kill.files_after_kill[bob] != kill.bob_bytes  # the kill came after the file was cleared
        assert len([r for r in kill.history if r.get("action") == "forget"]) == len(BOB)
        assert kill.out["undo"]["decision"] == "restored"
        assert kill.out["bob_after_undo"] == kill.bob_bytes, "undo of the recovered clear is not byte for byte"
    else:
        assert kill.after.count(FACT) == 1  # appended once, never twice
        if kill.point == "edit_written":  # killed after the first line's file write: no record to keep
            assert kill.history == []
        else:  # killed after the second line's record: the reinforcement is counted and recorded once
            assert [r["action"] for r in kill.history] == ["reinforce"]
            assert sum(p.read_bytes().count(b"reinforced=1") for p in kill.root.rglob("*.md")) == 1
