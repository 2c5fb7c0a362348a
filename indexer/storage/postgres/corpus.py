"""BM25's corpus counts, kept by every write (schema 3): document frequencies and table totals.

FTS5 keeps these in its own structure; a query on PostgreSQL used to count them, a term's
document frequency by reading every one of its postings (~1 ms per 10,000; 5-10 ms for a
query of common words at 100k chunks) and the table's totals by reading an index entry per
chunk (~11 ms at 100k), again after every write anywhere. Now each write transaction adds
its net change to ``memoryd_terms`` (term -> number of chunks holding it) and to the one row
of ``memoryd_totals`` (chunks, summed lengths, a write counter), so a query reads only the
rows it needs (~0.2 ms).

Deadlocks: a write's whole change goes out as one statement per table, every transaction
touches the terms in the same (sorted) order and then the totals row, so two daemons writing
at once wait for each other on a common term but never deadlock. That statement comes last
in the transaction, so the row locks are held only until the commit that follows.

Daemons older than schema 3 would write postings without these counts: migration 3 adds
``pg_writers`` to the stored identity (:data:`WRITERS_SINCE`) and bumps the identity
generation, so such a daemon stops writing at its next write, as after a re-index with other
settings (:mod:`memoryd.indexer.storage.postgres.backend`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

WRITERS_SINCE = "3"  # the schema whose writers keep the counts; in the identity as ``pg_writers``


@dataclass
class CorpusDelta:
    """What one write transaction adds to (or, negative, removes from) the corpus counts."""

    df: Counter[str] = field(default_factory=Counter)
    chunks: int = 0
    terms: int = 0

    def add_chunk(self, distinct: Iterable[str], length: int) -> None:
        self.df.update(distinct)
        self.chunks += 1
        self.terms += length

    def merge(self, other: CorpusDelta) -> None:
        self.df.update(other.df)  # Counter.update adds (negative counts included)
        self.chunks += other.chunks
        self.terms += other.terms


def drop_postings(c: psycopg.Connection[Any], chunk_cond: str, args: Sequence[Any]) -> CorpusDelta:
    """Delete the postings of the chunks ``chunk_cond`` selects (an SQL condition on ``c``, the
    chunk rows) and return what that removes from the counts. Call it before deleting the chunk
    rows themselves (their cascade then finds nothing left)."""
    sql = (f"WITH gone AS (SELECT c.id, c.n_terms FROM memoryd_chunks c WHERE {chunk_cond}),"
           " dropped AS (DELETE FROM memoryd_postings p USING gone WHERE p.chunk_id = gone.id RETURNING p.term)"
           " SELECT NULL, (SELECT count(*) FROM gone), (SELECT coalesce(sum(n_terms), 0) FROM gone)"
           " UNION ALL SELECT term, count(*), 0 FROM dropped GROUP BY term")
    out = CorpusDelta()
    for term, n, length in c.execute(sql, list(args)).fetchall():
        if term is None:
            out.chunks, out.terms = -int(n), -int(length)
        else:
            out.df[str(term)] = -int(n)
    return out


def apply(c: psycopg.Connection[Any], delta: CorpusDelta) -> None:
    """Add ``delta`` to the counts, in the transaction of the write it describes (its last statements)."""
    changed = sorted((t, n) for t, n in delta.df.items() if n)
    if changed:
        c.execute("INSERT INTO memoryd_terms (term, df) SELECT t, n FROM unnest(%s::text[], %s::bigint[]) AS u(t, n)"
                  " ORDER BY t ON CONFLICT (term) DO UPDATE SET df = memoryd_terms.df + EXCLUDED.df",
                  ([t for t, _ in changed], [n for _, n in changed]))
    if changed or delta.chunks or delta.terms:
        c.execute("UPDATE memoryd_totals SET chunks = chunks + %s, terms = terms + %s, writes = writes + 1"
                  " WHERE id = 1", (delta.chunks, delta.terms))


def totals(conn: psycopg.Connection[Any]) -> tuple[int, int, int, int]:
    """(chunks, summed lengths, highest chunk id, write counter): one row and one index probe."""
    row = conn.execute("SELECT t.chunks, t.terms, (SELECT coalesce(max(id), 0) FROM memoryd_chunks), t.writes"
                       " FROM memoryd_totals t WHERE t.id = 1").fetchone()
    return (int(row[0]), int(row[1]), int(row[2]), int(row[3])) if row else (0, 0, 0, 0)


def document_frequencies(conn: psycopg.Connection[Any], tokens: Sequence[str]) -> dict[str, int]:
    """How many chunks hold each of ``tokens`` (0 for a token no chunk holds)."""
    rows = conn.execute("SELECT term, df FROM memoryd_terms WHERE term = ANY(%s)", (list(tokens),)).fetchall()
    found = {str(t): max(int(n), 0) for t, n in rows}
    return {t: found.get(t, 0) for t in tokens}
