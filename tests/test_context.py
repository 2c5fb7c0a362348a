from __future__ import annotations

import random
from pathlib import Path

from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.search.context import build_context, merge_hits


def hit(path: str, start: int, end: int, score: float, root: str = "/r") -> dict:
    text = "\n".join(f"line {n} of {path} about topic {n % 7}" for n in range(start, end + 1))
    return {"root": root, "path": path, "start_line": start, "end_line": end, "score": score, "text": text}


COUNT = HashEmbedder().count_tokens


def test_overlapping_and_adjacent_hits_of_one_file_merge() -> None:
    spans = merge_hits([hit("a.md", 1, 9, 0.9), hit("a.md", 8, 16, 0.5), hit("a.md", 17, 20, 0.4),
                        hit("b.md", 1, 3, 0.7), hit("a.md", 30, 31, 0.95), hit("a.md", 1, 3, 0.1, root="/other")])
    cites = [(s.root, s.cite()) for s in spans]
    assert cites == [("/r", "a.md:30-31"), ("/r", "a.md:1-20"), ("/r", "b.md:1-3"), ("/other", "a.md:1-3")]
    merged = spans[1].text().split("\n")
    assert len(merged) == 20 and merged[0].startswith("line 1 ") and merged[-1].startswith("line 20 ")


def test_block_is_ordered_cited_and_has_a_header() -> None:
    out = build_context("what about topic 3", [hit("a.md", 1, 4, 0.9), hit("b.md", 5, 6, 0.8)], 500, COUNT)
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
        out = build_context("q " * rng.randint(1, 30), hits, budget, COUNT)
        assert COUNT([out["text"]])[0] <= budget if out["text"] else out["tokens"] == 0
        assert out["tokens"] <= budget
        assert len(out["sources"]) + out["omitted"] <= len(merge_hits(hits))


def test_a_span_too_big_for_its_share_goes_in_as_an_excerpt_of_its_matched_lines() -> None:
    big = {**hit("a.md", 1, 60, 0.99), "match_lines": [40, 12]}
    small = hit("b.md", 1, 1, 0.5)
    out = build_context("x", [big, small], 120, COUNT)
    assert [s["path"] for s in out["sources"]] == ["a.md", "b.md"] and out["omitted"] == 0
    excerpt = out["sources"][0]
    assert {12, 40} <= set(excerpt["lines"]) and len(excerpt["lines"]) < 60
    assert "### a.md:1-60 (excerpt)" in out["text"] and "line 40 of a.md" in out["text"]
    assert "line 20 of a.md" not in out["text"] and "\n…\n" in out["text"]  # what is left out is marked
    assert "lines" not in out["sources"][1]  # a span that fits goes in whole
    assert out["tokens"] == COUNT([out["text"]])[0] <= 120


def test_a_span_whose_best_line_does_not_fit_is_omitted() -> None:
    long_line = {"root": "/r", "path": "a.md", "start_line": 1, "end_line": 1, "score": 0.9,
                 "text": "word " * 200, "match_lines": [1]}
    out = build_context("x", [long_line, hit("b.md", 1, 1, 0.5)], 60, COUNT)
    assert [s["path"] for s in out["sources"]] == ["b.md"] and out["omitted"] == 1


def test_no_hits_gives_an_empty_block(tmp_path: Path) -> None:
    assert build_context("x", [], 100, COUNT) == {"text": "", "tokens": 0, "sources": [], "omitted": 0}
