"""What the query pipeline asks of a storage backend: the legs interface.

:mod:`memoryd.indexer.search.pipeline` runs every query the same way whatever stores the
chunks; a backend answers it through these few calls, one :class:`LegSession` per query:
the two candidate legs (keyword and vector), the chunks' rows and stored terms, the
cosines of given chunks, the corpus statistics (document frequencies, the document count)
and the calibration features (each backend holds its keyword terms its own way).

Implemented by :class:`memoryd.indexer.storage.embedded.hybrid.EmbeddedLegs` (SQLite FTS5 + FAISS)
and :class:`memoryd.indexer.storage.postgres.search.PgLegs` (PostgreSQL + pgvector).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from memoryd.indexer.search.calibration import Features
from memoryd.indexer.search.keyword_plan import KeywordPlan
from memoryd.indexer.search.query import Query
from memoryd.indexer.storage.rows import ChunkRow


@dataclass(frozen=True)
class Terms:
    """The query's keyword terms, worked out once by the pipeline."""

    terms: list[str]  # the analyser's terms of the cleaned query (none in vector mode)
    expanded: list[str]  # ``terms`` with the synonyms of names (what the keyword leg searches)
    features: list[str]  # the terms calibration weighs (the query's, whatever the mode)


@dataclass(frozen=True)
class QueryVector:
    """The query's embedding: ``ready`` when at hand, else ``pending`` computes or waits for it
    (then a backend runs its keyword leg first, while it is computed). Both None: no vector leg."""

    ready: Any = None
    pending: Callable[[], Any] | None = None

    @property
    def wanted(self) -> bool:
        return self.ready is not None or self.pending is not None


@dataclass
class Found:
    """What the two legs proposed: the keyword leg's deep list (BM25, best first), the plan that
    bounded it, the vector leg's (cosine, best first) and the query vector (None: no vector leg)."""

    keyword: dict[int, float]
    plan: KeywordPlan
    vector: dict[int, float]
    qvec: Any


class LegSession(Protocol):
    """One query's access to the storage; valid inside :meth:`SearchLegs.session`."""

    def snapshot(self) -> AbstractContextManager[object]:
        """While held, both legs and the rows read see one committed state (no file half-replaced)."""
        ...

    def candidates(self, terms: Terms, n_keyword: int, n_vector: int, vector: QueryVector,
                   early: Callable[[dict[int, float]], None]) -> Found:
        """Both legs: ``n_keyword`` chunks by BM25 over ``terms.expanded``, ``n_vector`` by cosine.
        ``early`` may be called with the keyword leg's best ``n_vector`` while a pending vector is
        computed (work the pipeline would otherwise do after the legs)."""
        ...

    def chunks(self, ids: Sequence[int], qvec: Any) -> dict[int, ChunkRow]:
        """The rows of ``ids`` (vanished ones absent); ``qvec`` (or None): cosines wanted next."""
        ...

    def cosines(self, qvec: Any, ids: Sequence[int]) -> dict[int, float]:
        """The cosine to ``qvec`` of chunks the vector leg did not return (no vector yet: absent)."""
        ...

    def chunk_terms(self, ids: Sequence[int]) -> dict[int, str]:
        """The stored analyser terms of ``ids`` (term proximity); asked only after :meth:`chunks`
        (or from ``early``), so a backend may read them with the rows."""
        ...

    def doc_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        """How many chunks hold each term."""
        ...

    def n_docs(self) -> int:
        """The document count the IDFs use (the highest chunk id, as FTS5's rowids count)."""
        ...

    def features(self, ids: Sequence[int], terms: Sequence[str],
                 cosines: dict[int, float] | None) -> dict[int, Features]:
        """The calibration features of ``ids`` (:mod:`memoryd.indexer.search.calibration`)."""
        ...

    def vectors_of(self, ids: Sequence[int]) -> Any:
        """The stored vectors of ``ids`` (MMR), one row each."""
        ...

    def line_cosines(self, qvec: Any, ids: Sequence[int]) -> dict[int, float]:
        """Each chunk's best line cosine with ``qvec`` (:mod:`memoryd.indexer.fill.line_vectors`), for the chunks
        among ``ids`` whose line vectors are filled in (none on a backend that keeps none)."""
        ...


class SearchLegs(Protocol):
    """A backend's query side."""

    def session(self, query: Query, terms: Terms) -> AbstractContextManager[LegSession]: ...
