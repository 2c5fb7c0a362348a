"""Words that say the same thing in a memory: "prefers" / "likes" / "enjoys", "快" / "迅速".

The dedup's lexical *swap* signal (:func:`memoryd.indexer.write.lexical.swapped`)
reads "the same frame with one content slot exchanged" as a changed value:
"prefers *tea*" → "prefers *coffee*" is an update. A slot exchanged for a
synonym is not: "The user *prefers* dark mode" → "The user *likes* dark mode"
restates the memory and must reinforce it, not replace it. This module says
when two exchanged slots mean the same: both map to one group of a small,
hand-written table per language (verbs of liking, using, needing …, common
adjectives and adverbs, a few nouns), after inflection, degree adverbs
("very", "很") and stop words are set aside.

Why a table and not the embedding model: multilingual-e5-small scores single
words by topic, not by sense — likes/enjoys 0.90 and fast/quick 0.93, but
tea/coffee 0.92, early/late 0.92 and 上午/下午 0.98 (measured; docs/security/dedup.md)
— so no cosine separates synonyms from exchanged values. A group holds only
words that are interchangeable in a statement about someone's habits,
preferences or a project; antonyms ("likes"/"dislikes", "fast"/"slow") sit in
different groups, so they still count as a change. Comparative and superlative
forms keep their grade ("faster" is not "quick").

Pure and deterministic.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

_EN_GROUPS = (
    "like prefer enjoy love favor favour fond keen adore",
    "dislike hate detest loathe",
    "use utilize utilise employ",
    "need require",
    "want desire",
    "start begin commence",
    "finish complete",
    "help assist aid",
    "buy purchase",
    "show display",
    "fix repair",
    "choose pick select",
    "talk speak",
    "reply respond answer",
    "try attempt",
    "allow permit",
    "forbid prohibit ban",
    "fast quick rapid speedy swift",
    "quickly rapidly swiftly speedily",
    "slow sluggish",
    "big large",
    "small little",
    "huge enormous massive",
    "hard difficult tough",
    "easy simple straightforward",
    "smart clever intelligent",
    "important crucial essential vital",
    "often frequently",
    "usually normally typically generally",
    "seldom rarely",
    "correct right accurate",
    "wrong incorrect",
    "happy glad pleased",
    "cheap inexpensive",
    "expensive costly pricey",
    "reliable dependable",
    "sick ill",
    "movie film",
    "car automobile",
    "photo picture photograph",
    "kid child",
    "mom mother",
    "dad father",
    "doctor physician",
    "error mistake",
    "bug defect",
)
_EN_IRREGULAR = {"chose": "choose", "chosen": "choose", "bought": "buy", "began": "begin", "begun": "begin",
                 "spoke": "speak", "spoken": "speak", "children": "child", "kids": "kid", "loved": "love",
                 "liked": "like", "used": "use", "preferred": "prefer", "preferring": "prefer"}
_ZH_GROUPS = (
    "喜欢 偏爱 喜爱 爱 偏好 钟爱 热爱 爱用",
    "讨厌 厌恶 反感",
    "使用 用 采用 运用",
    "需要 需",
    "想要 想",
    "开始 着手",
    "完成 做完",
    "帮助 帮忙 协助 帮",
    "购买 买",
    "显示 展示",
    "修复 修好 修正",
    "选择 挑选 选 选用",
    "告诉 告知",
    "回复 回答 答复 回应",
    "尝试 试 试着",
    "允许 准许",
    "禁止 严禁",
    "快 快速 迅速 飞快",
    "慢 缓慢",
    "难 困难",
    "简单 容易 轻松",
    "聪明 机灵 聪慧",
    "重要 关键 要紧",
    "经常 常常 常 时常",
    "通常 平常 平时 一般",
    "正确 准确",
    "错误 错",
    "高兴 开心 快乐 愉快",
    "便宜 实惠",
    "贵 昂贵",
    "保存 存放 存储 储存",
    "编写 撰写 写",
    "电影 影片",
    "汽车 车子",
    "照片 相片",
    "孩子 小孩 儿童",
    "妈妈 母亲",
    "爸爸 父亲",
    "医生 大夫",
)
#: Set aside before a slot is looked up: they grade a word, they do not change what it says.
_DEGREE_EN = frozenset(["very", "really", "quite", "truly", "so", "extremely", "highly"])
_DEGREE_ZH = re.compile("^(?:很|非常|十分|特别|挺|真|相当|比较)+")
_LATIN = re.compile(r"^[a-z][a-z'-]*$")
_GRADES = (("iest", "y", "est"), ("ier", "y", "er"), ("est", "", "est"), ("er", "", "er"))
_INFLECTIONS = (("ies", "y"), ("ied", "y"), ("ing", ""), ("ing", "e"), ("ed", ""), ("ed", "e"), ("es", ""),
                ("s", ""), ("d", ""))


def _index(groups: Sequence[str]) -> dict[str, int]:
    return {w: i for i, g in enumerate(groups) for w in g.split()}


_EN = _index(_EN_GROUPS)
_ZH = _index(_ZH_GROUPS)


def _lemma(word: str) -> tuple[int, str] | None:
    """(group, grade) of an English word in the table, through regular inflection; None if not there."""
    w = _EN_IRREGULAR.get(word, word)
    if w in _EN:
        return _EN[w], ""
    for suffix, add in _INFLECTIONS:
        if w.endswith(suffix) and len(w) > len(suffix) + 2:
            base = w[: -len(suffix)] + add
            if base in _EN:
                return _EN[base], ""
            if suffix in ("ing", "ed") and len(base) > 3 and base[-1] == base[-2] and base[:-1] in _EN:
                return _EN[base[:-1]], ""  # stopped, planning
    for suffix, add, grade in _GRADES:
        if w.endswith(suffix) and len(w) > len(suffix) + 2:
            base = w[: -len(suffix)] + add
            for b in (base, base + "e", base[:-1] if len(base) > 3 and base[-1] == base[-2] else base):
                if b in _EN:
                    return _EN[b], grade
    return None


def sense(tokens: Sequence[str], stop: frozenset[str] = frozenset()) -> tuple[str, int, str] | None:
    """The table's sense of a slot (:func:`memoryd.indexer.write.lexical.seq_tokens`: lowercase Latin
    words, or single CJK characters), or None when it is not one word of the table.

    Stop words in ``stop`` and degree adverbs are set aside first; what is left must be one
    English word or one Chinese word of a group. Cached: dedup asks about the same few slots for
    every candidate of every line of an import.
    """
    return _sense(tuple(tokens), stop)


@functools.lru_cache(maxsize=16384)
def _sense(tokens: tuple[str, ...], stop: frozenset[str]) -> tuple[str, int, str] | None:
    if tokens and all(_LATIN.match(t) for t in tokens):
        rest = [t for t in tokens if t not in stop and t not in _DEGREE_EN]
        found = _lemma(rest[0]) if len(rest) == 1 else None
        return None if found is None else ("en", *found)
    if not tokens or any(t.isascii() for t in tokens):
        return None
    word = _DEGREE_ZH.sub("", "".join(tokens))  # a stop character may be part of the word: 重要, 着手
    for w in (word, "".join(ch for ch in word if ch not in stop)):
        if w in _ZH:
            return "zh", _ZH[w], ""
    return None


def synonymous(a: Sequence[str], b: Sequence[str], stop: frozenset[str] = frozenset()) -> bool:
    """Whether two exchanged slots say the same (one group, the same grade): see :func:`sense`."""
    sa = sense(a, stop)
    return sa is not None and sa == sense(b, stop)


#: Groups that say the opposite of each other (named by one word of each): "likes" → "hates" flips what a
#: memory says about the same thing, like a negation — the same slot with its value changed.
_EN_OPPOSITES = (("like", "dislike"), ("fast", "slow"), ("quickly", "slow"), ("easy", "hard"), ("cheap", "expensive"),
                 ("correct", "wrong"), ("often", "seldom"), ("big", "small"), ("allow", "forbid"),
                 )
_ZH_OPPOSITES = (("喜欢", "讨厌"), ("快", "慢"), ("简单", "难"), ("便宜", "贵"), ("正确", "错误"), ("允许", "禁止"))
_OPPOSITE = frozenset(
    {(lang, table[x], table[y]) for lang, table, pairs in (("en", _EN, _EN_OPPOSITES), ("zh", _ZH, _ZH_OPPOSITES))
     for p, q in pairs for x, y in ((p, q), (q, p))})


def opposite(a: Sequence[str], b: Sequence[str], stop: frozenset[str] = frozenset()) -> bool:
    """Whether two exchanged slots say the opposite ("likes" / "hates", "容易" / "困难"): see :func:`sense`."""
    sa, sb = sense(a, stop), sense(b, stop)
    return sa is not None and sb is not None and (sa[0], sa[1], sb[1]) in _OPPOSITE
