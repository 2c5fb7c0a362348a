"""``status`` says what is going on, each state as it is (#42 item 5).

Before: ``fresh: no (reconciling)`` for minutes while the sweep was over and only vectors were
filling; a deleted root showed ``fresh: yes`` and ``last error: none``; a root that came back was
listed as "watch failure: root appeared".
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

from memoryd.daemon.api.status import WatchState
from memoryd.daemon.client.render import render_status
from memoryd.daemon.work.tasks import ReconcileState
from memoryd.indexer.storage.index_status import BacklogProgress
from tests.daemon.test_api_handlers import _index_status, _status
from tests.helpers import running_daemon, wait_for


def _rows(st: dict[str, object]) -> dict[str, str]:
    return {line.split("  ", 1)[0]: line.split("  ", 1)[1].strip() for line in render_status(st).splitlines()}


def test_vectors_filling_after_the_sweep_is_not_called_reconciling() -> None:
    filling = dataclasses.replace(_index_status(), vectors=BacklogProgress(1200, 18.5, 65.0))
    st = _status(index=filling, reconciling=True, reconcile=ReconcileState("idle", 31, 31)).to_json()
    assert st["fresh"] is False
    assert st["stale"] == ["vectors filling: 1200 chunks (keyword search has them)"]
    assert _rows(st)["fresh"] == "no (vectors filling: 1200 chunks (keyword search has them))"
    sweeping = _status(index=filling, reconciling=True, reconcile=ReconcileState("indexing", 12, 31)).to_json()
    assert sweeping["stale"] == ["reconciling: 12/31 files"]


def test_a_root_that_is_not_watched_is_an_error_and_not_fresh() -> None:
    gone = WatchState(False, "inotify", None, "cannot watch /r/a: No such file or directory")
    st = _status(roots=(dataclasses.replace(_status().roots[0], watch=gone),)).to_json()
    assert st["fresh"] is False and st["last_error"] == "cannot watch /r/a: No such file or directory"
    assert st["stale"] == ["root /r/a not watched: cannot watch /r/a: No such file or directory"]
    rows = _rows(st)
    assert rows["fresh"].startswith("no (root /r/a not watched") and rows["last error"].startswith("cannot watch")


def test_a_deleted_root_then_back_reads_as_it_is(tmp_path: Path, short_dir: Path) -> None:
    with running_daemon(tmp_path, short_dir / "s.sock", {"a.md": "# A\n\nalpha\n"}) as (_d, client, root):
        wait_for(lambda: client.call("status")["fresh"], 20, "the first sweep")
        shutil.rmtree(root)
        st = wait_for(lambda: (s := client.call("status"))["last_error"] and "cannot watch" in s["last_error"]
                      and s, 30, "the watcher to report the missing root")
        assert st["fresh"] is False and any(w.startswith(f"root {root} not watched") for w in st["stale"])
        assert _rows(st)["fresh"].startswith("no (")
        root.mkdir()
        (root / "b.md").write_text("# B\n\nbeta\n")
        st = wait_for(lambda: (s := client.call("status"))["fresh"] and s["files"] == 1 and s, 30,
                      "the root to be watched and swept again")
    assert st["last_error"] is None and st["last_watch_failure"] is None
    assert "watch failure" not in render_status(st)
