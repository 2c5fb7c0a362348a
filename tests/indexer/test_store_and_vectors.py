from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from memoryd.indexer.errors import StoreClosedError, StoreCorruptError
from memoryd.indexer.search.fusion import minmax
from memoryd.indexer.storage.embedded.cache import EmbeddingCache, cache_key
from memoryd.indexer.storage.embedded.store import NewChunk, Store, fetch_chunks
from memoryd.indexer.storage.embedded.vectors import VectorIndex


def _chunk(text: str, start: int = 1) -> NewChunk:
    return NewChunk(start, start, "", text, hashlib.sha256(text.encode()).hexdigest(),
                    cache_key("m", text), text.lower())


def test_replace_file_keeps_ids_of_unchanged_chunks(tmp_path: Path) -> None:
    st = Store(tmp_path / "i.db")
    rid = st.root_id(tmp_path)
    first = st.replace_file(rid, "a.md", 1, 1, "h1", "", [_chunk("alpha", 1), _chunk("beta", 2)])
    assert len(first.added) == 2 and first.removed == []
    ids = {k: i for i, k in first.added}
    second = st.replace_file(rid, "a.md", 1, 2, "h2", "", [_chunk("new top", 1), _chunk("alpha", 2),
                                                           _chunk("beta", 3)])
    assert second.kept == 2 and len(second.added) == 1 and second.removed == []
    rows = fetch_chunks(st.conn, list(ids.values()))
    assert {r.start_line for r in rows.values()} == {2, 3}  # kept ids, new line spans
    third = st.replace_file(rid, "a.md", 1, 3, "h3", "", [_chunk("beta", 1)])
    assert third.kept == 1 and sorted(third.removed) == sorted([ids[cache_key("m", "alpha")],
                                                                 second.added[0][0]])
    assert st.counts() == (1, 1)
    assert st.conn.execute("SELECT count(*) FROM chunks_fts").fetchone()[0] == 1
    st.close()


def test_move_and_delete(tmp_path: Path) -> None:
    st = Store(tmp_path / "i.db")
    rid = st.root_id(tmp_path)
    change = st.replace_file(rid, "a.md", 1, 1, "h", "", [_chunk("alpha")])
    assert st.move_file(rid, "a.md", rid, "b/a.md")
    assert st.file(rid, "a.md") is None and st.file(rid, "b/a.md") is not None
    assert not st.move_file(rid, "missing.md", rid, "x.md")
    assert st.delete_file(rid, "b/a.md") == [change.added[0][0]]
    assert st.counts() == (0, 0)
    st.close()


def test_closed_store_raises_named_error(tmp_path: Path) -> None:
    st = Store(tmp_path / "i.db")
    st.close()
    with pytest.raises(StoreClosedError, match=r"i\.db"):
        st.counts()


def test_corrupt_database_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "i.db").write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StoreCorruptError, match=r"i\.db"):
        Store(tmp_path / "i.db")


def test_cache_roundtrip_counts_and_lru_never_evicts_live_vectors(tmp_path: Path) -> None:
    st = Store(tmp_path / "i.db")
    cache = EmbeddingCache(st.conn, 4, capacity=100)
    vecs = {cache_key("m", f"t{i}"): np.full(4, i, dtype=np.float32) for i in range(150)}
    with st.transaction() as t:
        cache.put_many(t, vecs)
    live = _chunk("t0")  # t0 is the oldest entry, but a chunk uses it
    st.replace_file(st.root_id(tmp_path), "a.md", 1, 1, "h", "", [live])
    got = cache.get_many([cache_key("m", "t1"), cache_key("m", "nope")])
    assert list(got) == [cache_key("m", "t1")] and cache.hits == 1 and cache.misses == 1
    with st.transaction() as t:
        evicted = cache.evict(t)
    assert evicted == 60 and cache.entries() == 90  # down to 90 % of the capacity (cache.LOW_WATER)
    assert cache.get_many([cache_key("m", "t0")], count=False)  # live entry survived
    st.close()


def test_cache_key_binds_model_and_text() -> None:
    assert cache_key("a", "x") != cache_key("b", "x") != cache_key("a", "y")
    assert len(cache_key("a", "x")) == 32


def test_vector_index_add_remove_search_and_snapshot(tmp_path: Path) -> None:
    vi = VectorIndex(3)
    vi.add([10, 20], np.array([[1, 0, 0], [0, 1, 0]], dtype=np.float32))
    assert vi.search(np.array([1, 0, 0], dtype=np.float32), 5)[0] == (10, 1.0)
    assert vi.scores_for(np.array([0, 1, 0], dtype=np.float32), [20, 99]) == {20: 1.0}
    vi.save(tmp_path / "v.faiss")
    assert not vi.dirty
    loaded = VectorIndex.load(tmp_path / "v.faiss", 3)
    assert loaded is not None and sorted(loaded.ids().tolist()) == [10, 20]
    assert loaded.remove([10]) == 1 and loaded.size == 1


def test_vector_snapshot_corrupt_or_wrong_dimension_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "bad.faiss").write_bytes(b"\x00garbage" * 50)
    assert VectorIndex.load(tmp_path / "bad.faiss", 3) is None
    vi = VectorIndex(4)
    vi.add([1], np.ones((1, 4), dtype=np.float32))
    vi.save(tmp_path / "v.faiss")
    assert VectorIndex.load(tmp_path / "v.faiss", 3) is None
    assert VectorIndex.load(tmp_path / "missing.faiss", 3) is None


def test_minmax_normalisation() -> None:
    # FTS5 bm25 is negative; the searcher negates it first, so larger = better.
    out = minmax({1: 4.0, 2: 2.0, 3: 3.0}, [1, 2, 3, 4])
    assert out == {1: 1.0, 2: 0.0, 3: 0.5, 4: 0.0}
    assert minmax({1: 2.0, 2: 2.0}, [1, 2, 3]) == {1: 1.0, 2: 1.0, 3: 0.0}
    assert minmax({}, [1]) == {1: 0.0}


def test_engine_keeps_the_cache_within_its_bound_while_indexing(tmp_path: Path) -> None:
    """Filled past ``embedding.cache_entries`` by edits, the cache is trimmed after each indexing call
    (not only at the hourly maintenance), never losing a live chunk's vector."""
    import dataclasses

    from memoryd.indexer.embedding import load_embedder
    from memoryd.indexer.engine import open_index
    from memoryd.indexer.storage.embedded.backend import VECTORS_NAME
    from tests.helpers import CountingEmbedder, make_config

    root = tmp_path / "root"
    root.mkdir()
    cfg = make_config(root, tmp_path / "data")
    cfg = dataclasses.replace(cfg, embedding=dataclasses.replace(cfg.embedding, cache_entries=100))
    emb = CountingEmbedder(load_embedder(cfg.embedding, cfg.data_dir))
    idx = open_index(cfg, emb)
    files = [(root, f"n{i}.md") for i in range(60)]

    def live_keys_cached() -> bool:
        keys = list(idx.store.embed_keys(idx.store.chunk_ids().tolist()).values())
        return len(idx.cache.get_many(keys, count=False)) == len(keys) == 60

    try:
        for rev in range(4):  # each revision changes every chunk: 60 new vectors, 60 dead ones
            for _, rel in files:
                (root / rel).write_text(f"Note {rel} revision {rev}: the heron came back.\n")
            idx.index_files(files)
            assert idx.cache.entries() <= 100 and live_keys_cached()
        assert emb.embedded == 240
        for _, rel in files[:50]:  # live chunks alone past the bound: the cache holds exactly them
            (root / rel).write_text(f"Note {rel}\n\nfirst part.\n\n# Second\n\n{rel} second part, much later.\n")
        idx.index_files(files)
        assert idx.store.counts()[1] == 110 and idx.cache.entries() == 110
    finally:
        idx.close()
    (cfg.data_dir / VECTORS_NAME).unlink()
    again = open_index(cfg, CountingEmbedder(emb.inner))  # vectors rebuilt from the cache alone
    try:
        assert again.vectors.size == 110 and again.embedder.embedded == 0  # type: ignore[attr-defined]
    finally:
        again.close()
