"""Everything a query needs about its candidate chunks, read in one statement.

Once both legs have named their candidates, the searcher needs, for that union: the rows
(to fuse, shape and show), the analyser terms (proximity bonus, and which query tokens each
hit holds for calibration coverage) and the cosine of the ones the vector leg did not return
(hybrid fusion). Read one by one these were four round trips per query; here they are one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg

from memoryd.indexer.storage.postgres.terms import fts_tokens
from memoryd.indexer.storage.rows import ChunkRow

JOIN = " JOIN memoryd_files f ON f.id = c.file_id JOIN memoryd_roots r ON r.id = f.root_id"
_ROW = "c.id, r.path, f.path, c.start_line, c.end_line, c.heading, c.text, f.mtime_ns"


@dataclass
class Candidates:
    """The union's rows, analyser terms and cosines (when a query vector was given)."""

    rows: dict[int, ChunkRow] = field(default_factory=dict)
    terms: dict[int, str] = field(default_factory=dict)
    cosines: dict[int, float] = field(default_factory=dict)

    def held(self, ids: Sequence[int], tokens: Sequence[str]) -> dict[int, set[str]]:
        """Which of the query's postings ``tokens`` each of ``ids`` holds: read from its terms, which
        its postings were made from (:func:`~memoryd.indexer.storage.postgres.terms.fts_tokens`), for
        the few hits that need it rather than in SQL for every candidate."""
        wanted = set(tokens)
        return {i: wanted.intersection(fts_tokens(self.terms[i])) for i in ids if i in self.terms}


def fetch_candidates(conn: psycopg.Connection[Any], ids: Sequence[int], qvec: Any, cast: str) -> Candidates:
    """Rows, terms, sites and cosines to ``qvec`` (skipped when None) of ``ids``.

    The cosine is the vector leg's own expression (``1 - (a <=> b)`` on the same cast), so a
    score read here equals the one the leg would have returned.
    """
    out = Candidates()
    if not ids:
        return out
    cos = f"1 - (c.embedding::{cast} <=> %s::{cast})" if qvec is not None else "NULL::float8"
    args: list[Any] = [np.asarray(qvec, dtype=np.float32)] if qvec is not None else []
    sql = f"SELECT {_ROW}, c.terms, {cos}, r.site FROM memoryd_chunks c{JOIN} WHERE c.id = ANY(%s)"
    for r in conn.execute(sql, [*args, list(ids)]).fetchall():
        cid = int(r[0])
        # whose file each is: the same root and path on two sites are two files, never merged into one hit
        out.rows[cid] = ChunkRow(cid, r[1], r[2], r[3], r[4], r[5], r[6], r[7], site=str(r[10]))
        out.terms[cid] = str(r[8])
        if r[9] is not None:
            out.cosines[cid] = float(r[9])
    return out
