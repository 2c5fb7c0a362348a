from __future__ import annotations

import dataclasses
import os
import random
from pathlib import Path
from typing import Any

import pytest

from memoryd.daemon.api.read import ReadMethods
from memoryd.daemon.roots import RootMap
from memoryd.daemon.rpc.jsonrpc import Peer
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.daemon.work.line_vectors import LineVectors
from memoryd.indexer.config import Config
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.search.context import MAX_SCORED_TOKENS, build_context, cosine_scorer, merge_hits
from memoryd.indexer.search.hits import Hit, SearchResult
from memoryd.indexer.search.query import Query

OWNER = Peer(pid=1, uid=os.getuid(), gid=os.getgid())


def hit(path: str, start: int, end: int, score: float, root: str = "/r", match: tuple[int, ...] = ()) -> Hit:
    text = "\n".join(f"line {n} of {path} about topic {n % 7}" for n in range(start, end + 1))
    return Hit(chunk_id=start, root=root, path=path, start_line=start, end_line=end, heading="", text=text,
               score=score, vector_score=0.0, text_score=0.0, match_lines=match)


COUNT = HashEmbedder().count_tokens


def block(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """:func:`build_context`'s block as the ``context`` method sends it."""
    return build_context(*args, **kwargs).to_json()


def test_overlapping_and_adjacent_hits_of_one_file_merge() -> None:
    spans = merge_hits([hit("a.md", 1, 9, 0.9), hit("a.md", 8, 16, 0.5), hit("a.md", 17, 20, 0.4),
                        hit("b.md", 1, 3, 0.7), hit("a.md", 30, 31, 0.95), hit("a.md", 1, 3, 0.1, root="/other")])
    cites = [(s.root, s.cite()) for s in spans]
    assert cites == [("/r", "a.md:30-31"), ("/r", "a.md:1-20"), ("/r", "b.md:1-3"), ("/other", "a.md:1-3")]
    merged = spans[1].text().split("\n")
    assert len(merged) == 20 and merged[0].startswith("line 1 ") and merged[-1].startswith("line 20 ")


def test_one_path_on_two_sites_is_two_spans_each_naming_its_site() -> None:
    here, there = (dataclasses.replace(hit("MEMORY.md", 1, 4, score), site=site)
                   for score, site in ((0.9, "laptop"), (0.8, "desktop")))
    assert [(s.site, s.cite()) for s in merge_hits([here, there])] == [("laptop", "MEMORY.md:1-4"),
                                                                         ("desktop", "MEMORY.md:1-4")]
    sources = block("x", [here, there], 500, COUNT)["sources"]
    assert [s.get("site") for s in sources] == ["laptop", "desktop"]
    assert "site" not in block("x", [hit("MEMORY.md", 1, 4, 0.9)], 500, COUNT)["sources"][0]  # one site: as before


def test_block_is_ordered_cited_and_has_a_header() -> None:
    out = block("what about topic 3", [hit("a.md", 1, 4, 0.9), hit("b.md", 5, 6, 0.8)], 500, COUNT)
    text = out["text"]
    assert text.startswith("## Relevant memories") and "what about topic 3" in text
    assert text.index("### a.md:1-4") < text.index("### b.md:5-6")
    assert [s["path"] for s in out["sources"]] == ["a.md", "b.md"]
    assert out["tokens"] == COUNT([text])[0] <= 500


def test_budget_is_never_exceeded_for_random_budgets_and_hits() -> None:
    rng = random.Random(7)
    for _ in range(300):
        hits = []
        for _ in range(rng.randint(0, 12)):
            start = rng.randint(1, 80)
            hits.append(hit(rng.choice(["a.md", "b.md", "memory/2024-01-01.md"]), start,
                            start + rng.randint(0, 12), rng.random()))
        budget = rng.randint(1, 400)
        out = block("q " * rng.randint(1, 30), hits, budget, COUNT)
        assert COUNT([out["text"]])[0] <= budget if out["text"] else out["tokens"] == 0
        assert out["tokens"] <= budget
        assert len(out["sources"]) + out["omitted"] <= len(merge_hits(hits))


def test_a_span_too_big_for_its_share_goes_in_as_an_excerpt_of_its_matched_lines() -> None:
    big = hit("a.md", 1, 60, 0.99, match=(40, 12))
    small = hit("b.md", 1, 1, 0.5)
    out = block("x", [big, small], 120, COUNT)
    assert [s["path"] for s in out["sources"]] == ["a.md", "b.md"] and out["omitted"] == 0
    excerpt = out["sources"][0]
    assert {12, 40} <= set(excerpt["lines"]) and len(excerpt["lines"]) < 60
    assert "### a.md:1-60 (excerpt)" in out["text"] and "line 40 of a.md" in out["text"]
    assert "line 20 of a.md" not in out["text"] and "\n…\n" in out["text"]  # what is left out is marked
    assert "lines" not in out["sources"][1]  # a span that fits goes in whole
    assert out["tokens"] == COUNT([out["text"]])[0] <= 120


def test_a_span_whose_best_line_does_not_fit_is_omitted() -> None:
    long_line = dataclasses.replace(hit("a.md", 1, 1, 0.9, match=(1,)), text="word " * 200)
    out = block("x", [long_line, hit("b.md", 1, 1, 0.5)], 60, COUNT)
    assert [s["path"] for s in out["sources"]] == ["b.md"] and out["omitted"] == 1


def test_no_hits_gives_an_empty_block(tmp_path: Path) -> None:
    assert block("x", [], 100, COUNT) == {"text": "", "tokens": 0, "sources": [], "omitted": 0}


def test_the_block_is_typed_until_the_wire_and_its_sources_keep_their_shape() -> None:
    out = build_context("x", [hit("a.md", 1, 60, 0.987654321, match=(40,)), hit("b.md", 1, 1, 0.5)], 120, COUNT)
    excerpt, whole = out.sources
    assert isinstance(excerpt.lines, tuple) and 40 in excerpt.lines and whole.lines is None
    wire = out.to_json()
    assert list(wire) == ["text", "tokens", "sources", "omitted"]
    assert list(wire["sources"][0]) == ["root", "path", "start_line", "end_line", "score", "lines"]
    assert wire["sources"][0]["score"] == 0.987654 and wire["sources"][0]["lines"] == list(excerpt.lines)
    assert wire["sources"][1] == {"root": "/r", "path": "b.md", "start_line": 1, "end_line": 1, "score": 0.5}
    said = out.abstaining("nothing above 0.5").to_json()
    assert (said["abstained"], said["reason"]) == (True, "nothing above 0.5") and list(said)[-2:] == ["abstained",
                                                                                                    "reason"]


class RecordingScorer:
    """Scores a line 1.0 when it holds ``liked``, else 0.0, and records every batch it is asked."""

    def __init__(self, liked: str) -> None:
        self.liked = liked
        self.batches: list[list[str]] = []

    def __call__(self, lines: list[str]) -> list[float]:
        self.batches.append(lines)
        return [1.0 if self.liked in line else 0.0 for line in lines]


def test_a_scored_excerpt_takes_the_lines_closest_to_the_query_not_the_matched_ones() -> None:
    big = hit("a.md", 1, 40, 0.99, match=(30, 12))
    scorer = RecordingScorer("line 25 of")
    plain = block("x", [big], 60, COUNT)
    scored = block("x", [big], 60, COUNT, scorer)
    assert 25 not in plain["sources"][0]["lines"] and 30 in plain["sources"][0]["lines"]
    assert 25 in scored["sources"][0]["lines"] and "line 25 of a.md" in scored["text"]
    assert scored["tokens"] == COUNT([scored["text"]])[0] <= 60
    assert len(scorer.batches) == 1 and len(scorer.batches[0]) == 40  # one call for the span's lines
    assert sum(COUNT(scorer.batches[0])) <= MAX_SCORED_TOKENS


def test_lines_beyond_the_scored_tokens_keep_the_matched_lines_order() -> None:
    big = hit("a.md", 1, 40, 0.99, match=(30,))
    far = RecordingScorer("line 5 of")  # the line the model likes is far from line 30
    cap = sum(COUNT([f"line {n} of a.md about topic {n % 7}" for n in (30, 29, 31)]))  # the three nearest
    out = block("x", [big], 60, COUNT, far, scored_tokens=cap)
    assert out == block("x", [big], 60, COUNT)  # line 5 lies beyond the cap: never scored, never shown
    assert len(far.batches) == 1 and sum(COUNT(far.batches[0])) <= cap and "line 5 of a.md" not in far.batches[0]
    assert block("x", [big], 60, COUNT, far, scored_tokens=0) == out and len(far.batches) == 1


def test_ties_in_the_scores_keep_the_matched_lines_first() -> None:
    big = hit("a.md", 1, 40, 0.99, match=(30, 12))
    same = block("x", [big], 60, COUNT, lambda lines: [0.5] * len(lines))
    assert same == block("x", [big], 60, COUNT)


def test_spans_that_fit_whole_are_not_scored_and_scored_lines_are_bounded() -> None:
    scorer = RecordingScorer("nothing")
    block("x", [hit("a.md", 1, 3, 0.9), hit("b.md", 1, 2, 0.8)], 500, COUNT, scorer)
    assert scorer.batches == []  # nothing to trim: the model is not asked
    spans = [hit(f"{n}.md", 1, 30, 1 - n / 100, match=(1,)) for n in range(10)]
    block("x", spans, 400, COUNT, scorer)
    assert scorer.batches and sum(COUNT([x for b in scorer.batches for x in b])) <= MAX_SCORED_TOKENS
    with pytest.raises(ValueError, match="scored_tokens must be >= 0, got -1"):
        block("x", spans, 400, COUNT, scorer, scored_tokens=-1)


def test_scored_blocks_stay_within_budget_for_random_budgets_hits_and_scores() -> None:
    rng = random.Random(11)
    for _ in range(200):
        hits = [hit(rng.choice(["a.md", "b.md"]), start, start + rng.randint(0, 20), rng.random())
                for start in (rng.randint(1, 80) for _ in range(rng.randint(0, 8)))]
        budget = rng.randint(1, 300)
        out = block("q", hits, budget, COUNT, lambda lines: [rng.random() for _ in lines])
        assert out["tokens"] <= budget and (not out["text"] or COUNT([out["text"]])[0] <= budget)
        assert len(out["sources"]) + out["omitted"] == len(merge_hits(hits))


def test_a_scorer_answering_the_wrong_number_of_scores_is_refused() -> None:
    big = hit("a.md", 1, 40, 0.99, match=(30,))
    with pytest.raises(ValueError, match="1 scores for 40 lines"):
        block("x", [big], 60, COUNT, lambda lines: [0.0], scored_tokens=10_000)


def test_the_cosine_scorer_ranks_the_line_that_says_what_the_query_says_first() -> None:
    emb = HashEmbedder(dimension=256)
    score = cosine_scorer(emb.embed_passages, emb.embed_query("sunrise painting by the lake"))
    got = score(["kids and work", "sunrise painting by the lake", "a painting"])
    assert got[1] == pytest.approx(1.0, abs=1e-5) and got[1] > got[2] > got[0]


class OneHitIndex:
    """Answers every search with one 40-line hit whose matched line is 30."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.vectors: list[object] = []

    site: str | None = None

    def query(self, query: Query) -> SearchResult:
        self.vectors.append(query.query_vector)
        text = "\n".join(f"note {n} about the weekly shopping list" if n != 25 else "sunrise painting by the lake"
                         for n in range(1, 41))
        return SearchResult(mode="hybrid", took_ms=0.1, hits=[Hit(
            chunk_id=1, root=str(self.root), path="a.md", start_line=1, end_line=40, heading="", text=text,
            score=0.9, vector_score=0.5, text_score=0.5, match_lines=(30,))])


def _reads(root: Path, index: OneHitIndex, embedder: HashEmbedder | None, vector: object,
           line_model: bool = True) -> ReadMethods:
    roots = RootMap([root])
    return ReadMethods(index=index, roots=lambda: roots, worker=None,  # type: ignore[arg-type]
                       search=dataclasses.replace(Config().search, context_line_model=line_model),
                       path_filter=PathFilter(("*.md",), ()), max_file_bytes=1 << 20,
                       count_tokens=COUNT, query_vector=lambda q: vector, embedder=embedder)


def test_the_context_method_ranks_excerpt_lines_with_the_searched_query_vector(tmp_path: Path) -> None:
    emb = HashEmbedder(dimension=256)
    asked: list[str] = []

    def vector() -> object:
        asked.append("vector")
        return emb.embed_query("sunrise painting by the lake")

    params = {"query": "when did she paint at dawn", "max_tokens": 80}
    index = OneHitIndex(tmp_path)
    scored = _reads(tmp_path, index, emb, vector).context(params, OWNER)
    assert index.vectors == [vector] and asked  # the vector the search used also scores the lines
    assert 25 in scored["sources"][0]["lines"] and "sunrise painting" in scored["text"]
    plain = _reads(tmp_path, OneHitIndex(tmp_path), None, vector).context(params, OWNER)
    assert 25 not in plain["sources"][0]["lines"] and 30 in plain["sources"][0]["lines"]
    switched_off = _reads(tmp_path, OneHitIndex(tmp_path), emb, vector, line_model=False).context(params, OWNER)
    assert switched_off["sources"] == plain["sources"]  # search.context_line_model = false: matched lines only


def test_a_lone_span_that_must_be_trimmed_always_shows_its_best_lines() -> None:
    big = hit("a.md", 1, 40, 0.99, match=(30,))
    for budget in range(30, 160):  # an excerpt filling its share to the last token once left the block empty
        out = block("when did she paint at dawn", [big], budget, COUNT)
        assert out["sources"] and 30 in out["sources"][0]["lines"] and out["tokens"] <= budget


def test_line_vectors_embed_each_unseen_line_once_and_forget_the_oldest() -> None:
    emb = HashEmbedder(dimension=16)
    batches: list[list[str]] = []

    def embed(lines: list[str]) -> object:
        batches.append(list(lines))
        return emb.embed_passages(lines)

    vectors = LineVectors(embed, size=2)
    first = vectors(["a", "b", "a"])
    assert batches == [["a", "b"]] and first.shape == (3, 16) and (first[0] == first[2]).all()
    vectors(["b", "c"])  # b is known; c pushes a, the least recently used, out
    vectors(["a"])
    assert batches == [["a", "b"], ["c"], ["a"]]
    assert (vectors(["c", "a"]) == emb.embed_passages(["c", "a"])).all() and len(batches) == 3


class AbstainingIndex(OneHitIndex):
    def query(self, query: Query) -> SearchResult:
        return SearchResult(mode="hybrid", hits=[], took_ms=0.1, abstained=True, reason="no hit reached 0.5")


def test_the_context_method_says_when_the_search_abstained(tmp_path: Path) -> None:
    out = _reads(tmp_path, AbstainingIndex(tmp_path), None, None).context({"query": "q", "max_tokens": 80}, OWNER)
    assert list(out) == ["text", "tokens", "sources", "omitted", "abstained", "reason", "max_tokens", "took_ms"]
    assert (out["text"], out["sources"], out["abstained"], out["reason"]) == ("", [], True, "no hit reached 0.5")
