"""The vector side of opening an index: load the FAISS snapshot and make it match SQLite.

SQLite (chunks + embedding cache) is the source of truth; ``vectors.faiss`` is
a snapshot that may be missing, stale or from before a crash. Opening it must
never re-embed what the cache holds: missing vectors come from the cache,
extra ones are dropped (so are vectors that are not finite: their chunks count as
missing), and only a vector the cache lost (which should not happen: live vectors
are never evicted) goes back through the model.
Also here: the read snapshot a background rebuild of the structure reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from memoryd.indexer.atomic import remove_stale_temps
from memoryd.indexer.config import SearchConfig
from memoryd.indexer.ingestion.embedtext import embedding_text
from memoryd.indexer.storage.embedded import ann
from memoryd.indexer.storage.embedded.cache import EmbeddingCache
from memoryd.indexer.storage.embedded.store import Store
from memoryd.indexer.storage.embedded.vectors import VectorIndex

log = structlog.get_logger(__name__)

EmbedPassages = Callable[[Sequence[str]], Any]


def open_vectors(path: Path, dimension: int, search: SearchConfig, *, background: bool,
                 read_only: bool) -> VectorIndex:
    """The snapshot at ``path`` (or an empty index), with the structure policy applied.

    ``background``: a due flat/HNSW switch is left to the owner's background
    rebuild instead of running here. A writer (not ``read_only``) first removes
    the temp files a killed snapshot write left.
    """
    if not read_only:
        for tmp in remove_stale_temps(path):
            log.warning("temp.removed", path=str(tmp), reason="left by an interrupted snapshot write")
    vectors = VectorIndex.load(path, dimension) or VectorIndex(dimension)
    vectors.auto_rebuild = not background
    if background:
        vectors.set_policy(search.hnsw_threshold, search.index_type)
    else:
        vectors.maybe_switch(search.hnsw_threshold, search.index_type)
    return vectors


def sync_with_chunks(vectors: VectorIndex, store: Store, cache: EmbeddingCache, embed: EmbedPassages, *,
                     read_only: bool, defer: bool = False) -> list[int]:
    """Make ``vectors`` hold exactly the chunk table's ids (the repair after a crash).

    A chunk whose vector is in neither the snapshot nor the cache is embedded here,
    unless ``defer``: then its id is returned, for the caller's backlog. That is the
    normal state after keyword-first indexing was interrupted (its chunks are committed
    before their vectors), so only the unfinished part is embedded again.
    """
    want_ids = store.chunk_ids()
    poisoned = vectors.nonfinite_ids()
    if poisoned:  # never searched with: their chunks get a vector again (the cache reads them as misses too)
        vectors.remove(poisoned)
        log.warning("vectors.nonfinite_dropped", chunks=len(poisoned), action="re-embedded (or pending)")
    have = vectors.ids()
    extra = np.setdiff1d(have, want_ids, assume_unique=True)
    missing = np.setdiff1d(want_ids, have, assume_unique=True).tolist()
    if extra.size:
        vectors.remove(extra.tolist())
    if missing:
        want = store.embed_keys(missing)
        missing = [i for i in missing if i in want]
        found = cache.get_many([want[i] for i in missing], count=False)
        ok = [i for i in missing if want[i] in found]
        if ok:
            vectors.add(ok, np.stack([found[want[i]] for i in ok]))
        lost = [i for i in missing if want[i] not in found]
        if lost and defer:
            log.info("vectors.repaired", removed=int(extra.size), added=len(ok), total=vectors.size,
                     pending=len(lost))
            return lost
        if lost:
            _reembed(vectors, store, cache, embed, {i: want[i] for i in lost}, read_only)
    if extra.size or missing:
        log.info("vectors.repaired", removed=int(extra.size), added=len(missing), total=vectors.size)
    return []


def _reembed(vectors: VectorIndex, store: Store, cache: EmbeddingCache, embed: EmbedPassages,
             keys: dict[int, bytes], read_only: bool) -> None:
    rows = store.chunks(list(keys))
    present = [i for i in keys if i in rows]
    if not present:
        return
    mat = embed([embedding_text(rows[i].heading, rows[i].text) for i in present])
    vectors.add(present, mat)
    if not read_only:
        with store.transaction() as t:
            cache.put_many(t, {keys[i]: v for i, v in zip(present, mat, strict=True)})
    log.warning("vectors.reembedded", chunks=len(present))


def rebuild_source(store: Store, dimension: int) -> tuple[ann.Batches, Callable[[], None]]:
    """(id, vector) batches of every chunk as of now, read lazily from one read transaction.

    Call it under the index lock: the transaction starts here, so it matches the
    in-memory index exactly. A chunk whose vector left the cache is simply absent
    (``VectorIndex.adopt`` copies it from the live index).
    """
    conn = store.reader()
    conn.execute("BEGIN")
    conn.execute("SELECT 1 FROM chunks LIMIT 1").fetchone()  # the first read pins the snapshot
    width = 4 * dimension

    def batches() -> Iterator[tuple[np.ndarray, np.ndarray]]:
        try:
            cur = conn.execute("SELECT c.id, e.vector FROM chunks c JOIN embed_cache e"
                               " ON e.key = c.embed_key ORDER BY c.id")
            while part := cur.fetchmany(ann.BUILD_BATCH):
                rows = [r for r in part if len(r[1]) == width]
                if rows:
                    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
                    mat = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
                    ok = np.isfinite(mat).all(axis=1)  # a poisoned cache row is no vector (cache.usable)
                    yield (ids, mat) if ok.all() else (ids[ok], mat[ok])
        finally:
            conn.close()  # ends the read transaction as soon as the build has read everything

    return batches(), conn.close
