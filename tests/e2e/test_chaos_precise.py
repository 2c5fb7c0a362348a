"""SIGKILL aimed inside the FAISS snapshot write, the SQLite commit and a ``remember`` write.

Random kills (``bench/chaos.py``, ``tests/e2e/test_chaos.py``) land in these
microsecond windows only by chance. Here the daemon (a real ``python -m
memoryd.daemon.cli run`` subprocess, hash embedder) runs with ``tests/shims`` on its
``PYTHONPATH``: the shim's ``sitecustomize`` makes it pause at one named point
and announce it (see ``tests/shims/sitecustomize.py``). The test waits for the
announcement, SIGKILLs, restarts the daemon normally and checks the repair:
index = clean rebuild, FAISS ids = chunk ids, the latest text searchable, no
user file changed. Stray temp files are checked separately, so that a left-over
file (harmless but never removed) does not hide the correctness result.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.helpers import wait_for

REPO = Path(__file__).resolve().parents[2]
SHIMS = Path(__file__).resolve().parents[1] / "shims"
MARK = "precisemark0001z"
POINTS = ("faiss_mid_write", "faiss_before_rename", "sqlite_before_commit",
          "remember_mid_write", "remember_before_rename")
REMEMBERED = "The user decided that the precise kill project ships on Friday with codename precisemark0002z."


def _bench(name: str) -> ModuleType:
    if str(REPO / "bench") not in sys.path:
        sys.path.insert(0, str(REPO / "bench"))  # the bench scripts import their sibling _common as scripts do
    return importlib.import_module(name)


def _files(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` (temp files included: a stray one shows as an extra key)."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _seed(root: Path) -> None:
    (root / "notes").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n\n## Decisions\n\n- Decided to keep the cache layer.\n")
    for i in range(8):
        lines = [f"- Note {i} line {j}: revisit the deploy plan with item {i * 100 + j}." for j in range(12)]
        (root / "notes" / f"n{i}.md").write_text(f"# Note {i}\n\n" + "\n".join(lines) + "\n")


class Scenario:
    """One kill at ``point``; every observation the tests below assert on."""

    def __init__(self, point: str, tmp: Path) -> None:
        self.point, self.tmp = point, tmp
        self.root, self.data, self.shim_dir = tmp / "root", tmp / "data", tmp / "shim"
        self.reached: dict[str, Any] = {}
        self.files_before_kill: dict[str, str] = {}
        self.files_after_kill: dict[str, str] = {}
        self.files_at_end: dict[str, str] = {}
        self.data_after_restart: list[str] = []
        self.out: dict[str, Any] = {}

    def run(self) -> None:
        chaos, common = _bench("chaos"), _bench("_common")
        _seed(self.root)
        self.shim_dir.mkdir()
        cfg = common.write_config(self.tmp / "memoryd.toml", {
            "embedding": {"provider": "hash"}, "log": {"format": "json"},
            "watch": {"debounce_ms": 100, "settle_ms": 30, "max_delay_ms": 500},
            "schedule": {"snapshot_interval_s": 1},
        })
        env = {"PYTHONPATH": os.pathsep.join([str(SHIMS), str(REPO)]), "MEMORYD_SHIM_POINT": self.point,
               "MEMORYD_SHIM_DIR": str(self.shim_dir)}
        d = common.Daemon(self.tmp, [self.root], self.data, cfg, name="shim", extra_env=env)
        with d:
            d.wait_idle(60)
            assert (self.shim_dir / "loaded").exists(), "the shim did not load in the daemon"
            wait_for(lambda: self._snapshot_settled(d), 30, "the first FAISS snapshot")
            (self.shim_dir / "armed").touch()
            before = _files(self.root)
            caller = self._disturb(d)  # an edit returns None once written; a remember runs on in a thread
            self.files_before_kill = before if caller is not None else _files(self.root)
            wait_for(lambda: self._reached(d), 30, f"the daemon to reach {self.point}")
            assert d.proc is not None
            d.proc.send_signal(signal.SIGKILL)
            d.proc.wait(10)
            if caller is not None:
                caller.join(30)
        self.files_after_kill = _files(self.root)
        self._restart(chaos, common, cfg)

    def _snapshot_settled(self, d: Any) -> bool:
        d.check_alive()
        return (self.data / "vectors.faiss").exists() and not list(self.data.glob(".vectors.faiss.*.tmp"))

    def _reached(self, d: Any) -> bool:
        d.check_alive()
        path = self.shim_dir / "reached"
        if path.exists():
            self.reached = json.loads(path.read_text())
        return bool(self.reached)

    def _disturb(self, d: Any) -> threading.Thread | None:
        """Make the daemon run the path the point sits on: an edit (snapshot, commit) or a ``remember``."""
        if not self.point.startswith("remember"):
            with (self.root / "notes" / "n3.md").open("a") as fh:
                fh.write(f"\n- The deploy plan now carries the marker {MARK} for this test.\n")
            return None

        def call() -> None:
            from memoryd.daemon.client.rpc_client import Client
            from memoryd.indexer.errors import DaemonError

            try:
                with Client(d.socket, timeout=30) as c:
                    self.out["remember_reply"] = c.call("remember", {"content": REMEMBERED, "type": "decision"})
            except DaemonError as exc:  # the kill lands while this call waits: expected
                self.out["remember_error"] = str(exc)

        t = threading.Thread(target=call, name="precise-remember")
        t.start()
        return t

    def _restart(self, chaos: ModuleType, common: Any, cfg: Path) -> None:
        with common.Daemon(self.tmp, [self.root], self.data, cfg, name="after") as d:
            st = d.wait_idle(60)
            self.data_after_restart = sorted(p.name for p in self.data.iterdir())
            self.out["vectors_minus_chunks"] = st["index"]["vectors"] - st["chunks"]
            self.out["repairs"] = d.events("vectors.repaired")
            self.out["embedded"] = sum(e.get("embedded", 0) for e in d.events("reconcile.done"))
            with d.client() as c:
                if self.point.startswith("remember"):  # the killed call was never acknowledged: the agent retries
                    self.out["retry"] = c.call("remember", {"content": REMEMBERED, "type": "decision"})
                    common.wait_until(lambda: common.is_idle(c.call("status")), 30, "the retried remember indexed")
                marker = "precisemark0002z" if self.point.startswith("remember") else MARK
                hits = c.call("search", {"query": marker, "k": 3, "mode": "keyword"})["hits"]
                self.out["marker_found"] = any(marker in h["text"] for h in hits)
            self.out["clean_exit"] = d.stop(30)
        self.files_at_end = _files(self.root)
        self.out["faiss_mismatch"] = chaos.faiss_mismatch(self.data)
        common.run_oneshot(common.memoryd_argv("index", [self.root], self.tmp / "rebuild", cfg), self.tmp, 120)
        self.out["chunk_mismatch"] = len(chaos.chunk_set(self.data) ^ chaos.chunk_set(self.tmp / "rebuild"))


@pytest.fixture(scope="module")
def scenario(request: pytest.FixtureRequest) -> Iterator[Scenario]:
    """The kill at ``request.param`` (parametrized indirectly: one run per point, shared by the tests below)."""
    tmp = Path(_bench("_common").bench_tmp("md-precise-"))
    s = Scenario(request.param, tmp)
    try:
        s.run()
        yield s
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


EVERY_POINT = pytest.mark.parametrize("scenario", POINTS, indirect=True)


@pytest.mark.slow
@EVERY_POINT
def test_kill_at_the_point_is_repaired(scenario: Scenario) -> None:
    reached = scenario.reached
    assert reached["point"] == scenario.point
    if scenario.point.endswith("mid_write"):  # the kill found a half-written temp file
        assert 0 < reached["written"] < reached["total"]
    if scenario.point == "sqlite_before_commit":
        assert reached["in_transaction"] is True and reached["added"] >= 1
    if scenario.point.startswith("faiss"):  # the kill really left a stale snapshot, and the restart repaired it
        assert sum(r["added"] for r in scenario.out["repairs"]) >= 1
        assert scenario.out["embedded"] == 0, "the repair must come from the cache, not the model"
    assert scenario.out["vectors_minus_chunks"] == 0, "status: index.vectors != chunks after the restart"
    assert scenario.out["faiss_mismatch"] == 0, "vectors.faiss ids differ from the chunk ids"
    assert scenario.out["chunk_mismatch"] == 0, "the index differs from a clean rebuild"
    assert scenario.out["marker_found"], "the latest text is not searchable"
    assert scenario.out["clean_exit"] == 0


@pytest.mark.slow
@EVERY_POINT
def test_no_user_file_is_changed_by_the_kill(scenario: Scenario) -> None:
    """The kill itself changes no user file; ``remember`` leaves the old file, never a partial one."""
    md_before = {k: v for k, v in scenario.files_before_kill.items() if k.endswith(".md")}
    md_after = {k: v for k, v in scenario.files_after_kill.items() if k.endswith(".md")}
    assert md_after == md_before
    if scenario.point.startswith("remember"):
        assert "remember_reply" not in scenario.out, "the killed remember was acknowledged"
        target = scenario.root / scenario.out["retry"]["path"]
        assert scenario.out["retry"]["decision"] == "appended"
        assert target.read_text().count("precisemark0002z") == 1, "the retried remember must land exactly once"


@pytest.mark.slow
@pytest.mark.parametrize("scenario", [
    "faiss_mid_write",
    "faiss_before_rename",
    "sqlite_before_commit",
    "remember_mid_write",
    "remember_before_rename",
], indirect=True)
def test_no_stray_temp_file_after_restart(scenario: Scenario) -> None:
    """A kill mid-write leaves a temp file; the next start should remove it (SQLite's own journal is its job)."""
    in_data = [n for n in scenario.data_after_restart if n.endswith(".tmp")]
    in_root = [k for k in scenario.files_at_end if k.endswith(".memoryd-tmp")]
    assert in_data + in_root == []
