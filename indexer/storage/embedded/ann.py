"""Index policy: which FAISS structure backs :class:`~.vectors.VectorIndex`, and how it is built.

Two kinds, both inner product on L2-normalised vectors (= cosine), both inside an
``IndexIDMap2`` so chunk ids and ``reconstruct`` keep working:

* ``flat`` (``IndexFlatIP``): exact, supports ``remove_ids``; search cost grows
  linearly (~10–50 ms per query at 100k x 384 on 2 cores).
* ``hnsw`` (``IndexHNSWFlat``, M=32, efConstruction=100): approximate, 1–2.5 ms
  per query, recall@10 >= 0.99 on clustered synthetic data up to 1M vectors
  with efSearch growing with the corpus (:func:`ef_search`). HNSW cannot remove nodes, so deletions are
  *tombstones*: an id set excluded at search time through an ``IDSelector``
  (excluded nodes are still traversed, so recall does not degrade), and the
  graph is rebuilt from its own stored vectors once tombstones pass
  ``TOMBSTONE_FRACTION`` of the graph. Rebuild-on-every-delete was rejected:
  one rebuild of 100k vectors takes tens of seconds on 2 cores, a tombstone
  costs nothing.

Switching (``auto``) happens at ``threshold`` chunks, back to flat below
``HYSTERESIS`` x threshold so a corpus hovering at the line does not flap.
Nothing is ever re-embedded: an inline rebuild reads the vectors out of the
current index; a background one (:class:`Rebuild`, used by the daemon so that
searches never wait for a 10-60 s HNSW build) reads a snapshot of the stored
vectors, builds without any lock and swaps in with the changes made meanwhile.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import faiss
import numpy as np

from memoryd.indexer.errors import ConfigError

KINDS = ("flat", "hnsw")
HNSW_M = 32  # graph degree: 16 lost ~1 point of recall on clustered data for little speed gain
# efConstruction 40 -> 100 (builds ~1.5-1.8x slower): recall@10 at 1M 0.92 -> 0.995 (ef 1024 / 512).
HNSW_EF_CONSTRUCTION = 100
HNSW_EF_SEARCH = 128  # recall@10 >= 0.99 on the benchmark at 100k; raised to k, and with size (ef_search)
HNSW_EF_SEARCH_MAX = 1024
TOMBSTONE_FRACTION = 0.2  # rebuild the graph when this share of its nodes are deleted
TOMBSTONE_MIN = 1000  # ...but never for fewer than this many (a rebuild is not free)
HYSTERESIS = 0.8


def new_index(kind: str, dimension: int) -> Any:
    """An empty ``IndexIDMap2`` of ``kind``; raises ConfigError for an unknown kind."""
    if kind == "flat":
        return faiss.IndexIDMap2(faiss.IndexFlatIP(dimension))
    if kind == "hnsw":
        inner = faiss.IndexHNSWFlat(dimension, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        inner.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        inner.hnsw.efSearch = HNSW_EF_SEARCH
        return faiss.IndexIDMap2(inner)  # the wrapper keeps a Python reference to ``inner``
    raise ConfigError(f"search.index_type: unknown vector index kind {kind!r} (expected one of {KINDS})")


def kind_of(index: Any) -> str:
    """``"hnsw"`` or ``"flat"`` for an ``IndexIDMap2`` built by :func:`new_index` (or loaded from disk)."""
    inner = faiss.downcast_index(index.index)
    return "hnsw" if isinstance(inner, faiss.IndexHNSW) else "flat"


def target_kind(size: int, current: str, threshold: int, index_type: str) -> str:
    """The kind the policy wants for ``size`` live vectors; raises ConfigError for a bad ``index_type``."""
    if index_type in KINDS:
        return index_type
    if index_type != "auto":
        raise ConfigError(f"search.index_type: {index_type!r} is not one of ('auto', 'flat', 'hnsw')")
    if size >= threshold:
        return "hnsw"
    if current == "hnsw" and size >= HYSTERESIS * threshold:
        return "hnsw"
    return "flat"


def needs_compaction(tombstones: int, total: int) -> bool:
    """True when deleted-but-present HNSW nodes are numerous enough to justify a rebuild."""
    return tombstones >= max(TOMBSTONE_MIN, TOMBSTONE_FRACTION * total)


def ef_search(k: int, total: int) -> int:
    """efSearch for a top-``k`` query on ``total`` vectors: recall falls as the graph grows.

    Measured on the benchmark's clustered vectors (M=32, recall@10, 1 thread). efConstruction
    40: 100k 0.993 at 128; 300k 0.863 at 128, 0.955 at 512; 1M 0.723 at 128, 0.919 at 1024 —
    the graph, not the search, was the limit. efConstruction 100: 300k 1.000 at 256 (0.5 ms);
    1M 0.896 at 128, 0.942 at 256, 0.995 at 512 (1.6 ms), 0.995 at 1024 (2.5 ms). Hence
    ``total / 1000``, from 128 up to 1024.
    """
    return max(HNSW_EF_SEARCH, k, min(HNSW_EF_SEARCH_MAX, total // 1000))


def hnsw_params(k: int, excluded: np.ndarray | None, total: int = 0) -> Any:
    """Search parameters: efSearch from :func:`ef_search`, and a selector that hides tombstoned ids."""
    params = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]  # missing from the stubs
    params.efSearch = ef_search(k, total)
    if excluded is not None and excluded.size:
        batch = faiss.IDSelectorBatch(excluded)
        sel = faiss.IDSelectorNot(batch)
        params.sel = sel
        params._keep = (batch, sel)  # SWIG does not keep Python owners alive through the struct
    return params


BUILD_BATCH = 4096  # vectors per step of a build: bounds how long a stop request waits (~1 s on HNSW, 2 cores)

Batches = Iterable[tuple[np.ndarray, np.ndarray]]  # (int64 ids, float32 rows) — a snapshot, read once


class Rebuild:
    """One rebuild of the vector structure, split so that only its first and last steps hold the owner's lock.

    1. *planned* (:meth:`VectorIndex.plan_rebuild`, under the lock): the kind, and a ``source`` of
       (ids, vectors) batches that is a snapshot of that moment (the engine reads SQLite and the
       embedding cache in one read transaction: nothing is re-embedded); from then on the index
       notes every id that changes;
    2. *built* (:meth:`build`, no lock, any thread): the new FAISS structure from the source — the
       slow part (~0.2 ms per vector for HNSW on 2 cores) while searches keep using the old one;
    3. *adopted* (:meth:`VectorIndex.adopt`, under the lock): the ids changed meanwhile are copied
       over from the live index, then the new structure is swapped in (milliseconds).
    """

    def __init__(self, kind: str, reason: str, dimension: int, source: Batches,
                 close: Callable[[], None] = lambda: None) -> None:
        self.kind = kind
        self.reason = reason  # "policy" (flat <-> hnsw) or "compaction" (tombstones)
        self.dimension = dimension
        self.built: Any | None = None  # the new FAISS index once build() succeeded
        self.vectors = 0  # copied so far
        self.seconds = 0.0
        self._source = source
        self._close: Callable[[], None] | None = close

    def build(self, should_stop: Callable[[], bool] = lambda: False,
              on_batch: Callable[[int], None] | None = None) -> bool:
        """Build from the source; True when done, False when ``should_stop`` said so (checked per batch).

        ``on_batch(vectors copied so far)`` runs after every batch, on the calling thread.
        The source is released either way. Pure CPU work: takes no lock.
        """
        t0 = time.perf_counter()
        fresh = new_index(self.kind, self.dimension)
        try:
            for ids, rows in self._source:
                if should_stop():
                    return False
                fresh.add_with_ids(np.ascontiguousarray(rows, dtype=np.float32), np.asarray(ids, dtype=np.int64))
                self.vectors += len(ids)
                if on_batch is not None:
                    on_batch(self.vectors)
        finally:
            self.close()
        if should_stop():
            return False
        self.seconds = time.perf_counter() - t0
        self.built = fresh
        return True

    def close(self) -> None:
        """Release the source (the engine's read transaction); idempotent."""
        close, self._close = self._close, None
        if close is not None:
            close()
