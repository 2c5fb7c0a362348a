"""Query embeddings started ahead of the keyword leg give the same results as inline ones."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.daemon.work.query_embedding import QueryEmbeddings
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.query import Query
from tests.helpers import make_config


def test_a_vector_computed_on_another_thread_ranks_like_an_inline_one(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.md").write_text("# A\n\n- The deploy script runs at night.\n- Backups go to the cold store.\n")
    (root / "b.md").write_text("# B\n\n- Alice owns the billing export.\n")
    cfg = make_config(root, tmp_path / "data")
    idx = open_index(cfg, load_embedder(cfg.embedding, cfg.data_dir))
    pool = QueryEmbeddings(idx.embedder)
    try:
        reconcile(idx, [root], PathFilter(("*.md",), ()))
        threads: list[str] = []

        def embed(q: str) -> Any:
            threads.append(threading.current_thread().name)
            return idx.embedder.embed_query(q)

        pool._embedder = type("E", (), {"embed_query": staticmethod(embed)})()  # record the thread
        for query in ("who owns billing", "when does the deploy run", "cold store"):
            ahead = idx.query(Query(query, query_vector=pool.start(query))).to_json()
            inline = idx.query(Query(query)).to_json()
            assert [(h["path"], h["start_line"], h["score"]) for h in ahead["hits"]] == \
                [(h["path"], h["start_line"], h["score"]) for h in inline["hits"]]
        assert threads and all(t.startswith("memoryd-query-embed") for t in threads)
    finally:
        pool.close()
        idx.close()
    assert pool.start("after close") is None  # a stopping daemon falls back to inline embedding
