"""Chunks' stored keyword terms, kept from one query to the next while the index does not change.

Every hybrid query reads the terms of its ~50 keyword candidates (term proximity) and of its
~24 best hits (the calibration's coverage, as a set of terms): the same few hundred chunks of
a folder, query after query, each read from FTS5 and split again. A chunk's terms change only
with a commit, so they are kept per *generation* of the index: the entries are dropped
whenever :class:`~memoryd.indexer.search.keyword_plan.DocFrequencies` notices a commit
(``PRAGMA data_version``, checked under the index lock at the start of each query) or a
connection it has not seen. Chunk ids may be reused after a delete, so nothing is kept across
generations. Bounded: the oldest entries go first.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence

from memoryd.indexer.storage.embedded.store import select_in

MAX_ENTRIES = 1024
"""Chunks kept (terms and their set: ~2–16 KB each, so at most ~16 MB)."""

_SQL = "SELECT rowid, terms FROM chunks_fts WHERE rowid IN ({})"


class _Entry:
    __slots__ = ("terms", "words")

    def __init__(self, terms: str) -> None:
        self.terms = terms
        self.words: frozenset[str] | None = None  # made on first use: proximity needs only the text


class ChunkTerms:
    """Shared by the searching threads (a lock guards it); ``epoch`` is the caller's generation."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._lock = threading.Lock()
        self._epoch: int | None = None
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._max = max_entries

    def terms(self, conn: sqlite3.Connection, ids: Sequence[int], epoch: int) -> dict[int, str]:
        """The stored terms of the chunks among ``ids`` that exist, in ``ids``' order."""
        return {i: e.terms for i, e in self._read(conn, ids, epoch).items()}

    def word_sets(self, conn: sqlite3.Connection, ids: Sequence[int], epoch: int) -> dict[int, frozenset[str]]:
        """The same terms as sets (what the calibration's coverage tests against)."""
        out = {}
        for i, e in self._read(conn, ids, epoch).items():
            if e.words is None:
                e.words = frozenset(e.terms.split())
            out[i] = e.words
        return out

    def _read(self, conn: sqlite3.Connection, ids: Sequence[int], epoch: int) -> dict[int, _Entry]:
        found: dict[int, _Entry] = {}
        missing: list[int] = []
        with self._lock:
            if epoch != self._epoch:  # another generation: nothing kept holds for it
                self._entries.clear()
                self._epoch = epoch
            for i in ids:
                entry = self._entries.get(i)
                if entry is None:
                    missing.append(i)
                else:
                    self._entries.move_to_end(i)
                    found[i] = entry
        if missing:
            fresh = {int(i): _Entry(str(t)) for i, t in select_in(conn, _SQL, missing)}
            with self._lock:
                if epoch == self._epoch:  # not if a newer generation was seen meanwhile
                    self._entries.update(fresh)
                    while len(self._entries) > self._max:
                        self._entries.popitem(last=False)
            found.update(fresh)
        return {i: found[i] for i in ids if i in found}
