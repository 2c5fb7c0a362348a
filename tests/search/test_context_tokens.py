"""Small context budgets waste no tokens (issue #40, item 4): no markers, no heading-only excerpts."""

from __future__ import annotations

from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.search.context import build_context
from memoryd.indexer.search.hits import Hit

COUNT = HashEmbedder().count_tokens


def hit(path: str, start: int, lines: list[str], score: float, match: tuple[int, ...] = ()) -> Hit:
    return Hit(chunk_id=start, root="/r", path=path, start_line=start, end_line=start + len(lines) - 1, heading="",
               text="\n".join(lines), score=score, vector_score=0.0, text_score=0.0, match_lines=match)


def test_entry_markers_and_comment_lines_are_not_in_the_block() -> None:
    lines = ["<!-- MACHINE_BLOCK_START -->", "## Decisions", "",
             "- Deploys go out on Tuesdays <!-- memoryd: importance=4 reinforced=2 -->",
             "<!-- memoryd:generated sha256=0123456789ab -->", "- The staging cluster is eu-west",
             "<!-- memoryd:generated-end -->"]
    out = build_context("deploys", [hit("MEMORY.md", 1, lines, 0.9)], 400, COUNT).to_json()
    assert "Deploys go out on Tuesdays" in out["text"] and "staging cluster" in out["text"]
    assert "<!--" not in out["text"] and "memoryd:" not in out["text"]
    assert out["sources"][0]["start_line"] == 1 and out["sources"][0]["end_line"] == 7  # line numbers kept


def test_a_matched_heading_does_not_make_a_heading_only_excerpt() -> None:
    body = [f"- fact number {n} about the release train and its many carriages" for n in range(30)]
    lines = ["## Release train", *body]
    big = hit("a.md", 1, lines, 0.99, match=(1,))  # the heading matched the query, the facts did not
    shown_any = False
    for budget in range(16, 64, 2):  # at the smallest budgets one line fits: it must be a fact
        out = build_context("release train", [big], budget, COUNT).to_json()
        for source in out["sources"]:
            assert source["lines"] != [1], (budget, out["text"])
            shown_any = True
    assert shown_any and "fact number 0" in out["text"]


def test_a_span_of_headings_only_is_left_out_for_the_next_one() -> None:
    headings = hit("a.md", 1, ["# Notes", "", "## Release train", ""], 0.99, match=(3,))
    fact = hit("b.md", 1, ["- The release train leaves every second Thursday"], 0.5)
    out = build_context("release train", [headings, fact], 400, COUNT).to_json()
    assert [s["path"] for s in out["sources"]] == ["b.md"] and out["omitted"] == 1
