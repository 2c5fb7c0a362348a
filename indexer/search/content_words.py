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
terms by rarity. Other languages' common words (Spanish, French, German, Portuguese, Russian) are listed
per language (``# lang: xx``): they make a query no content only when *all* its remaining terms are common
in that one language — a chat turn in it ("d'accord, continue", "да, продолжай") — so a word that is also
an English name or topic ("son", "war", "die", "Les") stays a content word of an English question.
Japanese kana are function characters like Chinese ones (kanji words are listed as words).

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
def _lists() -> tuple[frozenset[str], frozenset[str], tuple[tuple[frozenset[str], frozenset[str]], ...]]:
    """The common terms of every language (English words, Chinese and Japanese bigrams, as the analyser
    writes them), the common CJK characters, and each ``# lang: xx`` section's terms and characters."""
    text = resources.files(__package__).joinpath("common_words.txt").read_text(encoding="utf-8")
    words: set[str] = set()
    chars: set[str] = set()
    langs: dict[str, tuple[set[str], set[str]]] = {}
    lang = ""
    for line in text.splitlines():
        if line.startswith("# lang:"):
            lang = line.split(":", 1)[1].strip()
            continue
        w_target, c_target = langs.setdefault(lang, (set(), set())) if lang else (words, chars)
        for word in line.split("#", 1)[0].split():
            if len(word) == 1 and not word.isascii():
                c_target.add(word)
            else:  # a word as the analyser writes it; a CJK word as its bigrams
                w_target.update(keyword.query_terms(word) or [word.casefold()])
    return frozenset(words), frozenset(chars), tuple((frozenset(w), frozenset(c)) for w, c in langs.values())


def common_terms() -> tuple[frozenset[str], frozenset[str]]:
    """The common terms of every language and the common CJK characters."""
    words, chars, _ = _lists()
    return words, chars


def is_common(term: str) -> bool:
    """Whether ``term`` (an analysed query term) names no topic on its own."""
    words, chars = common_terms()
    if term in words:
        return True
    return not term.isascii() and len(term) <= 2 and all(c in chars for c in term)


def content_terms(terms: Sequence[str]) -> list[str]:
    """``terms`` without the common ones, in order; none when every one left is common in one of the
    listed languages (a chat turn in it: "vale, sigue", "mach weiter", "pode continuar")."""
    rest = [t for t in terms if not is_common(t)]
    if rest and any(all(_common_in(t, words, chars) for t in rest) for words, chars in _lists()[2]):
        return []
    return rest


def _common_in(term: str, words: frozenset[str], chars: frozenset[str]) -> bool:
    """Whether ``term`` is common in one ``# lang:`` section (its words, or a CJK term of its characters
    and the common ones)."""
    if term in words:
        return True
    return not term.isascii() and len(term) <= 2 and all(c in chars or c in _lists()[1] for c in term)
