"""A first start builds the model in the background (issue #42 item 4): the socket answers first.

The model build is a fake (:class:`SlowBuild`): its ``build`` waits on an Event the test releases,
so "before the model exists" is a state the test holds, not a race. The hash embedder is what it
"builds"; the daemon gets it through ``Daemon(plan_build=...)``, the seam the real first start
(:func:`memoryd.indexer.embedding.build_plan.plan_first_build`) goes through.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from memoryd.daemon.app import Daemon
from memoryd.daemon.client.doctor import Inputs, _model
from memoryd.daemon.client.render import render_status
from memoryd.daemon.client.rpc_client import Client
from memoryd.daemon.model_build import DeferredEmbedder, ModelBuilding, build_note
from memoryd.indexer.config import Config
from memoryd.indexer.embedding.build_plan import BuildPlan, plan_first_build
from memoryd.indexer.embedding.checked import checked
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.errors import ModelError, ProviderUnavailable
from tests.helpers import make_config, wait_for
from tests.write_fixtures import HASH_WRITE

FILES = {"MEMORY.md": "# Memory\n\n- The office is in Lisbon, near the river.\n",
         "notes/trip.md": "# Trip\n\n- We fly to Porto on Friday for the conference.\n"}
BOUND_S = 30.0  # no build in these tests waits longer than this for its release


class SlowBuild:
    """A model build that ends when the test says so (``release``), or fails with ``error``."""

    def __init__(self, error: str | None = None) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.error = error
        self.loads = 0

    def plan(self, cfg: Config) -> BuildPlan:
        fake = HashEmbedder()

        def build() -> None:
            self.started.set()
            if not self.release.wait(BOUND_S):
                raise ModelError("the test never released the build")
            if self.error is not None:
                raise ModelError(self.error)

        def load() -> Any:
            self.loads += 1
            return checked(HashEmbedder())

        return BuildPlan(model_id=fake.model_id, dimension=fake.dimension, queries="exact", passages="exact",
                         expected_s=10.0, count_tokens=fake.count_tokens, build=build, load=load)


def _config(tmp_path: Path, short_dir: Path) -> Config:
    root = tmp_path / "root"
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    cfg = make_config(root, tmp_path / "data", debounce_ms=100, max_delay_ms=1000)
    return dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, socket=short_dir / "m.sock"),
                               write=dataclasses.replace(cfg.write, **HASH_WRITE))  # type: ignore[arg-type]


@contextmanager
def first_start(cfg: Config, build: SlowBuild) -> Iterator[tuple[Daemon, Client]]:
    d = Daemon(cfg, env={}, plan_build=build.plan)
    d.status_lines = []  # type: ignore[attr-defined]  # what systemd's status line would show, in order
    d.notifier.status = lambda text: d.status_lines.append(text) or True  # type: ignore[attr-defined,method-assign]
    d.startup()
    client = Client(cfg.socket_path, timeout=10)
    try:
        yield d, client
    finally:
        build.release.set()  # a build still waiting ends (its thread must not outlive the test)
        client.close()
        d.shutdown()
        assert d._builder is None or d._builder.join(BOUND_S)


def _keyword_hits(client: Client, query: str) -> list[str]:
    return [h["path"] for h in client.call("search", {"query": query, "mode": "keyword"})["hits"]]


def test_socket_keyword_search_and_writes_answer_before_the_model_exists(tmp_path: Path, short_dir: Path) -> None:
    build = SlowBuild()
    with capture_logs() as logs, first_start(_config(tmp_path, short_dir), build) as (d, client):
        assert client.call("ping") is not None and build.started.wait(BOUND_S)
        wait_for(lambda: "MEMORY.md" in _keyword_hits(client, "Lisbon"), what="keyword hits while building")
        assert not d.deferred.ready  # type: ignore[union-attr]  # still building: the test holds it
        hybrid = client.call("search", {"query": "office Lisbon", "mode": "hybrid"})
        assert hybrid["hits"][0]["path"] == "MEMORY.md"
        assert hybrid["degraded"] == "keyword results only: the embedding model is building (first start, ~10 s)"
        st = client.call("status")
        assert st["model_build"]["state"] == "building" and st["model"]["id"] == "hash-64"
        assert any("the embedding model is building" in why for why in st["stale"]) and not st["fresh"]
        assert "model build" in render_status(st) and "keywords only meanwhile" in render_status(st)
        assert _model(d.cfg, Inputs(env={}), st)[0].level == "warn"
        assert "the embedding model is building (first start, ~10 s)" in d.status_lines[-1]  # type: ignore[attr-defined]
        assert client.call("get", {"path": "notes/trip.md"})["text"].startswith("# Trip")
        assert "Lisbon" in client.call("context", {"query": "office Lisbon", "max_tokens": 200})["text"]
        new = client.call("remember", {"content": "The user's dentist is Dr. Weber in Basel."})
        assert new["decision"] == "appended"  # written at once, compared by text only (no model to compare with)
        assert new["index_note"] == "embedded later: the embedding model is building (first start, ~10 s)"
        same = client.call("remember", {"content": "the user's dentist is Dr. Weber in  Basel"})
        assert same["decision"] == "reinforced" and same["path"] == new["path"]  # the very text still reinforces
        assert new["path"] in _keyword_hits(client, "dentist Weber")
        assert len(d.index.backlog) > 0 and d.worker.last_error is None  # vectors wait; no step tried and failed

        build.release.set()
        wait_for(lambda: d.deferred.ready and len(d.index.backlog) == 0, timeout=BOUND_S,  # type: ignore[union-attr]
                 what="the vectors of everything indexed while the model built")
        healed = client.call("search", {"query": "dentist Weber in Basel", "mode": "hybrid"})
        assert "degraded" not in healed and healed["hits"][0]["path"] == new["path"]
        st = client.call("status")
        assert "model_build" not in st and st["vectors"]["pending"] == 0 and st["last_error"] is None
    events = [e["event"] for e in logs]
    assert "model.ready" in events and not any(e.endswith(".failed") for e in events)
    assert build.loads == 1


def test_the_model_wakes_an_idle_worker_for_the_pending_vectors(tmp_path: Path, short_dir: Path) -> None:
    """Nothing else reaches the worker once its sweep is done: the model's arrival itself must start the
    backlog (the worker gives it no step while building, and would sleep on its queue)."""
    build = SlowBuild()
    with first_start(_config(tmp_path, short_dir), build) as (d, client):
        wait_for(lambda: not d.worker.reconciling and len(d.index.backlog) > 0 and d.worker.pending == 0,
                 what="the sweep, keyword first")
        build.release.set()
        wait_for(lambda: len(d.index.backlog) == 0, timeout=BOUND_S, what="the vectors, with nothing else queued")
        assert "degraded" not in client.call("search", {"query": "office Lisbon", "mode": "hybrid"})


def test_a_build_failure_is_reported_and_keyword_search_keeps_working(tmp_path: Path, short_dir: Path) -> None:
    build = SlowBuild(error="simulated: no space left in the model cache")
    build.release.set()
    with capture_logs() as logs, first_start(_config(tmp_path, short_dir), build) as (d, client):
        wait_for(lambda: client.call("status").get("model_build", {}).get("state") == "failed", timeout=BOUND_S,
                 what="the failed build in status")
        st = client.call("status")
        assert "simulated: no space left" in st["model_build"]["error"]
        assert "failed to build" in st["last_error"] and "simulated" in st["last_error"]
        assert "FAILED: simulated" in render_status(st)
        assert _model(d.cfg, Inputs(env={}), st)[0].level == "FAIL"
        wait_for(lambda: "failed to build: simulated" in d.status_lines[-1],  # type: ignore[attr-defined]
                 what="the systemd line (set on the builder's thread, after status)")
        wait_for(lambda: "MEMORY.md" in _keyword_hits(client, "Lisbon"), what="keyword hits after the failure")
        hybrid = client.call("search", {"query": "office Lisbon", "mode": "hybrid"})
        assert hybrid["hits"][0]["path"] == "MEMORY.md" and "failed to build: simulated" in hybrid["degraded"]
        assert client.call("remember", {"content": "The printer is on the third floor."})["decision"] == "appended"
        assert d.worker.alive
    failed = [e for e in logs if e["event"] == "model.build_failed"]
    assert len(failed) == 1 and "simulated" in failed[0]["error"] and failed[0]["log_level"] == "error"


def test_unchanged_files_with_pending_vectors_are_reindexed_while_the_model_builds_again(
        tmp_path: Path, short_dir: Path) -> None:
    """The files a failed first start indexed (vectors pending) are unchanged at the next start. Indexing
    one of them again (a save of the same text, a ``reindex``) asks for its pending vectors, which must
    wait for the model, not fail the task (it did: ModelBuilding out of the worker's task)."""
    cfg = _config(tmp_path, short_dir)
    failed = SlowBuild(error="simulated")
    failed.release.set()
    with first_start(cfg, failed) as (d, client):
        wait_for(lambda: "MEMORY.md" in _keyword_hits(client, "Lisbon") and not d.worker.reconciling,
                 what="the first start's sweep")
        assert len(d.index.backlog) > 0
    again = SlowBuild()
    with first_start(cfg, again) as (d, client):
        wait_for(lambda: d.worker.last_reconcile is not None, timeout=BOUND_S, what="the second start's sweep")
        done = client.call("reindex", {"paths": [str(cfg.watch.roots[0] / "MEMORY.md")], "wait": True})
        assert done["done"] and d.worker.last_error is None, (done, d.worker.last_error)
        again.release.set()
        wait_for(lambda: len(d.index.backlog) == 0, timeout=BOUND_S, what="the vectors once the model is there")


def test_a_warm_cache_starts_as_before(tmp_path: Path, short_dir: Path) -> None:
    """No plan (the model is in the cache, or the provider builds nothing): the model loads before the socket
    opens, exactly as before: the index's embedder is the loaded one and status has no build."""
    cfg = _config(tmp_path, short_dir)
    d = Daemon(cfg, env={})  # the default plan: provider "hash" has none
    d.startup()
    try:
        assert d.deferred is None and d._builder is None
        assert not isinstance(d.index.embedder, DeferredEmbedder)
        assert d.status().model_build is None and "model_build" not in d.status().to_json()
    finally:
        d.shutdown()


def test_the_plan_is_made_only_where_a_build_is_due(tmp_path: Path) -> None:
    from memoryd.indexer.config import EmbeddingConfig
    from memoryd.indexer.embedding.e5_model import CONVERTER_VERSION

    assert plan_first_build(EmbeddingConfig(provider="hash"), tmp_path) is None
    plan = plan_first_build(EmbeddingConfig(), tmp_path)  # an empty cache: the default model is due
    assert plan is not None and plan.model_id.startswith("multilingual-e5-small-q4:") and plan.dimension == 384
    assert plan.model_id.endswith("/passages=int8-1p3") and (plan.queries, plan.passages) == ("int8", "int8")
    (tmp_path / f"e5-small-q4-0123456789abcdef-r{CONVERTER_VERSION}.onnx").write_bytes(b"")
    assert plan_first_build(EmbeddingConfig(), tmp_path) is None  # built: loaded before serving, as always


def test_the_stand_in_embedder_before_and_after_its_model() -> None:
    build = SlowBuild()
    deferred = DeferredEmbedder(build.plan(Config()))
    assert deferred.count_tokens(["one two three"]) == HashEmbedder().count_tokens(["one two three"])
    with pytest.raises(ModelBuilding, match="building") as raised:
        deferred.embed_query("x")
    assert isinstance(raised.value, ProviderUnavailable)  # the keyword-only path every caller already has
    with pytest.raises(AttributeError):
        deferred.with_own_session  # noqa: B018  # nothing of the model before it exists
    assert build_note("reconciling", deferred) == ("reconciling; the embedding model is building (first start, "
                                                   "~10 s), keyword search answers meanwhile")
    with pytest.raises(ModelError, match="not the hash-64"):
        deferred.provide(HashEmbedder(dimension=32))
    assert not deferred.ready
    deferred.provide(HashEmbedder())
    assert deferred.ready and deferred.state() is None and deferred.embed_query("x").shape == (64,)
    assert build_note("reconciling", deferred) == "reconciling"

