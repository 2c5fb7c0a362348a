"""Which words of a line the page marks for a query: whole content words, as the keyword index sees them.

The marks used to be a prefix pattern of the query's words, so "the" lit up inside "they" and
"there", and every "the" of a hit was marked. Now a Latin word is marked when the keyword
analysis (:mod:`memoryd.indexer.search.keyword`: stop words dropped, Snowball stems) gives it a term the
query has — "deployed" for ``deploy``, never "they" for ``the`` (a stop word, not searched at all).
Words of scripts without spaces (CJK) still match as substrings of 2+ characters, as their
keyword search does with character bigrams.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from memoryd.indexer.search.keyword import document_terms, query_terms

_WORD = re.compile(r"\w+", re.UNICODE)
_LATIN = re.compile(r"[A-Za-z0-9_'À-ɏ]+")


class QueryWords:
    """The query's content words; :meth:`finditer` yields the spans of a line to mark."""

    def __init__(self, query: str) -> None:
        self.terms = frozenset(query_terms(query))
        others = {w.lower() for w in _WORD.findall(query) if len(w) >= 2 and not _LATIN.fullmatch(w)}
        self._others = re.compile("|".join(re.escape(w) for w in sorted(others, key=len, reverse=True)),
                                  re.IGNORECASE) if others else None
        self._memo: dict[str, bool] = {}

    def __bool__(self) -> bool:
        return bool(self.terms) or self._others is not None

    def finditer(self, line: str) -> Iterator[tuple[int, int]]:
        """(start, end) of each word of ``line`` to mark, in order, not overlapping."""
        for m in _WORD.finditer(line):
            word = m.group()
            if _LATIN.fullmatch(word):
                if self._content(word):
                    yield m.start(), m.end()
            elif self._others is not None:
                for o in self._others.finditer(word):
                    yield m.start() + o.start(), m.start() + o.end()

    def _content(self, word: str) -> bool:
        hit = self._memo.get(word)
        if hit is None:
            hit = self._memo[word] = bool(self.terms & set(document_terms(word).split()))
        return hit


def query_words(query: str) -> QueryWords | None:
    """The query's words to mark, or None when it has none worth marking (only stop words)."""
    words = QueryWords(query)
    return words if words else None
