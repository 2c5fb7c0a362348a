"""Paraphrases reinforce (issue #28 item 2): a slot exchanged for a synonym is a rewording, not a
changed value; antonyms, comparatives and changed values still are. Without a model."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from memoryd.indexer.config import WriteConfig
from memoryd.indexer.write.dedup import APPEND, REINFORCE, REPLACE, Candidate, Thresholds, decide, judge
from memoryd.indexer.write.lexical import features, residue, swapped
from memoryd.indexer.write.paraphrase import synonymous

DATA = Path(__file__).parent / "data" / "dedup_pairs.jsonl"
TH = Thresholds.from_config(WriteConfig())
CHAIN = ("The user prefers dark mode in every editor.", "The user likes dark mode in every editor.",
         "The user enjoys dark mode in every editor.")


@pytest.mark.parametrize(("old", "new"), [
    (CHAIN[0], CHAIN[1]), (CHAIN[1], CHAIN[2]), (CHAIN[0], CHAIN[2]),
    ("The nightly job needs 16 GB of memory.", "The nightly job requires 16 GB of memory."),
    ("The CI pipeline is fast on small pull requests.", "The CI pipeline is quick on small pull requests."),
    ("The user picked Fira Code as the terminal font.", "The user chose Fira Code as the terminal font."),
    ("The user is very fond of green tea.", "The user likes green tea."),
    ("用户喜欢深色模式。", "用户偏爱深色模式。"),
    ("用户喜爱喝乌龙茶。", "用户喜欢喝乌龙茶。"),  # the alignment splits 喜爱/喜欢: the word is completed
    ("用户很喜欢喝绿茶。", "用户爱喝绿茶。"),  # a degree adverb grades, it does not change the fact
    ("清晰的提交信息对发布说明很重要。", "清晰的提交信息对发布说明很关键。"),  # 要: a stop character, in 重要
])
def test_a_synonym_is_not_a_swap_and_the_paraphrase_reinforces(old: str, new: str) -> None:
    assert not swapped(old, new) and residue(old, new) == 0
    assert not features(old, new).changed
    assert judge(new, Candidate("f.md", 1, old, 0.98), TH).action == REINFORCE


@pytest.mark.parametrize(("old", "new"), [
    ("The user likes tea in the afternoon.", "The user dislikes tea in the afternoon."),  # an antonym
    ("The test suite is fast on the new runners.", "The test suite is slow on the new runners."),
    ("The build is fast.", "The build is faster."),  # another grade
    ("The user likes tea in the afternoon.", "The user prefers coffee in the afternoon."),  # synonym + a new value
    ("The user prefers tea in the morning.", "The user prefers coffee in the morning."),
    ("用户喜欢在深夜工作。", "用户讨厌在深夜工作。"),
    ("新机器上测试跑得很快。", "新机器上测试跑得很慢。"),
    ("用户喜欢下午喝绿茶。", "用户偏爱下午喝咖啡。"),  # the synonym belongs to the frame; 绿茶 → 咖啡 is the change
])
def test_antonyms_grades_and_new_values_are_still_changes(old: str, new: str) -> None:
    assert swapped(old, new) and features(old, new).changed
    assert judge(new, Candidate("f.md", 1, old, 0.98), TH).action in (REPLACE, APPEND)


def test_the_table_keeps_senses_apart() -> None:
    assert synonymous(["likes"], ["enjoyed"]) and synonymous(["bigger"], ["larger"])
    assert not synonymous(["likes"], ["dislikes"]) and not synonymous(["fast"], ["faster"])
    assert not synonymous(["tea"], ["coffee"]) and not synonymous(["likes", "tea"], ["enjoys", "tea"])
    assert synonymous(["喜", "欢"], ["爱"]) and not synonymous(["喜", "欢"], ["讨", "厌"])


def test_the_prefers_likes_enjoys_chain_reinforces_one_entry() -> None:
    entry = Candidate("user/preferences.md", 7, CHAIN[0], 0.985)
    for new in CHAIN[1:]:
        v = decide(new, [entry], TH)
        assert (v.action, v.candidate) == (REINFORCE, entry), v.reason


def test_the_labelled_set_has_40_synonym_paraphrases_in_both_languages_and_both_halves() -> None:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]
    syn = [r for r in rows if "-syn-" in r["id"]]
    paras = Counter((r["lang"], r["split"]) for r in syn if r["class"] == "paraphrase")
    assert sum(paras.values()) >= 40 and set(paras) == {(lang, s) for lang in ("en", "zh")
                                                        for s in ("tune", "heldout")}
    assert min(paras.values()) >= 10
    contrast = Counter(r["class"] for r in syn if r["class"] != "paraphrase")
    assert contrast["update"] >= 8 and contrast["same_topic"] >= 4  # what a too-wide table would harm
