"""Line vectors for ``context`` excerpts kept in the index's embedding cache: embedded once, across restarts,
on both backends (PostgreSQL: the shared cache table, so across sites too)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from memoryd.daemon.work.line_vectors import LineCache, LineVectors, line_cache_of
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.embedded.cache import cache_key
from tests.indexer.test_storage_backends import BACKENDS, storage_config

Opener = Callable[..., MemoryIndex]


class CountingEmbed:
    """``embed_passages`` that records each batch it is asked for."""

    def __init__(self, emb: HashEmbedder) -> None:
        self.emb = emb
        self.batches: list[list[str]] = []

    def __call__(self, lines: list[str]) -> object:
        self.batches.append(list(lines))
        return self.emb.embed_passages(lines)


class Rollback(Exception):
    """Ends the test's stand-in for an indexer write without committing it."""


@pytest.fixture(params=BACKENDS)
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """``opener(emb, data="data", read_only=False)``: an index of the parametrised backend (PostgreSQL:
    one database for the test, each data directory its own site)."""
    backend = str(request.param)
    dsn = request.getfixturevalue("pg_dsn") if backend == "postgres" else None
    (tmp_path / "root").mkdir(exist_ok=True)

    def run(emb: HashEmbedder, data: str = "data", read_only: bool = False) -> MemoryIndex:
        cfg = storage_config(backend, tmp_path / "root", tmp_path / data, dsn, site=data)
        return open_index(cfg, emb, read_only=read_only)

    yield run


def _lines_of(index: MemoryIndex, embed: CountingEmbed) -> tuple[LineVectors, LineCache]:
    cache = line_cache_of(index)
    assert cache is not None
    return LineVectors(embed, store=cache), cache


def test_a_second_line_vectors_over_the_same_cache_embeds_nothing_after_a_restart(opener: Opener) -> None:
    emb = HashEmbedder(dimension=16)
    sunrise = "I painted that lake sunrise last year"
    lines = [sunrise, "the kids love the beach", sunrise]
    index = opener(emb)
    first_embed = CountingEmbed(emb)
    vectors, cache = _lines_of(index, first_embed)
    first = vectors(lines)
    cache.close()
    index.close()
    assert first_embed.batches == [lines[:2]]  # each distinct line once

    index = opener(emb)  # a new process: empty memo, same database
    again_embed = CountingEmbed(emb)
    vectors, cache = _lines_of(index, again_embed)
    try:
        assert np.allclose(vectors(lines), first) and again_embed.batches == []
        vectors(["a line never seen"])
        assert again_embed.batches == [["a line never seen"]]
    finally:
        cache.close()
        index.close()


def test_line_vectors_share_the_chunk_cache_keys(opener: Opener) -> None:
    emb = HashEmbedder(dimension=16)
    index = opener(emb)
    vectors, cache = _lines_of(index, CountingEmbed(emb))
    try:
        vectors(["the kids love the beach"])
        key = cache_key(emb.model_id, "the kids love the beach")  # the key a chunk of this text has
        assert np.allclose(index.cache.get_many([key])[key], emb.embed_passages(["the kids love the beach"])[0])
    finally:
        cache.close()
        index.close()


def test_lines_are_still_served_when_the_indexer_holds_the_write_lock(opener: Opener) -> None:
    emb = HashEmbedder(dimension=16)
    index = opener(emb)
    embed = CountingEmbed(emb)
    vectors, cache = _lines_of(index, embed)
    mine = {cache_key(emb.model_id, t): v for t, v in zip("ab", emb.embed_passages(["a", "b"]), strict=True)}
    try:
        # the worker mid-write, storing the same texts' vectors (SQLite: the write lock; PostgreSQL: those
        # rows): storing waits briefly, then gives up; the write is then rolled back
        with pytest.raises(Rollback), index.store.transaction() as t:
            index.cache.put_many(t, mine)
            got = vectors(["a", "b"])
            raise Rollback
        assert np.allclose(got, emb.embed_passages(["a", "b"]))
        assert cache.get_many(["a", "b"]) == {}  # not stored: embedded again by a later process
        vectors(["a"])
        assert embed.batches == [["a", "b"]]  # but memoised in memory meanwhile
    finally:
        cache.close()
        index.close()


def test_a_read_only_index_gets_no_line_cache(opener: Opener) -> None:
    emb = HashEmbedder(dimension=16)
    opener(emb).close()  # the index exists
    index = opener(emb, read_only=True)
    try:
        assert index.capabilities.line_cache and line_cache_of(index) is None  # lines live in memory only
    finally:
        index.close()


@pytest.mark.parametrize("opener", ["postgres"], indirect=True)
def test_a_line_one_site_embedded_is_not_embedded_by_another(opener: Opener) -> None:
    emb = HashEmbedder(dimension=16)
    a, b = opener(emb, data="site-a"), opener(emb, data="site-b")
    embed_a, embed_b = CountingEmbed(emb), CountingEmbed(emb)
    vectors_a, cache_a = _lines_of(a, embed_a)
    vectors_b, cache_b = _lines_of(b, embed_b)
    try:
        assert a.site != b.site
        first = vectors_a(["the office is in Lisbon"])
        assert np.allclose(vectors_b(["the office is in Lisbon"]), first)
        assert embed_a.batches == [["the office is in Lisbon"]] and embed_b.batches == []
    finally:
        cache_a.close()
        cache_b.close()
        a.close()
        b.close()


def test_a_block_reads_the_lines_the_index_filled_in_and_embeds_none(opener: Opener, tmp_path: Path) -> None:
    emb = HashEmbedder(dimension=16)
    text = "# Trip\n\nI painted that lake sunrise last year\nthe kids love the beach\n"
    (tmp_path / "root" / "a.md").write_text(text)
    index = opener(emb)
    index.index_files([(tmp_path / "root", "a.md")])
    while index.lines_pending():
        index.fill_line_vectors()
    embed = CountingEmbed(emb)
    vectors, cache = _lines_of(index, embed)
    try:
        ids = [h.chunk_id for h in index.query(Query("lake sunrise", k=3)).hits]
        assert set(cache.lines_of_chunks(ids)) >= {"I painted that lake sunrise last year", "the kids love the beach"}
        assert cache.lines_of_chunks([]) == {} and cache.lines_of_chunks([10**12]) == {}
        vectors.preload(ids)
        got = vectors(["the kids love the beach"])
        assert embed.batches == []  # read from the index's rows, not embedded
        assert np.allclose(got[0], emb.embed_passages(["the kids love the beach"])[0], atol=2e-3)
    finally:
        cache.close()
        index.close()
