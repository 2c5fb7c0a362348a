"""Giving vectors to chunks that were committed without one (the backlog of keyword-first indexing).

The work runs on the index's writing thread, a bounded step at a time, so that the
owner can put user-touched work (a save, ``reindex``) in between: each step takes
the most urgent entries of the :class:`~memoryd.indexer.fill.backlog.VectorBacklog`,
reads their text from the store, takes what the embedding cache already holds, embeds
the rest in length-sorted slices (urgent ones first), and makes each slice durable (cache) and visible
(vector index) before the next. A step asked to yield stops between slices and puts
the rest back, so a crash or a yield never loses a finished slice.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memoryd.indexer.fill.backlog import Priority, VectorBacklog
from memoryd.indexer.ingestion.embedtext import embedding_text
from memoryd.indexer.storage.base import CacheStore, ChunkStore, VectorStore
from memoryd.indexer.types import Embedder


@dataclass
class Parts:
    """The pieces of a :class:`~memoryd.indexer.engine.MemoryIndex` a backlog step uses."""

    store: ChunkStore
    cache: CacheStore
    vectors: VectorStore
    lock: threading.Lock
    backlog: VectorBacklog
    persist: Callable[[dict[bytes, Any]], None]


@dataclass
class StepResult:
    done: int = 0  # chunks that got their vector
    embedded: int = 0  # of which computed by the model (the rest came from the cache)


def run_step(parts: Parts, entries: Sequence[Priority], embedder: Embedder, slice_size: int,
             should_yield: Callable[[], bool] | None = None) -> StepResult:
    """Give ``entries`` (taken from the backlog) their vectors; unfinished ones go back on a yield."""
    unfinished = {e[2]: e for e in entries}
    try:
        return _step(parts, entries, embedder, slice_size, should_yield, unfinished)
    finally:
        parts.backlog.restore(unfinished.values())  # an error (or a yield) loses no entry


def _step(parts: Parts, entries: Sequence[Priority], embedder: Embedder, slice_size: int,
          should_yield: Callable[[], bool] | None, unfinished: dict[int, Priority]) -> StepResult:
    result = StepResult()
    ids = [e[2] for e in entries]
    keys = parts.store.embed_keys(ids)  # a chunk deleted meanwhile is simply absent
    live = [e for e in entries if e[2] in keys]
    gone = [unfinished.pop(e[2])[2] for e in entries if e[2] not in keys]
    found = parts.cache.get_many([keys[e[2]] for e in live], count=False)  # counted when committed
    result.done += _publish(parts, [e for e in live if keys[e[2]] in found], keys, found, unfinished)
    todo = [e for e in live if keys[e[2]] not in found]
    if not todo:
        parts.backlog.finish(gone, embedded=False)
        return result
    rows = parts.store.chunks([e[2] for e in todo])
    texts = {e[2]: embedding_text(rows[e[2]].heading, rows[e[2]].text) for e in todo if e[2] in rows}
    gone += [unfinished.pop(e[2])[2] for e in todo if e[2] not in texts]
    parts.backlog.finish(gone, embedded=False)
    # Length-sorted slices waste no padding; the urgent tier (a file just saved) still goes first.
    todo = sorted((e for e in todo if e[2] in texts), key=lambda e: (e[0], len(texts[e[2]])))
    for start in range(0, len(todo), slice_size):
        if start and should_yield is not None and should_yield():
            break
        part = todo[start : start + slice_size]
        unique = {keys[e[2]]: texts[e[2]] for e in part}
        mat = np.asarray(embedder.embed_passages(list(unique.values())), dtype=np.float32)
        fresh = dict(zip(unique, mat, strict=True))
        parts.persist(fresh)
        result.embedded += len(fresh)
        result.done += _publish(parts, part, keys, fresh, unfinished)
    return result


def _publish(parts: Parts, entries: Sequence[Priority], keys: dict[int, bytes], vectors: dict[bytes, Any],
             unfinished: dict[int, Priority]) -> int:
    """Add the vectors of ``entries`` to the index (searchable from now on); returns how many."""
    if not entries:
        return 0
    with parts.lock:
        parts.vectors.add([e[2] for e in entries], np.stack([vectors[keys[e[2]]] for e in entries]))
    for e in entries:
        unfinished.pop(e[2])
    parts.backlog.finish([e[2] for e in entries])
    return len(entries)
