"""Each chunk's line vectors (indexer/fill/line_vectors.py): filled after indexing, dropped with their chunk,
never attached to a chunk whose text changed meanwhile; and the ranking that reads them
(indexer/search/lineblend.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from memoryd.indexer.config import ConfigError, validate
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.search.hits import Hit
from memoryd.indexer.search.lineblend import FIRST_MOVED, blend
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.embedded.cache import cache_key
from memoryd.indexer.storage.embedded.store_lines import SqliteLineRows
from memoryd.indexer.storage.line_codec import best_cosines, chunk_lines, decode_lines, encode
from tests.helpers import CountingEmbedder, make_config

NOTES = "# Notes\n\nMelanie painted a sunset in July.\n\nShe went camping with the kids.\n\n" \
        "Caroline adopted a dog named Rex.\n"


def _index(tmp_path: Path, files: dict[str, str], data: str = "data") -> tuple[MemoryIndex, CountingEmbedder, Path]:
    root = tmp_path / "root"
    root.mkdir(exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text)
    emb = CountingEmbedder(HashEmbedder(dimension=64))
    index = open_index(make_config(root, tmp_path / data), emb)  # type: ignore[arg-type]
    index.index_files([(root, name) for name in files])
    return index, emb, root


def _rows(index: MemoryIndex) -> dict[int, bytes]:
    rows = index.backend.sqlite.conn.execute("SELECT chunk_id, vectors FROM line_vectors")
    return {int(i): bytes(b) for i, b in rows}


def _fill(index: MemoryIndex) -> int:
    steps = 0
    while index.lines_pending():
        index.fill_line_vectors(max_lines=8)
        steps += 1
        assert steps < 1000, "the fill never ended"
    return steps


def test_every_chunk_gets_one_vector_per_non_blank_line(tmp_path: Path) -> None:
    index, emb, _ = _index(tmp_path, {"a.md": NOTES, "b.md": "one\n\n\ntwo\nthree\n" * 40})
    assert index.lines_pending() and index.line_fill is not None and index.line_fill.count() > 0
    embedded_before = emb.embedded
    assert _fill(index) > 1  # bounded steps, not one call for everything
    assert not index.lines_pending() and index.line_fill.count() == 0
    filled = emb.embedded - embedded_before
    texts = dict(index.backend.sqlite.conn.execute("SELECT id, text FROM chunks"))
    rows = _rows(index)
    assert set(rows) == set(texts)
    for chunk_id, text in texts.items():
        lines = chunk_lines(text)
        stored = np.frombuffer(rows[chunk_id], dtype=np.float16).reshape(len(lines), -1)
        want = np.asarray(emb.inner.embed_passages(lines), dtype=np.float32)
        np.testing.assert_allclose(stored.astype(np.float32), want, atol=2e-3)
    distinct = {x for t in texts.values() for x in chunk_lines(t)}
    assert filled <= len(distinct)  # a line recurring across chunks is embedded once
    index.close()


def test_the_fill_writes_no_cache_entry_and_reuses_lines_the_cache_has(tmp_path: Path) -> None:
    index, emb, root = _index(tmp_path, {"a.md": NOTES})
    entries = index.backend.local_cache.entries()
    _fill(index)
    assert index.backend.local_cache.entries() == entries  # ~8 lines a chunk would crowd the chunks' vectors out
    # lines the context excerpts stored in the cache are not embedded again
    (root / "b.md").write_text("Context stored this line.\nAnd this one too.\n")
    index.index_files([(root, "b.md")])
    lines = ["Context stored this line.", "And this one too."]
    with index.backend.sqlite.transaction() as t:
        index.backend.local_cache.put_many(t, {cache_key(index.embedder.model_id, x): v
                                       for x, v in zip(lines, emb.inner.embed_passages(lines), strict=True)})
    before = emb.embedded
    _fill(index)
    assert emb.embedded == before and not index.lines_pending()
    index.close()


def test_a_small_step_runs_inline_and_a_large_one_on_the_bulk_session(tmp_path: Path) -> None:
    index, _, root = _index(tmp_path, {"a.md": NOTES})
    assert index.line_fill is not None
    bulk, inline = CountingEmbedder(HashEmbedder(dimension=64)), CountingEmbedder(HashEmbedder(dimension=64))
    index.line_fill.fill(bulk, inline, max_lines=256, slice_lines=8)  # type: ignore[arg-type]
    assert (inline.embedded, bulk.embedded) == (4, 0)  # a save's few lines: the session already warm
    (root / "b.md").write_text("\n".join(f"line {i}" for i in range(40)))
    index.index_files([(root, "b.md")])
    index.line_fill.fill(bulk, inline, max_lines=256, slice_lines=8)  # type: ignore[arg-type]
    assert (inline.embedded, bulk.embedded) == (4, 40)  # a backlog's: every slice on the bulk session
    index.close()


def test_rows_go_with_their_chunks_and_an_edit_queues_the_new_ones(tmp_path: Path) -> None:
    index, _, root = _index(tmp_path, {"a.md": NOTES, "b.md": "other file\n"})
    _fill(index)
    b_ids = {int(i) for (i,) in index.backend.sqlite.conn.execute(
        "SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id WHERE f.path = 'b.md'")}
    (root / "a.md").write_text(NOTES + "\nMelanie also paints pottery.\n")
    index.index_files([(root, "a.md")])
    assert index.lines_pending()
    rows = _rows(index)
    assert b_ids <= set(rows)  # the untouched file keeps its rows
    live = {int(i) for (i,) in index.backend.sqlite.conn.execute("SELECT id FROM chunks")}
    assert set(rows) <= live  # no row outlives its chunk
    _fill(index)
    assert set(_rows(index)) == live
    index.remove_file(root, "a.md")
    assert set(_rows(index)) == b_ids
    index.close()


def test_a_chunk_whose_text_changed_mid_step_gets_no_row(tmp_path: Path) -> None:
    index, _, _ = _index(tmp_path, {"a.md": NOTES})
    assert index.line_fill is not None
    rows = SqliteLineRows(index.backend.sqlite)
    (chunk_id, sha, _text), = rows.next_chunks(100, 0)
    # the chunk's id now holds another text (a deleted chunk's id reused): the step's write must not attach
    index.backend.sqlite.conn.execute("UPDATE chunks SET sha256 = 'other' WHERE id = ?", (chunk_id,))
    rows.write([(chunk_id, sha, encode(np.ones((2, 64), np.float32)))])
    assert _rows(index) == {}
    index.close()


def test_a_read_only_index_fills_nothing(tmp_path: Path) -> None:
    index, _, root = _index(tmp_path, {"a.md": NOTES})
    index.close()
    ro = open_index(make_config(root, tmp_path / "data"), HashEmbedder(dimension=64), read_only=True)
    assert not ro.lines_pending()
    assert ro.fill_line_vectors().chunks == 0
    ro.close()


def test_a_new_chunk_below_where_the_scan_had_got_to_is_filled(tmp_path: Path) -> None:
    files = {f"n{i:02d}.md": f"note {i}\nsecond line {i}\n" for i in range(12)}
    index, _, root = _index(tmp_path, files)
    while index.lines_pending():
        index.fill_line_vectors(max_lines=8)  # small steps: the scan follows the backlog up
    top = index.backend.sqlite.conn.execute("SELECT max(id) FROM chunks").fetchone()[0]
    for name in ("n09.md", "n10.md", "n11.md"):  # the top chunks go...
        index.remove_file(root, name)
    (root / "new.md").write_text("a note written later\n")
    index.index_files([(root, "new.md")])
    (new_id,) = index.backend.sqlite.conn.execute("SELECT c.id FROM chunks c JOIN files f ON f.id = c.file_id"
                                          " WHERE f.path = 'new.md'").fetchone()
    assert new_id < top  # ...and SQLite gives the new chunk an id below where the scan had got to
    _fill(index)
    assert new_id in _rows(index) and SqliteLineRows(index.backend.sqlite).count() == 0
    index.close()


def test_the_pending_count_follows_the_fill_and_starts_from_zero_after_it(tmp_path: Path) -> None:
    index, _, root = _index(tmp_path, {f"n{i}.md": f"note {i}\n" for i in range(5)})
    assert index.status().line_vectors_pending == 5
    index.fill_line_vectors(max_lines=16)  # some of them, kept count without asking the database again
    left = SqliteLineRows(index.backend.sqlite).count()
    assert 0 < left < 5 and index.status().line_vectors_pending == left
    for i in range(3):
        index.remove_file(root, f"n{i}.md")  # gone before the fill reached some: the estimate is high now
    _fill(index)
    assert index.status().line_vectors_pending == 0
    (root / "later.md").write_text("one more\n")
    index.index_files([(root, "later.md")])
    assert index.status().line_vectors_pending == 1  # counted from zero, not from the stale estimate
    index.close()


def test_an_older_index_without_the_table_searches_read_only(tmp_path: Path) -> None:
    index, _, root = _index(tmp_path, {"a.md": NOTES})
    index.backend.sqlite.conn.execute("DROP TABLE line_vectors")  # as an index written before line vectors
    index.close()
    ro = open_index(make_config(root, tmp_path / "data"), HashEmbedder(dimension=64), read_only=True)
    hits = ro.query(Query("Melanie painted a sunset")).hits
    assert hits and hits[0].path == "a.md"
    assert ro.status().line_vectors_pending is None  # not known: this index fills nothing
    ro.close()
    rw = open_index(make_config(root, tmp_path / "data"), HashEmbedder(dimension=64))
    assert rw.lines_pending() and rw.line_fill is not None and rw.line_fill.count() == 1  # created, then filled
    rw.close()


def test_best_cosines_reads_float16_rows() -> None:
    q = np.zeros(4, np.float32)
    q[0] = 1.0
    m = np.array([[0.2, 0.9, 0, 0], [0.7, 0.1, 0, 0]], np.float32)
    got = best_cosines([(1, encode(m)), (2, b""), (3, b"\x00" * 6)], q)
    assert got[1] == pytest.approx(0.7, abs=1e-3)
    assert got[2] == -1.0  # a chunk without a non-blank line matches nothing
    assert 3 not in got  # another width: as if not filled


def test_the_search_reads_the_line_vectors_once_filled(tmp_path: Path) -> None:
    index, _, _ = _index(tmp_path, {"a.md": NOTES})
    before = index.query(Query("Melanie painted a sunset", explain=True))
    assert before.explanations is not None and before.explanations[0]["best_line_cosine"] is None  # not filled
    assert before.query_analysis is not None and before.query_analysis["line_blend"].startswith("skipped: 1 of 1")
    _fill(index)
    after = index.query(Query("Melanie painted a sunset", explain=True))
    assert after.explanations is not None and after.query_analysis is not None
    assert after.explanations[0]["best_line_cosine"] > 0.5
    assert after.query_analysis["line_blend"].startswith("nothing to move")  # one hit: hits 1-3 never move
    off = replace(index.searcher._cfg, line_weight=0.0)
    index.searcher = type(index.searcher)(index.searcher._legs, index.embedder, off)
    quiet = index.query(Query("Melanie painted a sunset", explain=True))
    assert quiet.explanations is not None and "best_line_cosine" not in quiet.explanations[0]
    assert quiet.query_analysis is not None and quiet.query_analysis["line_blend"].startswith("off")
    index.close()


def test_stored_rows_read_back_by_line_text(tmp_path: Path) -> None:
    index, _, _ = _index(tmp_path, {"a.md": NOTES})
    _fill(index)
    store = index.open_line_store()
    assert store is not None
    ids = [int(i) for (i,) in index.backend.sqlite.conn.execute("SELECT id FROM chunks")]
    got = store.lines_of_chunks(ids)
    texts = index.backend.sqlite.conn.execute("SELECT text FROM chunks")
    assert set(got) == {x for (t,) in texts for x in chunk_lines(t)}
    want = np.asarray(index.embedder.embed_passages(["Caroline adopted a dog named Rex."]), np.float32)[0]
    np.testing.assert_allclose(got["Caroline adopted a dog named Rex."], want, atol=2e-3)
    assert store.lines_of_chunks([10**9]) == {}
    store.close()
    index.close()


def test_a_row_of_another_width_or_line_count_decodes_to_nothing() -> None:
    blob = encode(np.ones((2, 4), np.float32))
    assert set(decode_lines("a\n\nb", blob, 4)) == {"a", "b"}
    assert decode_lines("a\nb\nc", blob, 4) == {} and decode_lines("a\nb", blob, 8) == {}


def test_nothing_is_filled_when_neither_the_ranking_nor_the_excerpts_use_lines(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.md").write_text(NOTES)
    cfg = make_config(root, tmp_path / "data")
    cfg = replace(cfg, search=replace(cfg.search, line_weight=0.0, context_line_model=False))
    index = open_index(cfg, HashEmbedder(dimension=64))
    index.index_files([(root, "a.md")])
    assert index.line_fill is None and not index.lines_pending() and index.fill_line_vectors().chunks == 0
    assert index.status().line_vectors_pending is None
    index.close()


def test_line_weight_is_validated(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, tmp_path / "data")
    for bad in (-0.1, 11.0, float("nan")):
        with pytest.raises(ConfigError, match=r"search\.line_weight"):
            validate(replace(cfg, search=replace(cfg.search, line_weight=bad)))


# -- the blend ----------------------------------------------------------------------------------


def _hit(i: int, score: float, path: str | None = None, start: int | None = None) -> Hit:
    start = 100 * i if start is None else start
    return Hit(i, "/r", path or f"f{i}.md", start, start + 9, "", f"text {i}", score, 0.5, 0.5)


def test_the_first_hits_never_move_and_a_strong_line_lifts_a_tail_hit() -> None:
    hits = [_hit(i, 1.0 - 0.01 * i) for i in range(10)]
    cos = dict.fromkeys(range(10), 0.5)
    cos[0] = 0.0  # a top hit with a weak line stays first
    cos[8] = 0.99
    out = blend(hits, cos, weight=0.5)
    assert [h.chunk_id for h in out[: FIRST_MOVED - 1]] == [0, 1, 2]
    assert out.index(hits[8]) < 8
    assert sorted(h.chunk_id for h in out) == list(range(10))


def test_the_blend_changes_nothing_when_off_or_incomplete() -> None:
    hits = [_hit(i, 1.0 - 0.01 * i) for i in range(10)]
    cos = {i: float(i) for i in range(10)}  # the tail reversed, were it applied at full weight
    assert blend(hits, cos, weight=0.0) == hits
    del cos[5]
    assert blend(hits, cos, weight=10.0) == hits  # a chunk without line vectors: no reordering at all
    assert blend(hits[:FIRST_MOVED], {i: float(i) for i in range(10)}, weight=10.0) == hits[:FIRST_MOVED]


def test_a_merged_passage_moves_whole() -> None:
    hits = [_hit(i, 1.0 - 0.01 * i) for i in range(8)]
    # chunks 6 and 7 are consecutive windows of one file: one passage
    hits[6] = _hit(6, 0.94, path="same.md", start=0)
    hits[7] = _hit(7, 0.93, path="same.md", start=9)
    cos = dict.fromkeys(range(8), 0.1)
    cos[7] = 0.99  # the passage's best line is in its second chunk
    out = [h.chunk_id for h in blend(hits, cos, weight=1.0)]
    assert out.index(7) == out.index(6) + 1
    assert out.index(6) == FIRST_MOVED - 1
