"""The socket methods built from fakes: no socket, no started daemon, no model.

Each handler takes only the parts it uses (:mod:`memoryd.daemon.api.ports`), so
these tests hand it a recording index, a worker whose futures the test
completes, and real roots on ``tmp_path``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.api.admin import AdminMethods
from memoryd.daemon.api.jobs import JobState
from memoryd.daemon.api.read import ReadMethods
from memoryd.daemon.api.status import DaemonStatus, RingSize, RootStatus, WatchState
from memoryd.daemon.api.write import WriteMethods, open_audit_log
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.errors import (
    ACCESS_DENIED,
    APPLICATION_ERROR,
    SHUTTING_DOWN,
    WRITE_TIMEOUT,
    InvalidParams,
    RpcError,
)
from memoryd.daemon.rpc.jsonrpc import Peer
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.daemon.work.tasks import ReconcileState, TaskStopped
from memoryd.indexer.config import Config
from memoryd.indexer.errors import MemorydError
from memoryd.indexer.search.hits import SearchResult
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.index_status import (
    BacklogProgress,
    CacheStatus,
    EmbeddedStorage,
    IndexStatus,
    ModelStatus,
    VectorIndexStatus,
)

OWNER = Peer(pid=1, uid=os.getuid(), gid=os.getgid())
ALICE = {"kind": "direct", "peer": "alice"}


class FakeIndex:
    site: str | None = None

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def query(self, query: Query) -> SearchResult:
        self.calls.append({"query": query.text, **{f.name: getattr(query, f.name) for f in dataclasses.fields(query)
                                                    if f.name != "text"}})
        return SearchResult(mode=query.mode or "hybrid", hits=[], took_ms=0.5)


class FakeWorker:
    """Queues nothing and runs nothing: each task's future is kept for the test to settle."""

    def __init__(self) -> None:
        self.futures: list[Future[Any]] = []
        self.reasons: list[str] = []

    def _future(self) -> Future[Any]:
        future: Future[Any] = Future()
        self.futures.append(future)
        return future

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        return self._future()

    def request_reconcile(self, reason: str) -> Future[dict[str, Any]]:
        self.reasons.append(reason)
        return self._future()

    def index_now(self, files: list[tuple[Path, str]]) -> Future[dict[str, Any]]:
        return self._future()


def _reads(root: Path, index: FakeIndex, worker: FakeWorker) -> ReadMethods:
    roots = RootMap([root])
    return ReadMethods(index=index, roots=lambda: roots, worker=worker, search=Config().search,
                       path_filter=PathFilter(("*.md",), ()), max_file_bytes=1 << 20,
                       count_tokens=lambda texts: [len(t.split()) for t in texts], query_vector=lambda q: None)


def test_search_params_reach_the_index_as_keywords_with_the_session_scope(tmp_path: Path) -> None:
    index = FakeIndex()
    reads = _reads(tmp_path, index, FakeWorker())
    reads.search({"query": "quokka", "k": 3, "mode": "keyword", "session": ALICE}, OWNER)
    reads.search({"query": "quokka"}, OWNER)
    confined, owner = index.calls
    assert confined["k"] == 3 and confined["mode"] == "keyword" and confined["query_vector"] is None
    assert confined["path_prefix"] == f"{tmp_path}/peers/alice/" and confined["path_check"] is not None
    assert owner["path_prefix"] is None and owner["path_check"] is None
    assert (owner["k"], owner["mode"]) == (Config().search.k, Config().search.mode)


def test_a_namespace_outside_the_session_answers_no_hits_without_searching(tmp_path: Path) -> None:
    index = FakeIndex()
    reads = _reads(tmp_path, index, FakeWorker())
    reads.search({"query": "quokka", "namespace": "peer:bob", "session": {"kind": "owner"}}, OWNER)
    assert index.calls[-1]["path_prefix"] == f"{tmp_path}/peers/bob/"  # the owner may read it
    index.calls.clear()
    res = reads.search({"query": "quokka", "namespace": "peer:bob", "session": ALICE}, OWNER)
    assert res == {"hits": [], "took_ms": 0.0, "mode": Config().search.mode} and index.calls == []


@pytest.mark.parametrize(("params", "named"), [
    ({"query": " "}, "query"), ({"query": "x", "k": 0}, "'k'"), ({"query": "x", "mode": "fuzzy"}, "'mode'"),
    ({"query": "x", "typo": 1}, "typo"), ({"query": "x", "min_score": "high"}, "min_score"),
])
def test_bad_search_params_are_named(tmp_path: Path, params: dict[str, Any], named: str) -> None:
    with pytest.raises(InvalidParams, match=named):
        _reads(tmp_path, FakeIndex(), FakeWorker()).search(params, OWNER)


def test_reindex_answers_the_workers_stats_or_its_shutdown(tmp_path: Path) -> None:
    worker = FakeWorker()
    reads = _reads(tmp_path, FakeIndex(), worker)
    assert reads.reindex({}, OWNER) == {"queued": 1, "done": False} and worker.reasons == ["reindex request"]
    worker.futures[-1].set_result({"files": 2})
    done_future = worker.futures[-1]
    worker.request_reconcile = lambda reason: done_future  # type: ignore[method-assign]
    res = reads.reindex({"wait": True}, OWNER)
    assert res["done"] is True and res["files"] == 2

    cancelled: Future[dict[str, Any]] = Future()
    cancelled.cancel()
    worker.request_reconcile = lambda reason: cancelled  # type: ignore[method-assign]
    with pytest.raises(RpcError) as exc:
        reads.reindex({"wait": True}, OWNER)
    assert exc.value.code == SHUTTING_DOWN and "not run" in exc.value.message

    stopped: Future[dict[str, Any]] = Future()
    stopped.set_exception(TaskStopped("the re-index was stopped (after 3/9 files)"))
    worker.request_reconcile = lambda reason: stopped  # type: ignore[method-assign]
    with pytest.raises(RpcError) as exc:
        reads.reindex({"wait": True}, OWNER)
    assert exc.value.code == SHUTTING_DOWN and "3/9" in exc.value.message

    failed: Future[dict[str, Any]] = Future()
    failed.set_exception(MemorydError("disk full"))
    worker.request_reconcile = lambda reason: failed  # type: ignore[method-assign]
    with pytest.raises(RpcError) as exc:
        reads.reindex({"wait": True}, OWNER)
    assert (exc.value.code, exc.value.message) == (APPLICATION_ERROR, "disk full")


def _writes(tmp_path: Path, worker: FakeWorker, index: FakeIndex | None = None, **write: Any) -> WriteMethods:
    cfg = dataclasses.replace(Config().write, **write)
    roots = RootMap([tmp_path / "root"])

    def no_writer() -> Any:
        raise AssertionError("nothing may be written")

    return WriteMethods(worker=worker, roots=lambda: roots, cfg=cfg, audit_log=open_audit_log(cfg, tmp_path),
                        new_writer=no_writer, index=index or FakeIndex())


def test_a_write_the_worker_never_starts_is_cancelled_and_audited(tmp_path: Path) -> None:
    worker = FakeWorker()
    writes = _writes(tmp_path, worker, wait_s=0.05)
    with pytest.raises(RpcError) as exc:
        writes.remember({"content": "The team deploys on Tuesdays after the standup."}, OWNER)
    assert exc.value.code == WRITE_TIMEOUT and "nothing was written" in exc.value.message
    assert worker.futures[-1].cancelled()  # the worker will skip it
    assert writes.audit_log.tail(1)[0]["code"] == WRITE_TIMEOUT


def test_a_confined_session_may_not_read_the_audit_log(tmp_path: Path) -> None:
    with pytest.raises(RpcError) as exc:
        _writes(tmp_path, FakeWorker()).audit({"session": ALICE}, OWNER)
    assert exc.value.code == ACCESS_DENIED


def test_forget_of_another_sites_hit_is_refused_by_the_indexs_site_before_any_write(tmp_path: Path) -> None:
    embedded, shared = FakeIndex(), FakeIndex()
    shared.site = "laptop"
    target = {"path": "MEMORY.md", "line": 3, "site": "desktop"}
    with pytest.raises(InvalidParams, match=r"needs storage\.backend = 'postgres'"):
        _writes(tmp_path, FakeWorker(), embedded).forget(target, OWNER)
    with pytest.raises(InvalidParams, match=r"not this daemon's \('laptop'\)"):
        _writes(tmp_path, FakeWorker(), shared).forget(target, OWNER)


def _index_status() -> IndexStatus:
    return IndexStatus(files=7, chunks=9, model=ModelStatus("hash-64", 64, "exact"), cache=CacheStatus(3, 1, 2, 50),
                       index=VectorIndexStatus("flat", 9, 0, None), skipped=(), vectors=BacklogProgress(0, None, None),
                       storage=EmbeddedStorage("/d"))


def _status(**changes: Any) -> DaemonStatus:
    base = DaemonStatus(
        version="9.9", pid=42, uptime_s=1.5, index=_index_status(),
        pending=0, reconciling=False, reconcile_progress=(2, 2),
        roots=(RootStatus("/r/a", WatchState(True, "inotify", "2026-01-02T00:00:00+00:00", None)),
               RootStatus("/r/b", WatchState(True, "polling", "2026-01-03T00:00:00+00:00", None)), RootStatus("/r/c")),
        reconcile=ReconcileState("idle", 2, 2), last_reconcile=None, last_error=None, last_watch_failure=None,
        socket="/s", data_dir="/d", debounced={"settled": 1, "quiet": 0}, data_dir_bytes=10, rss_bytes=None,
        jobs=(JobState(1, "import", False, 3, 8, 0.4),), history={"owner": RingSize(5, 100, 1)},
    )
    return dataclasses.replace(base, **changes)


def test_status_on_the_wire_keeps_its_keys_their_order_and_the_derived_fields() -> None:
    out = _status().to_json()
    assert list(out) == ["version", "pid", "uptime_s", "files", "chunks", "model", "cache", "index", "skipped",
                         "vectors", "storage", "pending", "reconciling",
                         "reconcile_progress", "roots", "reconcile", "last_event", "last_reconcile", "last_error",
                         "last_watch_failure", "socket", "data_dir", "debounced", "fresh", "stale", "data_dir_bytes",
                         "rss_bytes", "jobs", "history"]
    assert out["roots"][0] == {"path": "/r/a", "alive": True, "backend": "inotify",
                               "last_event": "2026-01-02T00:00:00+00:00", "error": None}
    assert out["roots"][2] == {"path": "/r/c", "alive": False}  # not watched (yet): no watcher fields
    assert out["last_event"] == "2026-01-03T00:00:00+00:00" and out["fresh"] is True
    assert out["reconcile_progress"] == [2, 2] and out["reconcile"] == {"state": "idle", "files_done": 2,
                                                                          "files_total": 2}
    assert out["jobs"] == [{"id": 1, "kind": "import", "dry_run": False, "done": 3, "total": 8, "running_s": 0.4}]
    assert out["history"] == {"owner": {"bytes": 5, "max_bytes": 100, "records": 1}}
    assert json.loads(json.dumps(out)) == out  # plain JSON, nothing typed left in it
    assert _status(pending=1).to_json()["fresh"] is False and _status(reconciling=True).to_json()["fresh"] is False
    assert _status(roots=(RootStatus("/r/c"),)).to_json()["last_event"] is None


def test_ping_and_status_read_the_status_provider() -> None:
    class Provider:
        version = "9.9"
        started = 0.0

        def status(self) -> DaemonStatus:
            return _status()

    admin = AdminMethods(Provider())
    assert admin.ping({}, OWNER)["version"] == "9.9" and admin.status({}, OWNER) == _status().to_json()
    with pytest.raises(InvalidParams, match="extra"):
        admin.status({"extra": 1}, OWNER)


def test_get_of_a_relative_path_in_two_roots_lists_both_instead_of_guessing(tmp_path: Path) -> None:
    from memoryd.daemon.rpc.errors import AMBIGUOUS_PATH

    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        root.mkdir()
        (root / "MEMORY.md").write_text(f"# {root.name}\n")
    roots = RootMap([a, b])
    reads = ReadMethods(index=FakeIndex(), roots=lambda: roots, worker=FakeWorker(), search=Config().search,
                        path_filter=PathFilter(("*.md",), ()), max_file_bytes=1 << 20,
                        count_tokens=lambda texts: [len(t.split()) for t in texts], query_vector=lambda q: None)
    with pytest.raises(RpcError) as err:
        reads.get({"path": "MEMORY.md", "start_line": 1, "end_line": 1}, OWNER)
    assert err.value.code == AMBIGUOUS_PATH
    assert err.value.data == {"candidates": [str(a / "MEMORY.md"), str(b / "MEMORY.md")]}
    assert reads.get({"path": str(b / "MEMORY.md")}, OWNER)["text"] == "# b\n"  # an absolute path is not ambiguous
    assert reads.search({"query": "x"}, OWNER)["roots"] == 2  # so clients show each hit's root
