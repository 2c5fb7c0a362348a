"""Keyword first always (issue #27 item 7): a never-indexed folder of any size is keyword-searchable
before its vectors are computed, ``status`` says ``reconciling n/m files`` during the sweep, and a
save made while the vector backlog fills in is searchable without waiting for the backlog.

The daemon runs in-process on the hash embedder, wrapped so that passage batches on the
low-priority bulk thread (the vector backlog's) wait for a permit the test hands out: "no
vector computed yet" is then a fact the test controls, not a race. Inline batches (a save's
few chunks, on the worker's own thread) pass freely.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any
from unittest.mock import patch

import numpy as np
import pytest
import structlog

import memoryd.indexer.embedding as embedding
from memoryd.daemon.app import Daemon
from memoryd.daemon.client.render import render_status
from memoryd.daemon.client.rpc_client import Client
from memoryd.daemon.work.polite import PoliteEmbedder, SliceAbandoned
from memoryd.daemon.work.vector_steps import BACKLOG_SLICE, SLICE_MAX, SLICE_MIN, slice_size
from memoryd.daemon.work.worker import HANDFUL, IndexWorker
from memoryd.indexer.fill.backlog import VectorBacklog
from tests.helpers import make_config, ready, wait_for

WAIT_S = 20.0
FILES = 30
SECTIONS = 3  # one chunk each: 90 chunks, fewer than the old 128-chunk keyword-first threshold
BULK_THREAD = "memoryd-embed-bulk"
FILE_MARK = re.compile(r"filemark(\d+)")


class BulkGate:
    """An embedder whose passage batches on the bulk thread each wait for a permit (:meth:`allow`)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self._permits = threading.Semaphore(0)
        self._lock = threading.Lock()
        self.computed = 0  # chunk passages the model was run on (multi-line texts), any thread
        self.bulk_done = 0  # bulk batches finished
        self.bulk_waiting = threading.Event()
        self.hold_after: int | None = None  # chunking the next file after this many waits for ``resume``
        self._seen: set[str] = set()
        self.held = threading.Event()
        self.resume = threading.Event()

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        if self.hold_after is not None:
            ids = {m for t in texts for m in FILE_MARK.findall(t)} - self._seen
            if ids and len(self._seen) == self.hold_after:
                self.held.set()
                assert self.resume.wait(WAIT_S), "the test never resumed the sweep"
            self._seen |= ids
        return list(self.inner.count_tokens(texts))

    def embed_query(self, text: str) -> Any:
        return self.inner.embed_query(text)

    def embed_passages(self, texts: Sequence[str]) -> Any:
        bulk = threading.current_thread().name == BULK_THREAD
        if bulk:
            self.bulk_waiting.set()
            assert self._permits.acquire(timeout=WAIT_S), "the test never allowed this bulk batch"
        out = self.inner.embed_passages(texts)
        with self._lock:  # chunks only: the idle daemon then embeds their lines, one line a text
            self.computed += sum("\n" in t for t in texts)
            self.bulk_done += bulk
        return out

    def allow(self, n: int = 1) -> None:
        self._permits.release(n)

    def open(self) -> None:
        self.resume.set()
        self._permits.release(100_000)


def _folder(root: Path) -> list[str]:
    """``FILES`` files of ``SECTIONS`` sections; each file holds one word found nowhere else."""
    words = []
    for i in range(FILES):
        word = f"kwfirst{i:02d}zq"
        words.append(word)
        sections = [f"## Part {s}\n\nNotes {s} about topic {i}, the team, and the plan.\n" for s in range(SECTIONS)]
        sections[-1] += f"The code word of this note is {word}; filemark{i}.\n"
        (root / f"f{i:02d}.md").write_text(f"# Note {i}\n\n" + "\n".join(sections), encoding="utf-8")
    return words


@pytest.fixture
def start(tmp_path: Path, short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``start(hold_after=None)``: a daemon on a fresh ``_folder`` with embedding gated (the start-up
    sweep begins at once); returns ``(daemon, client, gate, root)``. Everything is closed after the test."""
    root = tmp_path / "root"
    root.mkdir()
    _folder(root)
    real = embedding.load_embedder
    gates: list[BulkGate] = []
    opened: list[tuple[Daemon, Client]] = []

    def run(hold_after: int | None = None) -> tuple[Daemon, Client, BulkGate, Path]:
        def gated(*args: Any, **kwargs: Any) -> BulkGate:
            gates.append(BulkGate(real(*args, **kwargs)))
            gates[-1].hold_after = hold_after
            return gates[-1]

        monkeypatch.setattr(embedding, "load_embedder", gated)
        cfg = make_config(root, tmp_path / "data", debounce_ms=50, max_delay_ms=500)
        cfg = dataclasses.replace(cfg, server=dataclasses.replace(cfg.server, socket=short_dir / "kw.sock"))
        d = Daemon(cfg, env={})
        d.startup()
        client = Client(cfg.socket_path, timeout=WAIT_S)
        opened.append((d, client))
        return d, client, gates[-1], root

    try:
        yield run
    finally:
        for g in gates:
            g.open()
        for d, client in opened:
            client.close()
            d.shutdown()


def _found(client: Client, word: str, mode: str = "keyword") -> bool:
    hits = client.call("search", {"query": word, "k": 1, "mode": mode})["hits"]
    return bool(hits) and word in hits[0]["text"]


def _all_found(client: Client, words: list[str]) -> bool:
    return all(_found(client, w) for w in words)


def test_a_fresh_small_folder_is_keyword_searchable_before_any_vector(start: Any) -> None:
    _, client, gate, _ = start()
    words = [f"kwfirst{i:02d}zq" for i in range(FILES)]
    wait_for(lambda: _all_found(client, words), WAIT_S, "every file keyword-searchable")
    st = client.call("status")
    assert gate.computed == 0  # not one vector computed: the model is held
    assert st["files"] == FILES and st["chunks"] == FILES * SECTIONS
    assert st["index"]["vectors"] == 0 and st["vectors"]["pending"] == FILES * SECTIONS
    assert st["reconciling"] and not st["fresh"]  # hybrid quality is not there yet, and status says so
    gate.open()
    wait_for(lambda: ready(client), WAIT_S, "the vectors filled in")
    st = client.call("status")
    assert st["index"]["vectors"] == FILES * SECTIONS and st["vectors"]["pending"] == 0
    assert gate.computed == FILES * SECTIONS
    assert _found(client, words[7], mode="vector")


def test_status_reports_reconciling_progress_during_the_sweep(start: Any) -> None:
    _, client, gate, _ = start(hold_after=10)
    first = client.call("status")  # the first answer already says a sweep is on
    assert gate.held.wait(WAIT_S)  # the sweep is chunking its 11th file now
    st = client.call("status")
    assert 1 <= st["files"] <= 10  # the files read so far are committed already...
    assert client.call("search", {"query": "team plan", "k": 3, "mode": "keyword"})["hits"]  # ...and searchable
    assert first["reconciling"] and first["reconcile"]["state"] in ("queued", "listing", "indexing")
    sweep = st["reconcile"]
    assert sweep == {"state": "indexing", "files_done": 10, "files_total": FILES}
    rows = dict(line.split("  ", 1) for line in render_status(st).splitlines())
    assert rows["reconciling"].strip() == f"yes: 10/{FILES} files"
    gate.resume.set()
    wait_for(lambda: client.call("status")["reconcile"]["state"] == "idle", WAIT_S, "the sweep's end")
    st = client.call("status")
    assert st["reconcile"] == {"state": "idle", "files_done": FILES, "files_total": FILES}
    assert st["files"] == FILES and st["vectors"]["pending"] == FILES * SECTIONS  # the model is still held
    rows = dict(line.split("  ", 1) for line in render_status(st).splitlines())
    assert rows["reconciling"].strip() == "yes: files done, vectors filling in"
    gate.open()
    wait_for(lambda: ready(client), WAIT_S, "the vectors filled in")
    rows = dict(line.split("  ", 1) for line in render_status(client.call("status")).splitlines())
    assert rows["reconciling"].strip() == "no"


def test_a_save_during_the_vector_backlog_does_not_wait_for_it(start: Any) -> None:
    d, client, gate, root = start()
    words = [f"kwfirst{i:02d}zq" for i in range(FILES)]
    wait_for(lambda: _all_found(client, words), WAIT_S, "every file keyword-searchable")
    assert gate.bulk_waiting.wait(WAIT_S)  # the backlog's first slice waits for the model
    line = "Saved during the backlog: the savedwordqx decision stands."
    with (root / "f05.md").open("a", encoding="utf-8") as f:
        f.write(f"\n## Later\n\n{line}\n")
    # The backlog's slice in hand is still held by the model: the save must not wait for it.
    wait_for(lambda: _found(client, "savedwordqx"), WAIT_S, "the save keyword-searchable")
    assert gate.bulk_done == 0 and client.call("status")["vectors"]["pending"] >= FILES * SECTIONS
    assert d.worker.embedder.abandoned >= 1  # the step gave way mid-slice
    gate.allow(3)  # the abandoned slice ends (its vectors are kept), then the saved chunk comes first
    wait_for(lambda: _found(client, line, mode="vector"), WAIT_S, "the saved chunk's vector")
    assert gate.bulk_done <= 3 and client.call("status")["vectors"]["pending"] > 0


def test_an_editor_save_on_a_warm_index_is_embedded_before_it_is_committed(start: Any) -> None:
    _, client, gate, root = start()
    gate.open()
    wait_for(lambda: ready(client), WAIT_S, "the first folder fully embedded")
    with structlog.testing.capture_logs() as logs:
        with (root / "f03.md").open("a", encoding="utf-8") as f:
            f.write("\nOne more line about the warmsavezq decision.\n")
        wait_for(lambda: _found(client, "warmsavezq"), WAIT_S, "the save keyword-searchable")
        batch = wait_for(lambda: [e for e in logs if e["event"] == "index.batch"], WAIT_S, "its batch line")[0]
    assert batch["embedded"] == 1 and batch["vectors_pending"] == 0  # searchable with its vector, in one step
    assert _found(client, "One more line about the warmsavezq decision.", mode="vector")


def test_the_save_budget_follows_the_measured_speed_of_the_inline_path() -> None:
    class Timed:
        model_id, dimension = "timed", 4

        def __init__(self) -> None:
            self.per_text_s = 0.0

        def count_tokens(self, texts: Sequence[str]) -> list[int]:
            return [1 for _ in texts]

        def embed_query(self, text: str) -> Any:
            return np.ones(4, dtype=np.float32)

        def embed_passages(self, texts: Sequence[str]) -> Any:
            clock[0] += self.per_text_s * len(texts)
            return np.ones((len(texts), 4), dtype=np.float32)

    clock = [0.0]
    inner = Timed()
    polite = PoliteEmbedder(inner, nice=0, small=16)
    with patch("memoryd.daemon.work.polite.time.perf_counter", lambda: clock[0]):
        assert polite.passages_per_s() is None  # nothing measured yet: the floor applies
        inner.per_text_s = 0.25  # 4 passages/s: a 0.3 s budget holds one
        polite.embed_passages(["a", "b"])
        assert polite.passages_per_s() == pytest.approx(4.0)
    worker = IndexWorker.__new__(IndexWorker)  # only defer_at, which reads nothing but the embedder
    worker.embedder = polite
    assert worker.defer_at() == HANDFUL  # slow: never fewer than a handful are embedded first
    with patch("memoryd.daemon.work.polite.time.perf_counter", lambda: clock[0]):
        inner.per_text_s = 0.001
        for _ in range(8):
            polite.embed_passages(["a"] * 8)
    assert worker.defer_at() == polite.small  # fast: at most one model batch is embedded first


def test_backlog_slices_are_sized_by_the_measured_rate() -> None:
    assert slice_size(None) == BACKLOG_SLICE
    assert slice_size(8.0) == 4  # e5-small on 2 cores: about half a second per slice
    assert slice_size(0.5) == SLICE_MIN and slice_size(10_000.0) == SLICE_MAX


def test_promoted_chunks_leave_the_backlog_first_and_keep_their_order() -> None:
    b = VectorBacklog()
    b.add([1, 2], mtime_ns=300)
    b.add([3, 4], mtime_ns=100)
    assert b.promote([4, 3, 99]) == 2  # 99 is not queued
    assert b.promote([3]) == 0  # already urgent
    assert [e[2] for e in b.take(4)] == [3, 4, 1, 2]


def test_background_view_sends_even_one_passage_to_the_low_priority_thread() -> None:
    seen: list[str] = []

    class Named:
        model_id, dimension = "named", 4

        def count_tokens(self, texts: Sequence[str]) -> list[int]:
            return [1 for _ in texts]

        def embed_query(self, text: str) -> Any:
            return np.ones(4, dtype=np.float32)

        def embed_passages(self, texts: Sequence[str]) -> Any:
            seen.append(threading.current_thread().name)
            return np.ones((len(texts), 4), dtype=np.float32)

    polite = PoliteEmbedder(Named(), nice=1, small=16)
    polite.start()
    try:
        polite.background().embed_passages(["one"])
        polite.embed_passages(["one"])
    finally:
        assert polite.stop()
    assert seen == [BULK_THREAD, "MainThread"]
    assert polite.passages_per_s() is not None  # only the inline call is measured


@pytest.mark.parametrize(("st", "shown"), [
    ({"reconciling": False}, "no"),
    ({"reconciling": True, "reconcile": {"state": "queued", "files_done": 0, "files_total": 0}}, "yes: about to start"),
    ({"reconciling": True, "reconcile": {"state": "listing", "files_done": 0, "files_total": 0}}, "yes: listing files"),
    ({"reconciling": True, "reconcile": {"state": "indexing", "files_done": 7, "files_total": 31}}, "yes: 7/31 files"),
    ({"reconciling": True, "reconcile": {"state": "idle", "files_done": 31, "files_total": 31},
      "vectors": {"pending": 90}}, "yes: files done, vectors filling in"),
    ({"reconciling": True}, "yes"),  # an older daemon
])
def test_the_status_line_says_how_far_the_sweep_is(st: dict[str, Any], shown: str) -> None:
    base = {"cache": {"entries": 0, "hits": 0, "misses": 0}}
    rows = dict(line.split("  ", 1) for line in render_status({**base, **st}).splitlines())
    assert rows["reconciling"].strip() == shown


def test_an_abandoned_background_slice_is_not_computed_twice() -> None:
    calls: list[list[str]] = []
    release = threading.Event()

    class Held:
        model_id, dimension = "held", 4

        def count_tokens(self, texts: Sequence[str]) -> list[int]:
            return [1 for _ in texts]

        def embed_query(self, text: str) -> Any:
            return np.ones(4, dtype=np.float32)

        def embed_passages(self, texts: Sequence[str]) -> Any:
            calls.append(list(texts))
            assert release.wait(WAIT_S)
            return np.array([[float(len(t)), 0, 0, 1] for t in texts], dtype=np.float32)

    polite = PoliteEmbedder(Held(), nice=1, small=16)
    polite.start()
    try:  # a task "arrives" once the model runs the slice, and is gone once the model is released
        view = polite.background(interrupt=lambda: bool(calls) and not release.is_set())
        with pytest.raises(SliceAbandoned):
            view.embed_passages(["aa", "bbb"])  # handed over, then given up while the model runs
        release.set()
        wait_for(lambda: polite._salvage, WAIT_S, "the abandoned slice's vectors kept")
        out = view.embed_passages(["bbb", "c", "aa"])
    finally:
        release.set()
        assert polite.stop()
    assert out[:, 0].tolist() == [3.0, 1.0, 2.0]
    assert calls == [["aa", "bbb"], ["c"]]  # only the new text reached the model again
    assert polite.abandoned == 1
