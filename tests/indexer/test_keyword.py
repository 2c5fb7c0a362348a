"""The keyword analyzer, proved against a real in-memory SQLite FTS5 table."""

from __future__ import annotations

import random
import sqlite3
import unicodedata
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from memoryd.indexer.search import keyword as kw
from memoryd.indexer.search.keyword import MAX_QUERY_TERMS, document_terms, match_any, query_terms


def fts_match_expression(query: str) -> str | None:
    """What the keyword leg searches for ``query``: the OR of its quoted terms (None: no term)."""
    terms = query_terms(query)
    return match_any(terms) if terms else None


class Fts:
    """A ``chunks_fts`` table as the store makes it, with rowids as document ids."""

    def __init__(self) -> None:
        self.conn = sqlite3.connect(":memory:")
        self.conn.execute(f"CREATE VIRTUAL TABLE chunks_fts USING fts5(terms, tokenize={kw.FTS5_TOKENIZE!r})")

    def add(self, *texts: str) -> None:
        self.conn.executemany(
            "INSERT INTO chunks_fts(rowid, terms) VALUES (?, ?)",
            [(i, document_terms(t)) for i, t in enumerate(texts, start=1)],
        )

    def run(self, expr: str) -> list[int]:
        rows = self.conn.execute(
            "SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY bm25(chunks_fts)", (expr,)
        )
        return [r[0] for r in rows]

    def search(self, query: str) -> list[int]:
        expr = fts_match_expression(query)
        return [] if expr is None else self.run(expr)


@pytest.fixture
def fts() -> Iterator[Fts]:
    table = Fts()
    yield table
    table.conn.close()


NASTY = [
    "",
    " \t\n",
    '"',
    '"unbalanced',
    '""',
    "a AND",
    "AND OR NOT",
    "foo AND bar OR NOT baz",
    "NEAR(a b",
    "NEAR(a b, 3)",
    "col:val",
    "terms:foo",
    "{terms}: x",
    "*",
    "foo*",
    "^start",
    "(((",
    ")))",
    "-foo +bar",
    "a:b:c",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "😀🎉",
    "🦄 unicorn",
    "!@#$%^&*()_+=[]{}|;':,./<>?`~",
    "'''",
    "...---___",
    "“smart quotes” ‘single’",
    "\u200b\ufeff",
    "ＡＮＤ（）＂",
    "x" * 10_000,
    " ".join(f"w{i} AND (" for i in range(2_000)),
    "猫" * 200_000,
]


@pytest.mark.parametrize("query", NASTY, ids=range(len(NASTY)))
def test_nasty_input_is_none_or_accepted_by_fts5(fts: Fts, query: str) -> None:
    fts.add(query, "plain text")
    expr = fts_match_expression(query)
    assert expr is None or isinstance(fts.run(expr), list)
    assert len(query_terms(query)) <= MAX_QUERY_TERMS


def test_random_syntax_soup_never_breaks_fts5(fts: Fts) -> None:
    fts.add("alpha beta", "gamma")
    rng = random.Random(7)
    alphabet = [*'"()*^:-+ \'\x00', "AND", "OR", "NOT", "NEAR", "a", "猫"]
    for _ in range(500):
        query = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 30)))
        expr = fts_match_expression(query)
        if expr is not None:
            fts.run(expr)  # raises sqlite3.OperationalError on a syntax error


def test_query_terms_are_capped_and_deduplicated() -> None:
    assert query_terms("apple apples Apple") == ["appl"]
    many = " ".join(f"word{i}" for i in range(1000))
    assert query_terms(many) == [f"word{i}" for i in range(1000 - MAX_QUERY_TERMS, 1000)]
    # A term seen early but repeated at the end is among the latest, kept at its first place.
    assert query_terms(f"early {many} early")[0] == "earli"
    assert len(query_terms(f"early {many} early")) == MAX_QUERY_TERMS
    assert query_terms("needle " + "x " * kw.MAX_QUERY_CHARS) == ["x"]  # only the end is read


def test_stop_word_only_queries_have_no_expression() -> None:
    for query in ["the", "The of AND the", "what is it", "I'm", "...", ""]:
        assert fts_match_expression(query) is None, query


def test_english_stemming_matches_other_forms(fts: Fts) -> None:
    fts.add("She runs every morning.", "A long run on Sunday.", "Swimming in the lake.")
    assert sorted(fts.search("running")) == [1, 2]
    assert fts.search("swims") == [3]


def test_possessive_matches_the_name(fts: Fts) -> None:
    fts.add("Caroline went to the support group.", "Caroline's dog barked.", "Melanie paints.")
    assert sorted(fts.search("Caroline's")) == [1, 2]
    assert sorted(fts.search("caroline")) == [1, 2]


def test_negations_are_kept_and_contractions_expand(fts: Fts) -> None:
    assert query_terms("doesn't") == ["not"]
    assert query_terms("can't swim") == ["not", "swim"]
    assert document_terms("We won't go, it isn't far") == "not go not far"
    fts.add("He does not eat meat.", "He eats meat.")
    assert fts.search("doesn't eat meat")[0] == 1


def test_unique_alnum_markers_match_exactly(fts: Fts) -> None:
    fts.add(
        "- **Chaos**: marker zebracorn123456789",
        "- marker zebracorn123456788",
        "edit chaos3x001234 here",
        "edit chaos3x001235 and chaos3x00123",
    )
    assert query_terms("zebracorn123456789") == ["zebracorn123456789"]
    assert fts.search("zebracorn123456789") == [1]
    assert fts.search("chaos3x001234") == [3]


def test_dotted_and_hyphenated_terms_match_as_phrases(fts: Fts) -> None:
    fts.add("release v1.2 notes", "release v1.3 notes", "the gpt-4 model")
    assert fts.search("v1.2") == [1]
    assert sorted(fts.search("v1")) == [1, 2]
    assert fts.search("GPT-4") == [3]


def test_markdown_decoration_is_dropped() -> None:
    terms = document_terms(
        "# Heading\n1. **bold** [link text](https://example.com/secret_path \"title\") `code`\n"
        "- [x] done <br/> &nbsp; _italic_\n> 2) quoted"
    ).split()
    assert terms == ["head", "bold", "link", "text", "code", "done", "ital", "quot"]


def test_bare_urls_keep_their_words() -> None:
    assert document_terms("see https://github.com/org/repo") == "see github.com org repo"


@pytest.mark.parametrize(
    ("query", "hit"),
    [("猫", 1), ("咖啡", 2), ("机器学习", 3), ("学习机器", 3)],
)
def test_chinese_terms_of_any_length_match(fts: Fts, query: str, hit: int) -> None:
    fts.add("我家的猫很可爱", "我喜欢喝咖啡。", "机器学习很有趣！", "今天天气很好")
    assert fts.search(query) == [hit]


def test_cjk_document_and_query_terms() -> None:
    assert document_terms("机器学习，猫") == "机 器 学 习 机器 器学 学习 猫"
    assert query_terms("机器学习") == ["机器", "器学", "学习"]
    assert query_terms("咖啡") == ["咖啡"]
    assert query_terms("ﾈｺ・カフェ") == ["ネコ", "カフ", "フェ"]  # halfwidth folded; the middle dot splits


def test_mixed_chinese_english_query(fts: Fts) -> None:
    fts.add("我用Python写了一个脚本", "Java 很好", "脚本语言")
    assert query_terms("用 Python 写脚本") == ["用", "python", "写脚", "脚本"]
    ranked = fts.search("用 Python 写脚本")
    assert ranked[0] == 1
    assert 2 not in ranked


def test_bm25_ranks_documents_with_more_query_terms_first(fts: Fts) -> None:
    fts.add(
        "Notes about python scripts and gardening tips.",
        "Python scripts for data parsing with regular expressions.",
        "Unrelated text about the weather.",
    )
    assert fts.search("python data parsing") == [2, 1]


def test_fullwidth_and_accents_fold(fts: Fts) -> None:
    fts.add("I love Python and the café downtown.")
    assert fts.search("Ｐｙｔｈｏｎ") == [1]
    assert fts.search("CAFE") == [1]


def test_combining_mark_scripts_stay_whole() -> None:
    assert document_terms("हिन्दी भाषा") == "हिन्दी भाषा"
    covered = {c for lo, hi in kw._MARK_BLOCKS for c in range(lo, hi + 1)}
    missing = [
        hex(c)
        for c in range(0x10000)
        if unicodedata.category(chr(c))[0] == "M" and c not in covered and not 0x3000 <= c <= 0x30FF
    ]
    assert missing == []


def test_query_terms_are_a_subset_of_the_same_texts_document_terms() -> None:
    samples = ["Caroline's v1.2 running 机器学习 ﾈｺ Ｐｙｔｈｏｎ don't", "हिन्दी", "rock'n'roll"]
    for text in [*NASTY[:-3], *samples]:
        assert set(query_terms(text)) <= set(document_terms(text).split()), text


def test_analysis_is_thread_safe() -> None:
    words = "Generously organising nationalities relational conditional"
    texts = [f"{words} {i} running{i % 7} {words.split()[i % 5]}s" for i in range(300)]

    def clear() -> None:
        kw._analyse_word.cache_clear()
        kw._normalise_part.cache_clear()
        kw._document_piece_terms.cache_clear()

    clear()
    expected = [document_terms(t) for t in texts]
    clear()
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(document_terms, texts))
    assert got == expected


@pytest.mark.timeout(30)  # catastrophic backtracking would take minutes; linear input takes well under 1 s
def test_pathological_markup_stays_linear() -> None:
    for text in ["](" * 20_000, "](" + "a" * 40_000, "<a " * 20_000, "&" * 40_000, "\n1. " * 10_000]:
        assert isinstance(document_terms(text), str)
        fts_match_expression(text)
