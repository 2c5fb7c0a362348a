"""The FAISS side of the index: vectors keyed by chunk id.

This is a derived structure. The SQLite chunk table plus the embedding cache
can always rebuild it without embedding anything (:func:`rebuild`), and on
open the index is checked against the chunk table (:meth:`VectorIndex.sync`),
so a stale snapshot after a crash, or a corrupt file, costs a repair, never a
wrong answer. Snapshots are written atomically (temp file, fsync, rename).

Inner product on L2-normalised vectors = cosine similarity. The index is an
``IndexIDMap2`` over ``IndexFlatIP``: exact search, and ``reconstruct`` lets
hybrid search score keyword-only candidates by their vector too.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import faiss
import numpy as np
import structlog

from indexer.atomic import fsync_dir
from indexer.errors import StoreError

if TYPE_CHECKING:
    from indexer.types import FloatArray

log = structlog.get_logger(__name__)


class VectorIndex:
    """A FAISS ``IndexIDMap2`` with atomic persistence and a dirty flag.

    Not thread-safe: callers serialise writes against searches.
    """

    def __init__(self, dimension: int, index: Any | None = None) -> None:
        self.dimension = dimension
        self._index = index if index is not None else faiss.IndexIDMap2(faiss.IndexFlatIP(dimension))
        self.dirty = False
        self._owner: Any = None

    @property
    def size(self) -> int:
        return int(self._index.ntotal)

    @property
    def kind(self) -> str:
        return "flat"

    def ids(self) -> np.ndarray:
        return faiss.vector_to_array(self._index.id_map).astype(np.int64)

    def add(self, ids: Iterable[int], vectors: FloatArray) -> None:
        id_arr = np.fromiter(ids, dtype=np.int64)
        if id_arr.size == 0:
            return
        vec = np.ascontiguousarray(vectors, dtype=np.float32).reshape(id_arr.size, self.dimension)
        self._index.add_with_ids(vec, id_arr)
        self.dirty = True

    def remove(self, ids: Iterable[int]) -> int:
        id_arr = np.fromiter(ids, dtype=np.int64)
        if id_arr.size == 0:
            return 0
        removed = int(self._index.remove_ids(faiss.IDSelectorBatch(id_arr)))
        self.dirty = self.dirty or removed > 0
        return removed

    def search(self, query: FloatArray, k: int) -> list[tuple[int, float]]:
        """Top ``k`` (chunk id, cosine) pairs, best first."""
        if self.size == 0 or k <= 0:
            return []
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dimension)
        scores, ids = self._index.search(q, min(k, self.size))
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]

    def scores_for(self, query: FloatArray, ids: Iterable[int]) -> dict[int, float]:
        """Cosine of the query with specific chunks (those missing from the index are skipped)."""
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(self.dimension)
        wanted = np.fromiter(ids, dtype=np.int64)
        if wanted.size == 0:
            return {}
        try:
            sims = self._index.reconstruct_batch(wanted) @ q  # one C++ call instead of one per id
        except RuntimeError:  # an id is not in the index (a race with a write): fall back, skipping it
            out: dict[int, float] = {}
            for i in wanted.tolist():
                with contextlib.suppress(RuntimeError):
                    out[i] = float(self._index.reconstruct(i) @ q)
            return out
        return dict(zip(wanted.tolist(), sims.astype(float).tolist(), strict=True))

    def vectors_of(self, ids: Iterable[int]) -> np.ndarray:
        """The stored vectors of ``ids`` as rows (a zero row for an id not in the index)."""
        rows = []
        for i in ids:
            try:
                rows.append(self._index.reconstruct(int(i)))
            except RuntimeError:
                rows.append(np.zeros(self.dimension, dtype=np.float32))
        return np.asarray(rows, dtype=np.float32).reshape(-1, self.dimension)

    def save(self, path: Path) -> None:
        """Write a snapshot atomically; clears the dirty flag."""
        data = faiss.serialize_index(self._index)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            with open(tmp, "wb") as fh:
                data.tofile(fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
            fsync_dir(path.parent)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise StoreError(f"cannot write vector snapshot {path}: {exc.strerror or exc}") from exc
        self.dirty = False

    @classmethod
    def load(cls, path: Path, dimension: int) -> VectorIndex | None:
        """Read a snapshot; None (with a warning) if it is missing, corrupt or of another dimension."""
        if not path.exists():
            return None
        try:
            raw = np.fromfile(path, dtype=np.uint8)
            index = faiss.deserialize_index(raw)
        except (RuntimeError, OSError, ValueError) as exc:
            log.warning("vectors.snapshot_unreadable", path=str(path), error=str(exc))
            return None
        if index.d != dimension or not hasattr(index, "id_map"):
            log.warning("vectors.snapshot_mismatch", path=str(path), dimension=index.d)
            return None
        loaded = cls(dimension, faiss.downcast_index(index))
        loaded._owner = index  # the downcast wrapper does not own the C++ object: keep its owner alive
        return loaded

