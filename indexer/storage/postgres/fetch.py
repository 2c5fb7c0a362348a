"""Everything a query needs about its candidate chunks, read in one statement.

Once both legs have named their candidates, the searcher needs, for that union: the rows
(to fuse, shape and show), the analyser terms (proximity bonus), the cosine of the ones the
vector leg did not return (hybrid fusion) and which query tokens each holds (calibration
coverage). Read one by one these were four round trips per query; here they are one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import psycopg

from memoryd.indexer.store import ChunkRow

JOIN = " JOIN memoryd_files f ON f.id = c.file_id JOIN memoryd_roots r ON r.id = f.root_id"
_ROW = "c.id, r.path, f.path, c.start_line, c.end_line, c.heading, c.text, f.mtime_ns"


@dataclass
class Candidates:
    """The union's rows, terms, cosines (when a query vector was given) and stored query tokens."""

    rows: dict[int, ChunkRow] = field(default_factory=dict)
    terms: dict[int, str] = field(default_factory=dict)
    cosines: dict[int, float] = field(default_factory=dict)
    stored: dict[int, set[str]] = field(default_factory=dict)


def fetch_candidates(conn: psycopg.Connection[Any], ids: Sequence[int], qvec: Any, cast: str,
                     tokens: Sequence[str]) -> Candidates:
    """Rows, terms, cosines to ``qvec`` (skipped when None) and which of ``tokens`` each of ``ids`` holds.

    The cosine is the vector leg's own expression (``1 - (a <=> b)`` on the same cast), so a
    score read here equals the one the leg would have returned.
    """
    out = Candidates()
    if not ids:
        return out
    cos = f"1 - (c.embedding::{cast} <=> %s::{cast})" if qvec is not None else "NULL::float8"
    args: list[Any] = [np.asarray(qvec, dtype=np.float32)] if qvec is not None else []
    sql = (f"SELECT {_ROW}, c.terms, {cos},"
           " ARRAY(SELECT p.term FROM memoryd_postings p WHERE p.chunk_id = c.id AND p.term = ANY(%s))"
           f" FROM memoryd_chunks c{JOIN} WHERE c.id = ANY(%s)")
    for r in conn.execute(sql, [*args, list(tokens), list(ids)]).fetchall():
        cid = int(r[0])
        out.rows[cid] = ChunkRow(*r[:8])
        out.terms[cid] = str(r[8])
        if r[9] is not None:
            out.cosines[cid] = float(r[9])
        if r[10]:
            out.stored[cid] = {str(t) for t in r[10]}
    return out
