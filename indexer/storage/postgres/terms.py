"""memoryd's analysed terms as PostgreSQL text-search values, built without any PostgreSQL parser.

The keyword leg must rank exactly as the embedded backend's FTS5 table does, so the
terms :func:`memoryd.indexer.keyword.document_terms` produced (Chinese bigrams,
stems, folded words) are stored as they are: a ``tsvector`` literal whose lexemes are
those terms and whose positions give each term's frequency, with no text-search
configuration in between (not even ``simple``, whose parser would split some of them).

FTS5 re-tokenises the stored string with ``unicode61``: a term is split at every
character that is not a letter, a digit or a mark. :func:`fts_tokens` does the same,
so both backends count the same tokens.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MAX_POSITION = 16383  # PostgreSQL's largest tsvector position; later positions repeat it
MAX_POSITIONS = 256  # positions kept per lexeme by PostgreSQL: term frequency saturates there
_TOKEN = re.compile(r"[^\W_]+|_", re.UNICODE)


def fts_tokens(terms: str) -> list[str]:
    """The tokens FTS5's ``unicode61`` tokenizer reads from a stored terms string."""
    return [t for t in _TOKEN.findall(terms.lower()) if t != "_"]


def tsvector_literal(tokens: Sequence[str]) -> str:
    """A ``tsvector`` input literal: each distinct token with the positions it occurs at."""
    positions: dict[str, list[int]] = {}
    for n, tok in enumerate(tokens, 1):
        seen = positions.setdefault(tok, [])
        if len(seen) < MAX_POSITIONS:
            seen.append(min(n, MAX_POSITION))
    return " ".join(f"{_quote(tok)}:{','.join(map(str, pos))}" for tok, pos in positions.items())


def tsquery_any(tokens: Sequence[str]) -> str:
    """A ``tsquery`` input literal matching any of ``tokens`` (no parser involved)."""
    return " | ".join(_quote(t) for t in dict.fromkeys(tokens))


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"
