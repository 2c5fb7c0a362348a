"""Consecutive overlapping hits of one file become one hit (indexer/search/hits.py), in the library and in search."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.hits import MAX_MERGED_CHUNKS, Hit, merge_consecutive
from memoryd.indexer.search.query import Query
from tests.helpers import make_config

FILE = [f"line {n}" for n in range(1, 101)]


def hit(cid: int, start: int, end: int, score: float = 1.0, path: str = "a.md", vec: float = 0.5,
        text: float = 0.5) -> Hit:
    body = "\n".join(FILE[start - 1:end])
    return Hit(cid, "/r", path, start, end, "h", body, score, vec, text)


def spans(hits: list[Hit]) -> list[tuple[str, int, int]]:
    return [(h.path, h.start_line, h.end_line) for h in hits]


def test_overlapping_neighbours_in_rank_order_merge() -> None:
    merged = merge_consecutive([hit(1, 10, 19, 1.0, vec=0.9, text=0.2), hit(2, 18, 27, 0.8, vec=0.4, text=0.7),
                                hit(3, 50, 59, 0.5)])
    assert spans(merged) == [("a.md", 10, 27), ("a.md", 50, 59)]
    first = merged[0]
    assert first.text == "\n".join(FILE[9:27])  # lines 18-19 once, in file order
    assert (first.chunk_id, first.score, first.absorbed) == (1, 1.0, (2,))
    assert (first.vector_score, first.text_score) == (0.9, 0.7)  # the best of the parts


def test_the_later_chunk_may_precede_in_the_file_and_touching_spans_merge() -> None:
    merged = merge_consecutive([hit(1, 20, 29), hit(2, 10, 19)])
    assert spans(merged) == [("a.md", 10, 29)] and merged[0].text == "\n".join(FILE[9:29])


def test_hits_that_do_not_join_stay_apart() -> None:
    apart = [hit(1, 10, 19), hit(2, 21, 30)]  # a one-line gap
    other_file = [hit(1, 10, 19), hit(2, 18, 27, path="b.md")]
    not_consecutive = [hit(1, 10, 19), hit(2, 50, 59), hit(3, 18, 27)]  # another passage ranked between
    for hits in (apart, other_file, not_consecutive):
        assert merge_consecutive(hits) == hits


def test_a_merged_hit_holds_at_most_max_chunks() -> None:
    chain = [hit(i, 1 + 8 * i, 10 + 8 * i) for i in range(5)]
    merged = merge_consecutive(chain)
    assert [len(h.absorbed) + 1 for h in merged] == [MAX_MERGED_CHUNKS, 5 - MAX_MERGED_CHUNKS]
    assert merge_consecutive(chain, max_chunks=1) == chain


windows = st.tuples(st.integers(1, 90), st.integers(0, 12)).map(lambda t: (t[0], min(100, t[0] + t[1])))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(windows, st.sampled_from(["a.md", "b.md"])), max_size=12))
def test_merging_keeps_order_lines_and_text_exact(parts: list[tuple[tuple[int, int], str]]) -> None:
    hits = [hit(i, s, e, path=p) for i, ((s, e), p) in enumerate(parts)]
    merged = merge_consecutive(hits)
    # Every input chunk lands in exactly one output hit, in rank order.
    ids = [cid for h in merged for cid in (h.chunk_id, *h.absorbed)]
    assert ids == list(range(len(hits)))
    for h in merged:
        parts_of = [hits[i] for i in (h.chunk_id, *h.absorbed)]
        assert len(parts_of) <= MAX_MERGED_CHUNKS and {p.path for p in parts_of} == {h.path}
        assert h.start_line == min(p.start_line for p in parts_of) and h.end_line == max(p.end_line for p in parts_of)
        assert h.text == "\n".join(FILE[h.start_line - 1:h.end_line])  # contiguous, each line once


def _transcript(n: int) -> str:
    lines = ["# 2023-05-01", "", "## Session 1", ""]
    lines += [f"- **{'Ann' if i % 2 else 'Bob'}**: filler remark {i} about the weather and the bus." for i in range(n)]
    return "\n".join(lines) + "\n"


def test_search_returns_one_hit_for_a_passage_split_across_windows(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "memory").mkdir(parents=True)
    body = _transcript(200).splitlines()
    # A passage that straddles whatever window boundary falls near line 40 or so is found twice.
    for n in range(30, 60):
        body[n] = f"- **Ann**: the zeppelin quartet rehearsal moved, item {n}."
    (root / "memory" / "2023-05-01.md").write_text("\n".join(body) + "\n")
    base = make_config(root, tmp_path / "data")
    emb = load_embedder(base.embedding, base.data_dir)
    results = {}
    for merge in (False, True):
        cfg = dataclasses.replace(base, search=dataclasses.replace(base.search, merge_adjacent=merge))
        idx = open_index(cfg, emb)
        pf = PathFilter(("*.md",), ())
        reconcile(idx, [root], pf)
        asked = Query("zeppelin quartet rehearsal", k=5, mode="keyword", explain=True)
        results[merge] = idx.query(asked).to_json()["hits"]
        idx.close()
    per_chunk, merged = results[False], results[True]
    assert len(per_chunk) >= 2 and per_chunk[0]["end_line"] >= per_chunk[1]["start_line"] - 1  # neighbours
    top = merged[0]
    assert top["start_line"] == min(h["start_line"] for h in per_chunk[:2])
    assert top["end_line"] == max(h["end_line"] for h in per_chunk[:2])
    lines = (root / "memory" / "2023-05-01.md").read_text().splitlines()
    assert top["text"] == "\n".join(lines[top["start_line"] - 1:top["end_line"]])
    assert top["explain"]["merged"][0]["start_line"] == per_chunk[1]["start_line"]
    # No two returned hits of one file overlap when they are consecutive.
    for a, b in itertools.pairwise(merged):
        assert a["path"] != b["path"] or b["start_line"] > a["end_line"] + 1 or b["end_line"] < a["start_line"] - 1


def test_explain_rendering_lists_the_merged_chunks() -> None:
    from memoryd.daemon.client.render import render_hits

    e = {"fusion": "zscore", "vector_rank": 1, "keyword_rank": 2, "cosine": 0.9, "bm25": 3.0,
         "merged": [{"start_line": 18, "end_line": 27, "vector_rank": 2, "keyword_rank": 1, "cosine": 0.8,
                     "bm25": 4.0}]}
    h = {"path": "a.md", "start_line": 10, "end_line": 27, "score": 1.0, "text_score": 0.5, "text": "x",
         "explain": e}
    shown = render_hits({"hits": [h], "took_ms": 1.0, "mode": "hybrid", "query_searched": "hi\nthere"})
    assert "+ lines 18-27: vector rank 2" in shown and "(searched as: hi / there)" in shown


def test_hits_preview_their_matched_lines_numbered_and_bold_only_on_request() -> None:
    from memoryd.daemon.client.render import BOLD, render_hits

    h = {"root": "/r", "path": "a.md", "start_line": 8, "end_line": 11, "score": 1.0, "text_score": 0.5,
         "text": "first\nsecond\nthe \x1b[2J match\nlast", "match_lines": [10]}
    plain = render_hits({"hits": [h], "took_ms": 1.0, "mode": "hybrid"})
    assert "    10│ the \\x1b[2J match" in plain and "first" not in plain and BOLD not in plain
    assert plain.startswith("a.md:8-11")
    bold = render_hits({"hits": [h], "took_ms": 1.0, "mode": "hybrid", "roots": 2}, highlight=True)
    assert f"{BOLD}the \\x1b[2J match" in bold  # the content's own escape stays escaped
    assert bold.startswith("/r/a.md:8-11")  # several roots: the absolute path, which `get` takes
    old = render_hits({"hits": [{**h, "match_lines": []}], "took_ms": 1.0, "mode": "hybrid"})
    assert "    first" in old  # no matched lines named: the first lines, as before
