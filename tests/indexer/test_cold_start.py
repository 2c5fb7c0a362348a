"""Keyword-first indexing: chunks committed before their vectors, the backlog's order, progress figures,
and recovery after an interrupted backlog (how chunks without a vector rank: tests/search/test_pending_legs.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.fill.backlog import RateMeter, VectorBacklog
from memoryd.indexer.search.query import Query
from tests.helpers import CountingEmbedder, make_config

WORDS = ["garden", "violin", "deploy", "kayak", "pottery", "chess"]


def _note(word: str, n: int = 6) -> str:
    return "# Notes\n\n" + "".join(f"## Part {i}\n\nWe talked about the {word} topic, item {i}.\n\n" for i in range(n))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """Six files, each about one word, modified a minute apart (``chess`` newest)."""
    root = tmp_path / "root"
    root.mkdir()
    for n, word in enumerate(WORDS):
        path = root / f"{word}.md"
        path.write_text(_note(word))
        os.utime(path, ns=(1_700_000_000_000_000_000 + n * 60 * 10**9,) * 2)
    return root


def _index(tmp_path: Path, root: Path, background: bool = False) -> tuple[MemoryIndex, CountingEmbedder]:
    cfg = make_config(root, tmp_path / "data")
    emb = CountingEmbedder(load_embedder(cfg.embedding, cfg.data_dir))
    return open_index(cfg, emb, background_rebuilds=background), emb


def _items(root: Path) -> list[tuple[Path, str]]:
    return [(root, f"{w}.md") for w in WORDS]


def _paths(idx: MemoryIndex, query: str, mode: str) -> list[str]:
    return [h["path"] for h in idx.query(Query(query, k=5, mode=mode)).to_json()["hits"]]  # type: ignore[arg-type]


# -- the backlog and its meter ----------------------------------------------------


def test_backlog_takes_urgent_then_newest_first_and_counts_taken_as_pending() -> None:
    b = VectorBacklog()
    b.add([1, 2], mtime_ns=100)
    b.add([3], mtime_ns=300)
    b.add([4], mtime_ns=200)
    b.add([2], mtime_ns=100, urgent=True)  # a user-touched chunk jumps the queue
    first = b.take(2)
    assert [e[2] for e in first] == [2, 3] and len(b) == 4  # taken, not finished: still pending
    b.finish([2])
    b.restore([first[1]])  # chunk 3 was interrupted: back in line, still before older files
    assert len(b) == 3 and [e[2] for e in b.take(10)] == [3, 4, 1]
    b.finish([3, 4, 1])
    assert len(b) == 0 and b.progress()["pending"] == 0 and b.progress()["eta_s"] == 0.0


def test_backlog_discard_forgets_chunks_that_are_gone() -> None:
    b = VectorBacklog()
    b.add([1, 2, 3], mtime_ns=1)
    b.discard([2])
    assert 2 not in b and [e[2] for e in b.take(5)] == [1, 3]


def test_rate_meter_measures_recent_work_and_eta() -> None:
    now = [0.0]
    meter = RateMeter(clock=lambda: now[0])
    assert meter.per_s() is None and meter.eta_s(10) is None  # nothing measured yet
    meter.start()
    now[0] = 4.0
    meter.record(20)
    assert meter.per_s() == pytest.approx(5.0) and meter.eta_s(50) == pytest.approx(10.0)
    meter.reset()
    assert meter.per_s() is None and meter.eta_s(0) == 0.0


# -- the engine: mixed state in all three modes -----------------------------------


def test_deferred_commit_is_keyword_searchable_before_any_embedding(tmp_path: Path, folder: Path) -> None:
    idx, emb = _index(tmp_path, folder)
    try:
        stats = idx.index_files(_items(folder), defer_at=1)
        assert emb.embedded == 0 and stats.embedded == 0 and stats.files_indexed == len(WORDS)
        assert len(idx.backlog) == stats.chunks_added and idx.vectors.size == 0
        assert _paths(idx, "kayak", "keyword")[0] == "kayak.md"
        assert _paths(idx, "kayak", "hybrid")[0] == "kayak.md"
        assert _paths(idx, "kayak", "vector") == []  # vector mode sees only chunks with a vector
        why = idx.query(Query("kayak", k=1, explain=True)).to_json()["hits"][0]["explain"]
        assert why["vector"] == "pending"
        assert idx.status().vectors.pending == stats.chunks_added
    finally:
        idx.close()


def test_fill_vectors_goes_newest_first_then_completes(tmp_path: Path, folder: Path) -> None:
    idx, emb = _index(tmp_path, folder)
    try:
        idx.index_files(_items(folder), defer_at=1)
        total = len(idx.backlog)
        assert idx.fill_vectors(limit=6) == 6
        # the newest file (chess) got its vectors first: vector mode finds it, the oldest not yet
        assert _paths(idx, "chess topic", "vector")[0] == "chess.md"
        assert "garden.md" not in _paths(idx, "garden topic", "vector")
        while idx.backlog:
            idx.fill_vectors()
        assert idx.vectors.size == total and emb.embedded == total
        assert _paths(idx, "garden topic", "vector")[0] == "garden.md"
        assert "vector" not in idx.query(Query("garden", k=1, explain=True)).to_json()["hits"][0]["explain"]
    finally:
        idx.close()


def test_a_touched_file_takes_its_pending_chunks_along(tmp_path: Path, folder: Path) -> None:
    idx, emb = _index(tmp_path, folder)
    try:
        idx.index_files(_items(folder), defer_at=1)
        before = len(idx.backlog)
        stats = idx.index_files([(folder, "garden.md")])  # unchanged on disk, asked for by the user
        assert stats.files_unchanged == 1 and emb.embedded == 6 and len(idx.backlog) == before - 6
        assert _paths(idx, "garden topic", "vector")[0] == "garden.md"
        (folder / "violin.md").write_text(_note("violin") + "## Extra\n\nA new violin line.\n")
        idx.index_files([(folder, "violin.md")])  # a save: its new and its kept chunks get vectors now
        assert len(idx.backlog) == before - 12
    finally:
        idx.close()


def test_small_batches_are_not_deferred(tmp_path: Path, folder: Path) -> None:
    idx, emb = _index(tmp_path, folder)
    try:
        idx.index_files(_items(folder), defer_at=1000)
        assert not idx.backlog and idx.vectors.size == emb.embedded > 0
    finally:
        idx.close()


def test_reopen_after_an_interrupted_backlog_embeds_only_the_rest(tmp_path: Path, folder: Path) -> None:
    """What a kill mid-backlog leaves: chunks committed, some vectors cached, no snapshot."""
    idx, _ = _index(tmp_path, folder, background=True)
    idx.index_files(_items(folder), defer_at=1)
    total = len(idx.backlog)
    idx.fill_vectors(limit=12)
    idx.store.close(clean=False)  # no snapshot, no clean close: as after SIGKILL
    idx.backend.readers.close()
    again, emb = _index(tmp_path, folder, background=True)
    try:
        assert len(again.backlog) == total - 12 and again.vectors.size == 12
        while again.backlog:
            again.fill_vectors()
        assert emb.embedded == total - 12 and again.vectors.size == total
    finally:
        again.close()


def test_removing_a_file_takes_its_pending_chunks_off_the_backlog(tmp_path: Path, folder: Path) -> None:
    idx, emb = _index(tmp_path, folder)
    try:
        idx.index_files(_items(folder), defer_at=1)
        before = len(idx.backlog)
        assert idx.remove_file(folder, "kayak.md") == 6 and len(idx.backlog) == before - 6
        while idx.backlog:
            idx.fill_vectors()
        assert emb.embedded == before - 6 == idx.vectors.size
    finally:
        idx.close()


def test_a_pending_chunk_is_scored_on_keywords_not_as_cosine_zero(tmp_path: Path, folder: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """With the calibrated model, a chunk still waiting for its vector must not score ~0 (which
    would make context and MCP abstain on a folder that is being embedded)."""
    from memoryd.indexer.search import calibration

    monkeypatch.setattr(calibration, "fitted_for", lambda model_id: True)
    idx, _emb = _index(tmp_path, folder)
    try:
        idx.index_files(_items(folder), defer_at=1)
        hit = idx.query(Query("kayak", k=1, explain=True, min_score=0.5)).to_json()["hits"][0]
        assert hit["path"] == "kayak.md" and hit["explain"]["vector"] == "pending"
        assert hit["explain"]["calibration"]["cosine"] is None
        assert hit["score"] >= 0.5
    finally:
        idx.close()
