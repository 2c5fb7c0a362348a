"""Setext headings (``Title`` underlined by ``===`` or ``---``) are headings for the chunker,
and nothing that merely looks like one changes an ATX document's outline."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from memoryd.indexer.ingestion.chunker import chunk_markdown
from memoryd.indexer.markdown.outline import BLOCK, HEADING, NONE, parse_outline

SETEXT = """Project
=======

Intro paragraph one. It has two sentences.

Decisions
---------

- We use SQLite.
- We keep FAISS derived.

### Details
Some text continues here.

Open questions
--------------

1. Which model?
"""


def words(texts: Sequence[str]) -> list[int]:
    return [len(t.split()) for t in texts]


def test_setext_titles_are_headings_at_their_title_line() -> None:
    o = parse_outline(SETEXT)
    assert o.heading_lines == [0, 5, 11, 14]
    assert o.heading_paths == ["Project", "Project > Decisions", "Project > Decisions > Details",
                               "Project > Open questions"]
    assert o.strengths[0] == o.strengths[5] == HEADING
    assert o.strengths[1] == o.strengths[6] == NONE  # a window never starts on the underline


def test_chunks_of_a_setext_document_start_at_its_headings() -> None:
    doc = chunk_markdown(SETEXT, words, max_tokens=12, overlap_tokens=0)
    lines = SETEXT.split("\n")
    by_start = {c.start_line: c.heading for c in doc.chunks}
    assert by_start[1] == "Project" and by_start[6] == "Project > Decisions"
    assert by_start[15] == "Project > Open questions"
    for c in doc.chunks:
        assert lines[c.start_line - 1] not in ("=======", "---------", "--------------")


@pytest.mark.parametrize("text", [
    "- a list item\n---\n",  # a rule after a list item
    "> a quote\n---\n",
    "    indented code\n---\n",
    "First line of a paragraph\nsecond line\n---\n",  # a rule under a longer paragraph, as notes mean it
    "Text\n\n---\n",  # a rule after a blank line
    "```\nText\n---\n```\n",  # inside a fence
    "Text\n--- not a rule\n",
])
def test_lookalikes_are_not_headings(text: str) -> None:
    assert parse_outline(text).heading_lines == []


def test_an_atx_document_keeps_its_outline() -> None:
    """The Setext rule reads only underline lines: an ATX document's strengths and headings are as before."""
    atx = "# Project\n\nIntro.\n\n## Decisions\n\n- We use SQLite.\n- We keep FAISS derived.\n\n## Open\nText.\n"
    o = parse_outline(atx)
    assert o.heading_lines == [0, 4, 9]
    assert o.heading_paths == ["Project", "Project > Decisions", "Project > Open"]
    assert o.strengths == [HEADING, NONE, BLOCK, NONE, HEADING, NONE, BLOCK, BLOCK, NONE, HEADING, BLOCK, NONE]
