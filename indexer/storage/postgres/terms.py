"""memoryd's analysed terms as PostgreSQL keyword postings, built without any PostgreSQL parser.

The keyword leg must rank exactly as the embedded backend's FTS5 table does, so the
terms :func:`memoryd.indexer.search.keyword.document_terms` produced (Chinese bigrams,
stems, folded words) are stored as they are, one posting row per distinct term of a
chunk with its frequency, with no text-search configuration in between (not even
``simple``, whose parser would split some of them).

FTS5 re-tokenises the stored string with ``unicode61``: a term is split at every
character that is not a letter, a digit or a mark. :func:`fts_tokens` does the same,
so both backends count the same tokens.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

_TOKEN = re.compile(r"[^\W_]+|_", re.UNICODE)


def fts_tokens(terms: str) -> list[str]:
    """The tokens FTS5's ``unicode61`` tokenizer reads from a stored terms string."""
    return [t for t in _TOKEN.findall(terms.lower()) if t != "_"]


def term_frequencies(tokens: Sequence[str]) -> tuple[list[str], list[int]]:
    """Each distinct token (first-seen order) and how often it occurs."""
    counts = Counter(tokens)
    return list(counts), list(counts.values())
