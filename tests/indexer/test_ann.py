"""The vector index policy: flat <-> HNSW switch, deletions (tombstones) on HNSW, snapshots."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from memoryd.indexer.errors import ConfigError
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.embedded import ann
from memoryd.indexer.storage.embedded.vectors import VectorIndex

DIM = 32
N = 2000


def clustered(n: int, seed: int = 0) -> np.ndarray:
    """Unit vectors around a few topics: closer to real embeddings than uniform noise."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(8, n // 100), DIM)).astype(np.float32)
    x = centres[rng.integers(0, len(centres), n)] + 0.3 * rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def filled(n: int = N) -> tuple[VectorIndex, np.ndarray]:
    vecs = clustered(n)
    idx = VectorIndex(DIM)
    idx.add(range(n), vecs)
    return idx, vecs


def top_ids(idx: VectorIndex, queries: np.ndarray, k: int = 10) -> list[set[int]]:
    return [{i for i, _ in idx.search(q, k)} for q in queries]


def test_switch_to_hnsw_keeps_results_within_recall_bound() -> None:
    idx, vecs = filled()
    queries = clustered(50, seed=1)
    exact = top_ids(idx, queries)
    assert idx.kind == "flat"
    assert idx.maybe_switch(1000, "auto") is True
    assert (idx.kind, idx.size, idx.dirty) == ("hnsw", N, True)
    approx = top_ids(idx, queries)
    recall = np.mean([len(a & e) / 10 for a, e in zip(approx, exact, strict=True)])
    assert recall >= 0.95
    assert idx.search(vecs[17], 1)[0][0] == 17
    assert idx.scores_for(vecs[3], [3])[3] == pytest.approx(1.0, abs=1e-5)


def test_policy_follows_size_with_hysteresis_and_forcing() -> None:
    idx, vecs = filled()
    assert idx.maybe_switch(5000) is False and idx.kind == "flat"
    idx.maybe_switch(1500)
    assert idx.kind == "hnsw"
    idx.remove(range(600))  # 1400 left: above 0.8 x 1500, stays HNSW
    assert idx.kind == "hnsw"
    idx.remove(range(600, 800))  # 1200 = 0.8 x 1500 is still HNSW; one more drop goes flat
    idx.remove([800])
    assert (idx.kind, idx.size, idx.tombstones) == ("flat", N - 801, 0)
    assert idx.maybe_switch(10**9, "hnsw") is True and idx.kind == "hnsw"
    idx.add([5000], vecs[:1])  # a forced kind holds whatever the size
    assert idx.kind == "hnsw"
    with pytest.raises(ConfigError, match="ivf"):
        idx.maybe_switch(1000, "ivf")


def test_deletions_and_reused_ids_on_hnsw() -> None:
    idx, vecs = filled()
    idx.maybe_switch(1000, "hnsw")
    assert idx.remove([10, 11, 10, 99999]) == 2
    assert idx.remove([10]) == 0
    assert idx.size == N - 2 and idx.tombstones == 2
    assert 10 not in {i for i, _ in idx.search(vecs[10], 20)}
    assert 10 not in set(idx.ids().tolist())
    assert idx.scores_for(vecs[10], [10, 12]).keys() == {12}
    assert not idx.vectors_of([10]).any()
    # SQLite reuses ids: id 10 comes back with another vector (an updated chunk)
    idx.add([10], vecs[500:501])
    assert idx.size == N - 1
    hits = idx.search(vecs[500], 2)
    assert {i for i, _ in hits} == {10, 500}
    assert idx.scores_for(vecs[500], [10])[10] == pytest.approx(1.0, abs=1e-5)
    assert all(i >= 0 for i, _ in idx.search(vecs[10], 50))
    # search parameters are cached per k: a later delete must still be hidden
    assert 500 in {i for i, _ in idx.search(vecs[500], 20)}
    idx.remove([500])
    assert 500 not in {i for i, _ in idx.search(vecs[500], 20)}


def test_many_tombstones_trigger_a_rebuild(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ann, "TOMBSTONE_MIN", 10)
    idx, vecs = filled()
    idx.maybe_switch(1000, "hnsw")
    idx.remove(range(300))
    assert idx.tombstones == 300  # below 20 % of the graph: kept as tombstones
    idx.remove(range(300, 500))
    assert idx.tombstones == 0  # 500 >= 20 % of 2000: the graph was rebuilt without them
    assert idx.kind == "hnsw" and idx.size == N - 500
    assert idx.search(vecs[600], 1)[0][0] == 600


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
def test_snapshot_round_trip(tmp_path: Path, kind: str) -> None:
    idx, vecs = filled()
    idx.maybe_switch(1000, kind)
    idx.remove([1, 2, 3])
    idx.add([2], vecs[900:901])
    path = tmp_path / "vectors.faiss"
    idx.save(path)
    assert idx.dirty is False
    back = VectorIndex.load(path, DIM)
    assert back is not None
    assert (back.kind, back.size) == (kind, idx.size)
    assert np.array_equal(np.sort(back.ids()), np.sort(idx.ids()))
    queries = clustered(20, seed=2)
    assert top_ids(back, queries) == top_ids(idx, queries)
    assert 1 not in set(back.ids().tolist())
    # deleting everything and saving again leaves no stale tombstone file behind
    idx.maybe_switch(1000, "flat")
    idx.save(path)
    assert not (tmp_path / "vectors.faiss.tomb").exists()


def test_engine_on_hnsw_deletes_updates_and_reopens(tmp_path: Path) -> None:
    from memoryd.indexer.embedding import load_embedder
    from memoryd.indexer.engine import open_index
    from tests.helpers import make_config

    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    for d in range(1, 7):
        lines = [f"## Part {s}\n\n- Day {d} note {s}: the violin lesson moved to room {d}{s}." for s in range(4)]
        (root / "memory" / f"2024-01-0{d}.md").write_text(f"# 2024-01-0{d}\n\n" + "\n\n".join(lines) + "\n")
    cfg = make_config(root, tmp_path / "data")
    # forced: under "auto" a 17-chunk index is (rightly) flat again on reopen
    cfg = dataclasses.replace(cfg, search=dataclasses.replace(cfg.search, index_type="hnsw"))
    emb = load_embedder(cfg.embedding, cfg.data_dir)
    rels = sorted(str(p.relative_to(root)) for p in root.rglob("*.md"))
    idx = open_index(cfg, emb)
    try:
        idx.vectors.maybe_switch(1000, "hnsw")
        idx.index_files([(root, rel) for rel in rels])
        assert idx.status().index.type == "hnsw"
        idx.remove_file(root, "memory/2024-01-03.md")
        (root / "memory" / "2024-01-04.md").write_text("# 2024-01-04\n\n## Part 0\n\n- Cello lesson instead.\n")
        idx.index_files([(root, "memory/2024-01-04.md")])
        paths = {h["path"] for h in idx.query(Query("violin lesson room", k=50, mode="vector")).to_json()["hits"]}
        assert "memory/2024-01-03.md" not in paths and "memory/2024-01-05.md" in paths
        size = idx.vectors.size
        assert size == idx.store.counts()[1]
    finally:
        idx.close()
    again = open_index(cfg, emb)
    try:
        assert (again.vectors.kind, again.vectors.size) == ("hnsw", size)
        paths = {h["path"] for h in again.query(Query("violin lesson room", k=50, mode="vector")).to_json()["hits"]}
        assert "memory/2024-01-03.md" not in paths
    finally:
        again.close()


def test_engine_follows_the_auto_policy_on_open(tmp_path: Path) -> None:
    from memoryd.indexer.embedding import load_embedder
    from memoryd.indexer.engine import open_index
    from tests.helpers import make_config

    cfg = make_config(tmp_path, tmp_path / "data")
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    try:
        assert idx.status().index.type == "flat"  # a small corpus stays exact
    finally:
        idx.close()


# -- background rebuilds: plan (snapshot) -> build (no lock) -> adopt (swap + writes made meanwhile) --


def snapshot(idx: VectorIndex, batch: int = 512) -> list[tuple[np.ndarray, np.ndarray]]:
    """What the engine's SQLite snapshot yields: the live (ids, vectors), in batches."""
    ids = np.sort(idx.ids())
    return [(ids[s:s + batch], idx.vectors_of(ids[s:s + batch].tolist())) for s in range(0, ids.size, batch)]


def deferred(n: int = N) -> tuple[VectorIndex, np.ndarray]:
    idx, vecs = filled(n)
    idx.auto_rebuild = False
    return idx, vecs


def test_deferred_index_never_rebuilds_inside_a_write() -> None:
    idx, vecs = deferred()
    idx.set_policy(1000)
    idx.add([N], vecs[:1])
    assert idx.kind == "flat" and idx.wanted() == ("hnsw", "policy")
    assert idx.maybe_switch(1000) is True and idx.kind == "hnsw"  # an explicit switch still runs inline
    assert idx.wanted() is None


def test_background_switch_keeps_results_and_the_writes_made_during_the_build() -> None:
    idx, vecs = deferred()
    idx.set_policy(1000)
    queries = clustered(50, seed=1)
    closed: list[bool] = []
    job = idx.plan_rebuild(snapshot(idx), close=lambda: closed.append(True))
    assert job is not None and (job.kind, job.reason, idx.rebuilding) == ("hnsw", "policy", "hnsw")
    assert idx.plan_rebuild(snapshot(idx)) is None  # one at a time
    # writes while it builds: they land in the live (flat) index, which keeps answering
    idx.remove([5, 6])
    idx.remove([7])
    idx.add([7], vecs[900:901])  # an id coming back with another vector
    idx.add([N + 1], vecs[901:902])
    assert idx.kind == "flat" and idx.search(vecs[901], 2)[0][1] == pytest.approx(1.0, abs=1e-5)
    assert job.build() is True and closed == [True]
    exact = top_ids(idx, queries)
    assert idx.adopt(job) is True
    assert (idx.kind, idx.rebuilding, idx.size, idx.dirty) == ("hnsw", None, N - 1, True)
    assert np.array_equal(np.sort(idx.ids()), np.array([i for i in range(N + 2) if i not in (5, 6, N)]))
    recall = np.mean([len(a & e) / 10 for a, e in zip(top_ids(idx, queries), exact, strict=True)])
    assert recall >= 0.95
    assert 5 not in {i for i, _ in idx.search(vecs[5], 20)}
    assert idx.scores_for(vecs[900], [7])[7] == pytest.approx(1.0, abs=1e-5)
    assert idx.search(vecs[901], 1)[0][0] in (N + 1, 901)
    assert idx.adopt(job) is False  # a job is adopted once


def test_background_compaction_drops_tombstones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ann, "TOMBSTONE_MIN", 10)
    idx, vecs = deferred()
    idx.maybe_switch(1000, "hnsw")
    idx.remove(range(500))
    assert idx.tombstones == 500 and idx.wanted() == ("hnsw", "compaction")  # not rebuilt inline
    job = idx.plan_rebuild(snapshot(idx))
    assert job is not None and job.build() and idx.adopt(job)
    assert (idx.kind, idx.tombstones, idx.size) == ("hnsw", 0, N - 500)
    assert idx.wanted() is None
    assert idx.search(vecs[600], 1)[0][0] == 600


def test_stopped_or_cancelled_rebuild_changes_nothing() -> None:
    idx, _ = deferred()
    idx.set_policy(1000)
    job = idx.plan_rebuild(snapshot(idx))
    assert job is not None and job.build(should_stop=lambda: True) is False and job.built is None
    assert idx.adopt(job) is False and (idx.kind, idx.rebuilding) == ("flat", None)
    job = idx.plan_rebuild(snapshot(idx))
    assert job is not None
    idx.cancel(job)
    idx.cancel(job)  # idempotent
    assert job.build() and idx.adopt(job) is False and idx.kind == "flat"
    idx.maybe_switch(10**9, "flat")
    assert idx.plan_rebuild(snapshot(idx)) is None  # nothing due


def test_ef_search_grows_with_the_corpus_within_bounds() -> None:
    """Recall@10 at 1M needed efSearch >= 512 (0.995; 0.942 at 256), 100k is fine at 128."""
    sizes = [0, 1_000, 100_000, 300_000, 1_000_000, 10_000_000]
    efs = [ann.ef_search(10, n) for n in sizes]
    assert efs == sorted(efs) and efs[0] == ann.HNSW_EF_SEARCH and efs[-1] == ann.HNSW_EF_SEARCH_MAX
    assert ann.ef_search(10, 100_000) == 128 and ann.ef_search(10, 1_000_000) >= 512
    assert ann.ef_search(2000, 1_000) == 2000  # never below k


def test_hnsw_graph_is_built_with_the_measured_ef_construction() -> None:
    import faiss

    wrapper = ann.new_index("hnsw", 8)  # keep it alive: it owns the inner index
    index = faiss.downcast_index(wrapper.index)
    assert index.hnsw.efConstruction == ann.HNSW_EF_CONSTRUCTION >= 100
