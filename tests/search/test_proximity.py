"""Term proximity (BM25TP-style) scores: close pairs count, far or common ones do not."""

from __future__ import annotations

import math
import random

import pytest

from memoryd.indexer.search import proximity
from memoryd.indexer.search.proximity import MAX_PAIR_TERMS, idf, pair_terms, proximity_scores, word_terms

IDF = {"support": 2.0, "group": 1.5, "lgbtq": 3.0, "carolin": 1e-6, "支持": 2.0, "小组": 2.0}


def test_adjacent_pair_beats_the_same_words_far_apart() -> None:
    docs = {
        1: "carolin went lgbtq support group yesterday",
        2: "support carolin talk paint sunset lake hike camp trip group",
        3: "group",
    }
    out = proximity_scores(["lgbtq", "support", "group"], IDF, docs)
    assert out[1] > 0 and out[2] == 0.0 and out[3] == 0.0
    # lgbtq-support (1 apart), support-group (1 apart), lgbtq-group (2 apart): weighted by the smaller IDF
    expected = 2.0 * 1 / 2.2 + 1.5 * 1 / 2.2 + 1.5 * 0.5 / 1.7
    assert out[1] == pytest.approx(expected)


def test_distance_limit_and_saturation() -> None:
    near = proximity_scores(["support", "group"], IDF, {1: "support group"})[1]
    far = proximity_scores(["support", "group"], IDF, {1: "support a b c d e f g group"})[1]
    beyond = proximity_scores(["support", "group"], IDF, {1: "support a b c d e f g h group"}, max_distance=8)[1]
    assert near > far > 0 and beyond == 0.0
    many = proximity_scores(["support", "group"], IDF, {1: " ".join(["support group"] * 50)})[1]
    assert near < many < 1.5  # saturates below the pair's IDF (1.5), however often it repeats


def test_terms_in_every_chunk_and_cjk_terms_do_not_pair() -> None:
    # "carolin" has the floor IDF: a pair is only as informative as its commoner word.
    assert proximity_scores(["carolin", "support"], IDF, {1: "carolin support"}) == {1: 0.0}
    # CJK adjacency is already inside the bigram terms of the keyword index.
    assert word_terms(["支持", "support", "小组", "support"]) == ["support"]
    assert proximity_scores(["支持", "小组"], IDF, {1: "支持 小组"}) == {1: 0.0}


def test_pair_terms_keep_the_rarest_and_are_bounded() -> None:
    terms = [f"t{i}" for i in range(40)]
    idfs = {t: 1.0 + i / 10 for i, t in enumerate(terms)}
    chosen = pair_terms(terms, idfs)
    assert len(chosen) == MAX_PAIR_TERMS and chosen[0] == "t39" and "t0" not in chosen


def test_idf_matches_fts5() -> None:
    assert idf(0, 100) == 0.0
    assert idf(1, 100) == pytest.approx(math.log(99.5 / 1.5))
    assert idf(90, 100) == 1e-6  # in most chunks: floored like FTS5's bm25()


def _split_positions(text: str, wanted: set[str]) -> dict[str, list[int]]:
    """The obvious definition: term indexes after splitting on spaces (what the regex scan must equal)."""
    found: dict[str, list[int]] = {}
    for pos, term in enumerate(text.split(" ")):
        if term in wanted and len(found.setdefault(term, [])) < proximity.MAX_POSITIONS:
            found[term].append(pos)
    return found


def test_positions_match_a_plain_split() -> None:
    rng = random.Random(7)
    vocab = ["support", "group", "supports", "sup", "port", "a.b", "c++", "x", "group1", "支持"]
    for _ in range(500):
        text = " ".join(rng.choice(vocab) for _ in range(rng.randint(0, 200)))
        wanted = set(rng.sample(vocab, rng.randint(2, 4)))
        want = _split_positions(text, wanted)
        got = proximity._positions(text, wanted)
        if sum(1 for t in wanted if t in text) >= 2:
            assert got == want, (text, wanted)
        else:
            assert got == {}
