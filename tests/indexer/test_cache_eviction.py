"""The embedding cache's bound does what config/memoryd.toml says (issue #28 item 5): past
``cache_entries`` the least recently used (stored or read) go, down to 90 % of the capacity,
never a vector a live chunk uses."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from memoryd.indexer.storage.embedded.cache import EmbeddingCache, cache_key
from memoryd.indexer.storage.embedded.store import NewChunk, Store

CAPACITY = 100


def key(i: int) -> bytes:
    return cache_key("m", f"t{i}")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    st = Store(tmp_path / "i.db")
    yield st
    st.close()


def fill(st: Store, cache: EmbeddingCache, n: int) -> None:
    """Entries t0..t{n-1}, t0 the least recently used (distinct, increasing times)."""
    with st.transaction() as t:
        cache.put_many(t, {key(i): np.full(4, i, dtype=np.float32) for i in range(n)})
        t.executemany("UPDATE embed_cache SET last_used = ? WHERE key = ?", [(1000.0 + i, key(i)) for i in range(n)])


def kept(cache: EmbeddingCache, n: int) -> set[int]:
    found = cache.get_many([key(i) for i in range(n)], count=False)
    return {i for i in range(n) if key(i) in found}


def evict(st: Store, cache: EmbeddingCache) -> int:
    with st.transaction() as t:
        return cache.evict(t)


@pytest.mark.parametrize("total", [101, 105, 130, 300])
def test_over_capacity_the_oldest_go_down_to_ninety_percent(store: Store, total: int) -> None:
    cache = EmbeddingCache(store.conn, 4, capacity=CAPACITY)
    fill(store, cache, total)
    assert evict(store, cache) == total - 90
    assert cache.entries() == 90
    assert kept(cache, total) == set(range(total - 90, total))  # the 90 most recently used


def test_at_or_under_capacity_nothing_goes(store: Store) -> None:
    cache = EmbeddingCache(store.conn, 4, capacity=CAPACITY)
    fill(store, cache, CAPACITY)
    assert evict(store, cache) == 0 and cache.entries() == CAPACITY


def test_a_read_counts_as_a_use(store: Store) -> None:
    """The embedded backend marks reads too (as PostgreSQL does): read vectors outlive newer unread ones."""
    cache = EmbeddingCache(store.conn, 4, capacity=CAPACITY)
    fill(store, cache, 130)
    assert len(cache.get_many([key(i) for i in range(5)])) == 5  # the five oldest, read now
    evict(store, cache)
    assert kept(cache, 130) == set(range(5)) | set(range(45, 130))


def test_live_vectors_stay_even_when_that_keeps_the_cache_above_the_mark(store: Store, tmp_path: Path) -> None:
    cache = EmbeddingCache(store.conn, 4, capacity=CAPACITY)
    fill(store, cache, 130)
    chunks = [NewChunk(start_line=i + 1, end_line=i + 1, heading="", text=f"t{i}",
                      sha256=hashlib.sha256(f"t{i}".encode()).hexdigest(), embed_key=key(i), terms=f"t{i}")
              for i in range(95)]  # the 95 oldest are live
    store.replace_file(store.root_id(tmp_path), "a.md", 1, 1, "h", "", chunks)
    assert evict(store, cache) == 35  # every unused one, and no more
    assert kept(cache, 130) == set(range(95))
