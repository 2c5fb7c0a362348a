"""The FAISS side of the index: vectors keyed by chunk id.

This is a derived structure. The SQLite chunk table plus the embedding cache
can always rebuild it without embedding anything (:func:`rebuild`), and on
open the index is checked against the chunk table (:meth:`VectorIndex.sync`),
so a stale snapshot after a crash, or a corrupt file, costs a repair, never a
wrong answer. Snapshots are written atomically (temp file, fsync, rename).

Inner product on L2-normalised vectors = cosine similarity. The index is an
``IndexIDMap2`` over ``IndexFlatIP`` (exact) or ``IndexHNSWFlat`` (approximate,
for large corpora); :mod:`memoryd.indexer.storage.embedded.ann` holds that policy. ``reconstruct`` works
on both, so hybrid search scores keyword-only candidates by their vector too
and a switch between kinds is rebuilt from the index's own vectors.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import faiss
import numpy as np
import structlog

from memoryd.indexer.atomic import DATA_TEMP_SUFFIX, atomic_write_bytes
from memoryd.indexer.errors import StoreError
from memoryd.indexer.storage.embedded import ann

if TYPE_CHECKING:
    from memoryd.indexer.types import FloatArray

log = structlog.get_logger(__name__)

REBUILD_BATCH = 65_536  # vectors copied per step when switching kinds (~100 MB at 384 dims)


@contextlib.contextmanager
def one_openmp_thread() -> Iterator[None]:
    """Run the block's FAISS calls on the calling thread alone, then restore that thread's setting.

    One query is one thread's work: FAISS opens an OpenMP team for it anyway, and when the team's
    threads are done they spin on a core for ~4 ms of CPU per search (measured on 500 vectors: 0.05 ms
    of search, 4 ms of process CPU), the cores the next query's embedding needs. OpenMP's thread count
    is per thread: ``faiss.omp_set_num_threads(1)`` on the daemon's main thread never reached the
    connection threads that search, so it is set here, around the search, on whichever thread runs it
    (restored after: a build on the same thread keeps its cores)."""
    before = faiss.omp_get_max_threads()
    if before == 1:
        yield
        return
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)


class VectorIndex:
    """A FAISS ``IndexIDMap2`` (flat or HNSW) with atomic persistence and a dirty flag.

    On HNSW, removed ids become tombstones (hidden from every read, dropped at the
    next rebuild). Not thread-safe: callers serialise writes against searches.

    ``auto_rebuild`` (default) rebuilds inline, in the writing call, whenever the policy
    or the tombstones ask for it. With it off, writes never rebuild: :meth:`wanted` says
    what is due and the owner runs it as a background :class:`~memoryd.indexer.storage.embedded.ann.Rebuild`.
    """

    def __init__(self, dimension: int, index: Any | None = None, tombstones: Iterable[int] = ()) -> None:
        self.dimension = dimension
        self._index = index if index is not None else ann.new_index("flat", dimension)
        self._tomb: set[int] = {int(i) for i in tombstones}
        self._policy: tuple[int, str] | None = None  # (threshold, index_type) once maybe_switch was called
        self._kind = ann.kind_of(self._index)
        # HNSW search params by (k, efSearch): the tombstone selector is costly to build.
        self._params: dict[tuple[int, int], Any] = {}
        self.dirty = False
        self.auto_rebuild = True
        self._owner: Any = None
        self._pending: ann.Rebuild | None = None  # the background rebuild planned and not yet adopted
        self._journal: set[int] = set()  # ids written since it was planned

    @property
    def size(self) -> int:
        """Live vectors (tombstones excluded)."""
        return int(self._index.ntotal) - len(self._tomb)

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def tombstones(self) -> int:
        return len(self._tomb)

    @property
    def rebuilding(self) -> str | None:
        """The kind a planned background rebuild will produce, or None."""
        return self._pending.kind if self._pending is not None else None

    def _all_ids(self) -> np.ndarray:
        return faiss.vector_to_array(self._index.id_map).astype(np.int64)

    def _tomb_array(self) -> np.ndarray:
        return np.fromiter(self._tomb, dtype=np.int64, count=len(self._tomb))

    def ids(self) -> np.ndarray:
        have = self._all_ids()
        return have[~np.isin(have, self._tomb_array())] if self._tomb else have

    # -- writes ---------------------------------------------------------------

    def add(self, ids: Iterable[int], vectors: FloatArray) -> None:
        id_arr = np.fromiter(ids, dtype=np.int64)
        if id_arr.size == 0:
            return
        vec = np.ascontiguousarray(vectors, dtype=np.float32).reshape(id_arr.size, self.dimension)
        if self._tomb and not self._tomb.isdisjoint(id_arr.tolist()):
            self._retire(self._tomb.intersection(id_arr.tolist()))
        self._index.add_with_ids(vec, id_arr)
        self.dirty = True
        if self._pending is not None:
            self._journal.update(id_arr.tolist())
        self._apply_policy()

    def remove(self, ids: Iterable[int]) -> int:
        id_arr = np.fromiter(ids, dtype=np.int64)
        if id_arr.size == 0:
            return 0
        if self.kind == "flat":
            removed = int(self._index.remove_ids(faiss.IDSelectorBatch(id_arr)))
        else:
            present = id_arr[np.isin(id_arr, self._all_ids())].tolist()
            fresh = set(present) - self._tomb
            self._tomb |= fresh
            self._params.clear()
            removed = len(fresh)
            if self.auto_rebuild and ann.needs_compaction(len(self._tomb), int(self._index.ntotal)):
                self._rebuild("hnsw")
        self.dirty = self.dirty or removed > 0
        if self._pending is not None:
            self._journal.update(id_arr.tolist())
        if removed:
            self._apply_policy()
        return removed

    def _retire(self, reused: set[int]) -> None:
        """Rename the dead HNSW nodes of ids about to be re-added to unique negative ids.

        SQLite reuses the highest chunk id after a delete, so a tombstoned id coming back
        is common (editing the newest file). Renaming the old node (an O(n) copy of the id
        map, ~1 ms at 100k) keeps it hidden without a graph rebuild; searches drop ids < 0.
        """
        id_map = self._all_ids()
        sentinel = min(min(self._tomb), 0) - 1
        for chunk_id in sorted(reused):
            id_map[id_map == chunk_id] = sentinel
            self._tomb.discard(chunk_id)
            self._tomb.add(sentinel)
            sentinel -= 1
        faiss.copy_array_to_vector(id_map, self._index.id_map)
        self._params.clear()

    def maybe_switch(self, threshold: int, index_type: str = "auto") -> bool:
        """Adopt the policy (kept for later adds/removes) and rebuild now if it wants another kind.

        ``index_type`` is "auto" (HNSW from ``threshold`` live vectors), "flat" or "hnsw";
        raises ConfigError otherwise. Returns True if the index was rebuilt. The rebuild
        reads the vectors out of this index (no re-embedding); for HNSW it costs roughly
        0.3 ms per vector on 2 cores, done by the calling thread.
        """
        self.set_policy(threshold, index_type)
        return self._apply_policy(force=True)

    def set_policy(self, threshold: int, index_type: str = "auto") -> None:
        """Adopt the policy without rebuilding now; raises ConfigError for a bad ``index_type``."""
        ann.target_kind(self.size, self.kind, threshold, index_type)  # validate before storing
        self._policy = (threshold, index_type)

    def wanted(self) -> tuple[str, str] | None:
        """(kind, reason) of the rebuild due now — reason "policy" or "compaction" — or None."""
        if self._policy is not None:
            want = ann.target_kind(self.size, self.kind, *self._policy)
            if want != self.kind:
                return want, "policy"
        if self.kind == "hnsw" and ann.needs_compaction(len(self._tomb), int(self._index.ntotal)):
            return "hnsw", "compaction"
        return None

    def _apply_policy(self, force: bool = False) -> bool:
        if self._policy is None or not (self.auto_rebuild or force):
            return False
        want = ann.target_kind(self.size, self.kind, *self._policy)
        if want == self.kind:
            return False
        self._rebuild(want)
        return True

    def _rebuild(self, kind: str) -> None:
        """Replace the FAISS index by a fresh ``kind`` holding the live vectors; clears tombstones."""
        t0 = time.perf_counter()
        live = self.ids()
        fresh = ann.new_index(kind, self.dimension)
        for start in range(0, live.size, REBUILD_BATCH):  # bounded extra memory while copying
            part = live[start:start + REBUILD_BATCH]
            fresh.add_with_ids(self._index.reconstruct_batch(part), part)
        old_kind, dropped = self.kind, len(self._tomb)
        self._index, self._owner, self._tomb, self._kind = fresh, None, set(), kind
        self._params.clear()
        self.dirty = True
        log.info("vectors.rebuilt", kind=kind, previous=old_kind, vectors=int(live.size),
                 tombstones_dropped=dropped, seconds=round(time.perf_counter() - t0, 3))

    # -- background rebuilds (see memoryd.indexer.storage.embedded.ann.Rebuild) ---------------------------

    def plan_rebuild(self, source: ann.Batches, close: Callable[[], None] = lambda: None) -> ann.Rebuild | None:
        """Step 1, under the caller's lock: plan the rebuild :meth:`wanted` asks for, from ``source``.

        ``source`` must be a snapshot of this index's live (id, vector) pairs taken now; ids
        written from now on are journaled for :meth:`adopt`. None (``close`` called) when
        nothing is due or a rebuild is already planned.
        """
        want = self.wanted()
        if want is None or self._pending is not None:
            close()
            return None
        self._pending = ann.Rebuild(want[0], want[1], self.dimension, source, close)
        self._journal = set()
        return self._pending

    def adopt(self, job: ann.Rebuild) -> bool:
        """Step 3, under the caller's lock: bring ``job``'s structure up to date and swap it in.

        Ids written since the plan, and any id where the snapshot and this index disagree
        (a vector missing from the cache), are taken from this index, so the result holds
        exactly what this index holds. False, and nothing changes, for a job that is not
        the current plan or did not finish building.
        """
        if job is not self._pending:
            return False
        touched = np.fromiter(self._journal, dtype=np.int64, count=len(self._journal))
        self._pending, self._journal = None, set()
        if job.built is None:
            return False
        t0 = time.perf_counter()
        fresh = VectorIndex(self.dimension, job.built)
        fresh.auto_rebuild = False
        live, built = self.ids(), fresh._all_ids()
        # id arrays are unique: assume_unique avoids numpy's hash-based unique (~150 ms at 100k ids)
        drop = np.union1d(np.intersect1d(touched, built, assume_unique=True), np.setdiff1d(built, live, True))
        need = np.union1d(np.intersect1d(touched, live, assume_unique=True), np.setdiff1d(live, built, True))
        fresh.remove(drop.tolist())
        if need.size:
            fresh.add(need.tolist(), self._index.reconstruct_batch(need))
        previous, dropped = self.kind, len(self._tomb)
        self._index, self._owner, self._tomb, self._kind = fresh._index, None, fresh._tomb, job.kind
        self._params.clear()
        self.dirty = True
        log.info("vectors.rebuilt", kind=job.kind, previous=previous, reason=job.reason, background=True,
                 vectors=self.size, tombstones_dropped=dropped, replayed=int(need.size),
                 build_s=round(job.seconds, 3), swap_ms=round((time.perf_counter() - t0) * 1000, 1))
        return True

    def cancel(self, job: ann.Rebuild) -> None:
        """Forget a planned rebuild (stopped, failed); under the caller's lock. Idempotent."""
        if job is self._pending:
            self._pending, self._journal = None, set()
        job.close()

    # -- reads ----------------------------------------------------------------

    def search(self, query: FloatArray, k: int) -> list[tuple[int, float]]:
        """Top ``k`` (chunk id, cosine) pairs, best first (approximate on HNSW)."""
        if self.size == 0 or k <= 0:
            return []
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(1, self.dimension)
        k = min(k, self.size)
        params = None
        if self.kind == "hnsw":
            key = (k, ann.ef_search(k, self.size))
            params = self._params.get(key)
            if params is None:
                if len(self._params) > 8:
                    self._params.clear()
                params = self._params[key] = ann.hnsw_params(k, self._tomb_array() if self._tomb else None,
                                                             self.size)
        with one_openmp_thread():
            scores, ids = self._index.search(q, k) if params is None else self._index.search(q, k, params=params)
        return [(int(i), float(s)) for i, s in zip(ids[0], scores[0], strict=True) if i >= 0]

    def scores_for(self, query: FloatArray, ids: Iterable[int]) -> dict[int, float]:
        """Cosine of the query with specific chunks (those missing from the index are skipped)."""
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(self.dimension)
        wanted = np.fromiter((i for i in ids if i not in self._tomb), dtype=np.int64)
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

    def nonfinite_ids(self) -> list[int]:
        """Ids whose stored vector holds a NaN or inf (one made every search fail: an older memoryd stored
        a bad server answer). Reads every vector once, a batch at a time (~40 ms at 100k x 384)."""
        inner, ids = faiss.downcast_index(self._index.index), self._all_ids()
        bad: list[int] = []
        for start in range(0, ids.size, REBUILD_BATCH):
            n = min(REBUILD_BATCH, ids.size - start)
            rows = inner.reconstruct_n(start, n)
            bad += ids[start : start + n][~np.isfinite(rows).all(axis=1)].tolist()
        return [i for i in bad if i not in self._tomb]

    def vectors_of(self, ids: Iterable[int]) -> np.ndarray:
        """The stored vectors of ``ids`` as rows (a zero row for an id not in the index)."""
        rows = []
        for i in ids:
            try:
                if int(i) in self._tomb:
                    raise RuntimeError("tombstoned")
                rows.append(self._index.reconstruct(int(i)))
            except RuntimeError:
                rows.append(np.zeros(self.dimension, dtype=np.float32))
        return np.asarray(rows, dtype=np.float32).reshape(-1, self.dimension)

    def save(self, path: Path) -> None:
        """Write a snapshot atomically; clears the dirty flag.

        HNSW tombstones go to ``<path>.tomb`` (written first, removed when empty). A crash
        between the two files leaves a pair that
        :func:`memoryd.indexer.storage.embedded.vector_sync.sync_with_chunks` repairs.
        """
        tomb_path = _tomb_path(path)
        if self._tomb:
            _write_snapshot_file(tomb_path, self._tomb_array().tobytes())
        else:
            with contextlib.suppress(FileNotFoundError):
                tomb_path.unlink()
        _write_snapshot_file(path, faiss.serialize_index(self._index).tobytes())
        self.dirty = False

    @classmethod
    def load(cls, path: Path, dimension: int) -> VectorIndex | None:
        """Read a snapshot; None (with a warning) if it is missing, corrupt or of another dimension."""
        if not path.exists():
            return None
        try:
            # read_index reads the file once; fromfile + deserialize_index held three copies
            # (0.16 vs 0.3-0.5 s at 100k HNSW vectors, and ~3x the peak memory).
            index = faiss.read_index(str(path))
        except (RuntimeError, OSError, ValueError) as exc:
            log.warning("vectors.snapshot_unreadable", path=str(path), error=str(exc))
            return None
        if index.d != dimension or not hasattr(index, "id_map"):
            log.warning("vectors.snapshot_mismatch", path=str(path), dimension=index.d)
            return None
        tomb: np.ndarray = np.zeros(0, dtype=np.int64)
        with contextlib.suppress(FileNotFoundError):
            tomb = np.fromfile(_tomb_path(path), dtype=np.int64)
        loaded = cls(dimension, faiss.downcast_index(index), tomb.tolist())
        loaded._owner = index  # the downcast wrapper does not own the C++ object: keep its owner alive
        if loaded._tomb and loaded.kind == "flat":  # a flat index never has tombstones: apply them
            flat_tomb, loaded._tomb = loaded._tomb, set()
            loaded.remove(flat_tomb)
        if loaded._tomb:  # a stale sidecar may name ids this snapshot never had
            loaded._tomb &= set(loaded._all_ids().tolist())
            loaded._params.clear()
        return loaded


def _tomb_path(path: Path) -> Path:
    return path.with_name(path.name + ".tomb")


def _write_snapshot_file(path: Path, data: bytes) -> None:
    """:func:`~memoryd.indexer.atomic.atomic_write_bytes` (0600: derived from the memories); raises StoreError
    naming ``path`` (chained to the OSError, whose errno tells a full disk)."""
    try:
        atomic_write_bytes(path, data, keep_mode=False, temp_suffix=DATA_TEMP_SUFFIX)
    except OSError as exc:
        raise StoreError(f"cannot write vector snapshot {path}: {exc.strerror or exc}") from exc
