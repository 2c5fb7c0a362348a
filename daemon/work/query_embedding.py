"""Query embeddings started ahead, so a search's keyword leg runs while the model works.

A hybrid search spends ~9 ms in the model and ~2-4 ms in SQLite (the keyword
leg, which releases the GIL). :class:`QueryEmbeddings` starts the embedding on
one of its threads as soon as a request arrives and hands
:class:`~memoryd.indexer.search.query.Query` a ``query_vector`` callable that
waits for it; the query pipeline calls it only after the keyword leg. The model
session is shared and thread-safe; these threads never touch the index.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from memoryd.indexer.types import Embedder

WORKERS = 2  # concurrent queries beyond this queue for the model, which is busy with them anyway


class QueryEmbeddings:
    def __init__(self, embedder: Embedder, workers: int = WORKERS) -> None:
        self._embedder = embedder
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memoryd-query-embed")

    def start(self, query: str) -> Callable[[], Any] | None:
        """A callable returning ``query``'s vector (raising what the model raised); None once closed,
        in which case the searcher embeds the query itself."""
        try:
            future = self._pool.submit(self._embedder.embed_query, query)
        except RuntimeError:  # shut down: the daemon is stopping
            return None
        return future.result

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
