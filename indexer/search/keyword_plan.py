"""Bounding the work of the keyword leg: which FTS5 queries one search runs.

FTS5's ``bm25()`` costs ~1.5–5 µs for every row the ``MATCH`` yields (it reads
each row's position lists and length), plus a scan of every query term's whole
posting list for the IDF. With an OR of common terms over 100k chunks that is
~45,000 rows and 100–250 ms — ten times the budget of a whole search. So the
leg ranks exactly only when the query is cheap, and otherwise bounds the rows:

* at most ``row_budget`` rows can match (``sum(df)`` or the number of chunks
  is within it: every query on a corpus of a few thousand chunks, and
  rare-term queries at any size): one pass, exact BM25 over every term.
* Otherwise, up to two passes, each a lower bound of the exact BM25 (a pass
  scores a subset of the terms, and BM25 is a sum over terms):

  1. the *rare* terms — the rarest first while their document frequencies
     add up to at most half the row budget — over the whole corpus, so a rare
     name or marker is found however old its chunk;
  2. the *scanned* terms — the rarest first up to ``scan_budget`` postings
     (always at least one term) — over a window of the newest chunk ids sized
     to yield about half the row budget. A query made only of common words is
     thus ranked among recent memories, and its work stays bounded.

  Terms past ``scan_budget`` (the most common ones, the corpus's own stop
  words) are dropped: their IDF is the lowest of the query's.

Document frequencies come from an ``fts5vocab`` table (a scan of the term's
postings in C) and are cached per searcher: they only steer the plan, so a
slightly stale value costs a little speed or recall, never a wrong score.
"""

from __future__ import annotations

import re
import sqlite3
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

ROW_BUDGET = 2_000
"""Rows one keyword leg lets ``bm25()`` score (~3–4 ms on this project's 2-core reference machine)."""

SCAN_BUDGET = 20_000
"""Postings the scanned terms may hold in all (their IDF scan is ~0.1 µs a posting)."""

_TOKEN = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class KeywordPass:
    """One FTS5 query: the OR of ``terms``, over chunk ids ``>= min_rowid``."""

    terms: tuple[str, ...]
    min_rowid: int = 0


@dataclass(frozen=True)
class KeywordPlan:
    passes: tuple[KeywordPass, ...]
    exact: bool
    dropped: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()  # terms no chunk holds: left out, which changes no score

    def describe(self) -> dict[str, object]:
        """For ``--explain``: how this query's keyword scores were computed."""
        return {"exact": self.exact, "dropped_terms": list(self.dropped), "absent_terms": list(self.absent),
                "passes": [{"terms": list(p.terms), "min_chunk_id": p.min_rowid} for p in self.passes]}


def plan(terms: Sequence[str], df: dict[str, int], max_rowid: int,
         row_budget: int = ROW_BUDGET, scan_budget: int = SCAN_BUDGET) -> KeywordPlan:
    """The passes for ``terms`` given their document frequencies ``df`` (missing = 0).

    ``max_rowid`` is the highest chunk id; ids grow as chunks are added, so a
    window ``>= min_rowid`` holds the newest chunks. Requires ``scan_budget >=
    row_budget // 2`` (then the scanned terms include the rare ones).
    """
    if not terms:
        return KeywordPlan((), exact=True)
    if min(sum(df.get(t, 0) for t in terms), max_rowid) <= row_budget:  # rows matched <= either
        return KeywordPlan((KeywordPass(tuple(terms)),), exact=True)
    by_df = sorted(terms, key=lambda t: df.get(t, 0))  # stable: ties keep the query's order
    rare = _prefix(by_df, df, row_budget // 2)
    scanned = _prefix(by_df, df, scan_budget) or by_df[:1]
    postings = sum(df.get(t, 0) for t in scanned)
    fraction = min(1.0, (row_budget // 2) / max(postings, 1))
    window = KeywordPass(tuple(scanned), min_rowid=int(max_rowid * (1.0 - fraction)))
    # The window pass scores a superset of the rare terms; over the whole corpus it makes them redundant.
    passes = (KeywordPass(tuple(rare)), window) if rare and window.min_rowid > 0 else (window,)
    return KeywordPlan(passes, exact=False, dropped=tuple(t for t in terms if t not in scanned))


def _prefix(by_df: list[str], df: dict[str, int], budget: int) -> list[str]:
    out: list[str] = []
    total = 0
    for term in by_df:
        total += df.get(term, 0)
        if total > budget:
            break
        out.append(term)
    return out


class DocFrequencies:
    """Cached document frequencies of FTS5 terms, read through an ``fts5vocab`` table.

    Thread-safe enough for its use: a racing lookup only repeats work. Entries
    expire after ``ttl_s`` so the plan follows a growing corpus. A term no chunk
    holds (0) is trusted only until the next commit :meth:`sync` notices, so a
    search may leave such terms out of its ``MATCH`` without missing a word
    saved a moment ago.
    """

    VOCAB = "temp.memoryd_vocab"
    MAX_CONNECTIONS = 16  # connections whose data_version is remembered; past it all are forgotten

    def __init__(self, max_entries: int = 20_000, ttl_s: float = 60.0) -> None:
        self._cache: OrderedDict[str, tuple[float, int, int]] = OrderedDict()  # term -> (time, df, epoch)
        self._max = max_entries
        self._ttl = ttl_s
        self._epoch = 0
        self._versions: dict[int, tuple[sqlite3.Connection, int]] = {}

    def sync(self, conn: sqlite3.Connection) -> None:
        """Notice commits by other connections since ``conn`` was last synced (``PRAGMA data_version``);
        after one, cached zeros are read again. A connection not seen before counts as a change."""
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        seen = self._versions.get(id(conn))
        if seen is not None and seen[0] is conn and seen[1] == version:
            return
        self._epoch += 1
        if len(self._versions) >= self.MAX_CONNECTIONS:
            self._versions.clear()  # a closed connection's id may be reused: forgetting is always safe
        self._versions[id(conn)] = (conn, version)

    @property
    def epoch(self) -> int:
        """Bumped by :meth:`sync` at every commit (or new connection) it notices: a generation of the index."""
        return self._epoch

    def lookup(self, conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, int]:
        """``{term: chunks holding it}``; a multi-token term counts as its rarest token."""
        now = time.monotonic()
        epoch = self._epoch
        out: dict[str, int] = {}
        missing: list[str] = []
        for term in terms:
            hit = self._cache.get(term)
            if hit is not None and now - hit[0] < self._ttl and (hit[1] > 0 or hit[2] == epoch):
                out[term] = hit[1]
            else:
                missing.append(term)
        if missing:
            fresh = self._read(conn, missing)
            for term in missing:
                out[term] = fresh[term]
                self._cache[term] = (now, fresh[term], epoch)
                self._cache.move_to_end(term)
            while len(self._cache) > self._max:
                self._cache.popitem(last=False)
        return out

    def _read(self, conn: sqlite3.Connection, terms: Sequence[str]) -> dict[str, int]:
        tokens = {t: _TOKEN.findall(_without_diacritics(t)) for t in terms}
        wanted = sorted({tok for toks in tokens.values() for tok in toks})
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {self.VOCAB} USING fts5vocab(main, chunks_fts, row)")
        counts: dict[str, int] = {}
        for start in range(0, len(wanted), 500):  # under SQLite's bound-parameter limit
            part = wanted[start:start + 500]
            marks = ",".join("?" * len(part))
            counts.update(conn.execute(f"SELECT term, doc FROM {self.VOCAB} WHERE term IN ({marks})", part))
        return {t: min((counts.get(tok, 0) for tok in toks), default=0) for t, toks in tokens.items()}


def _without_diacritics(term: str) -> str:
    """As the ``unicode61 remove_diacritics 2`` tokenizer stores it (``café`` → ``cafe``)."""
    return "".join(c for c in unicodedata.normalize("NFD", term) if not unicodedata.combining(c))
