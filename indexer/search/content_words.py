"""Which query terms carry content: the ones relevance coverage counts.

"thanks, that works" analyses to ``thank work``, "why is it not working?" to ``not work``: every
term is in the memory somewhere, so a coverage that counts them scores ordinary chat turns as
fully answered. Calibration (:mod:`memoryd.indexer.search.calibration`) counts only content
terms: a query term is *common* when it is one of the very common words of its language (the
analyser's stop words are already gone), read from ``common_words.txt`` and analysed as a query
is (so ``works`` and ``working`` both become ``work``); a Chinese bigram is common when it is one of
the listed words' bigrams or both its characters are function characters (我们, 这个; not 成都 or
同事, whose characters are merely frequent). The list is general word frequency, not chosen on any
evaluation set: its job is to say "this word names no topic", and the corpus IDF weighs the remaining
terms by rarity.

A query with no content term (``continue``, ``好的``) and no intent of a question to a memory
(:mod:`memoryd.indexer.search.intent`; the pipeline then counts all its terms) is never answered by
memory: its hits score 0 (:func:`memoryd.indexer.search.calibration.probability`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from importlib import resources

from memoryd.indexer.search import keyword

__all__ = ["common_terms", "content_terms"]


@cache
def common_terms() -> tuple[frozenset[str], frozenset[str]]:
    """The common terms (English words and Chinese bigrams, as the analyser writes them) and the
    common Chinese characters."""
    text = resources.files(__package__).joinpath("common_words.txt").read_text(encoding="utf-8")
    words: set[str] = set()
    chars: set[str] = set()
    for line in text.splitlines():
        for word in line.split("#", 1)[0].split():
            if len(word) == 1 and not word.isascii():
                chars.add(word)
            else:  # an English word as the analyser writes it; a Chinese word as its bigrams
                words.update(keyword.query_terms(word) or [word.casefold()])
    return frozenset(words), frozenset(chars)


def is_common(term: str) -> bool:
    """Whether ``term`` (an analysed query term) names no topic on its own."""
    words, chars = common_terms()
    if term in words:
        return True
    return not term.isascii() and len(term) <= 2 and all(c in chars for c in term)


def content_terms(terms: Sequence[str]) -> list[str]:
    """``terms`` without the common ones, in order."""
    return [t for t in terms if not is_common(t)]
