"""Line vectors for ``context`` excerpts kept in the index's embedding cache: embedded once, across restarts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from memoryd.daemon.work.line_vectors import LineCache, LineVectors, line_cache_of
from memoryd.indexer.cache import cache_key
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex
from tests.helpers import make_config


class CountingEmbed:
    """``embed_passages`` that records each batch it is asked for."""

    def __init__(self, emb: HashEmbedder) -> None:
        self.emb = emb
        self.batches: list[list[str]] = []

    def __call__(self, lines: list[str]) -> object:
        self.batches.append(list(lines))
        return self.emb.embed_passages(lines)


def _index(tmp_path: Path, emb: HashEmbedder) -> MemoryIndex:
    (tmp_path / "root").mkdir(exist_ok=True)
    return MemoryIndex(make_config(tmp_path / "root", tmp_path / "data"), emb)


def _lines_of(index: MemoryIndex, embed: CountingEmbed) -> tuple[LineVectors, LineCache]:
    cache = line_cache_of(index)
    assert cache is not None
    return LineVectors(embed, store=cache), cache


def test_a_second_line_vectors_over_the_same_cache_embeds_nothing_after_a_restart(tmp_path: Path) -> None:
    emb = HashEmbedder(dimension=16)
    sunrise = "I painted that lake sunrise last year"
    lines = [sunrise, "the kids love the beach", sunrise]
    index = _index(tmp_path, emb)
    first_embed = CountingEmbed(emb)
    vectors, cache = _lines_of(index, first_embed)
    first = vectors(lines)
    cache.close()
    index.close()
    assert first_embed.batches == [lines[:2]]  # each distinct line once

    index = _index(tmp_path, emb)  # a new process: empty memo, same database
    again_embed = CountingEmbed(emb)
    vectors, cache = _lines_of(index, again_embed)
    try:
        assert np.array_equal(vectors(lines), first) and again_embed.batches == []
        vectors(["a line never seen"])
        assert again_embed.batches == [["a line never seen"]]
    finally:
        cache.close()
        index.close()


def test_line_vectors_share_the_chunk_cache_keys(tmp_path: Path) -> None:
    emb = HashEmbedder(dimension=16)
    index = _index(tmp_path, emb)
    vectors, cache = _lines_of(index, CountingEmbed(emb))
    try:
        vectors(["the kids love the beach"])
        key = cache_key(emb.model_id, "the kids love the beach")  # the key a chunk of this text has
        assert np.array_equal(index.cache.get_many([key])[key], emb.embed_passages(["the kids love the beach"])[0])
    finally:
        cache.close()
        index.close()


def test_lines_are_still_served_when_the_indexer_holds_the_write_lock(tmp_path: Path) -> None:
    emb = HashEmbedder(dimension=16)
    index = _index(tmp_path, emb)
    embed = CountingEmbed(emb)
    vectors, cache = _lines_of(index, embed)
    try:
        with index.store.transaction():  # the worker mid-write: storing waits briefly, then gives up
            got = vectors(["a", "b"])
        assert np.array_equal(got, emb.embed_passages(["a", "b"]))
        assert cache.get_many(["a", "b"]) == {}  # not stored: embedded again by a later process
        vectors(["a"])
        assert embed.batches == [["a", "b"]]  # but memoised in memory meanwhile
    finally:
        cache.close()
        index.close()


def test_an_index_without_its_own_cache_table_gets_no_line_cache(tmp_path: Path) -> None:
    assert line_cache_of(object()) is None
    index = _index(tmp_path, HashEmbedder(dimension=16))
    store = index.store
    try:
        index.store = object()  # type: ignore[assignment]  # as over PostgreSQL: a MemoryIndex on another store
        assert line_cache_of(index) is None
    finally:
        index.store = store
        index.close()
