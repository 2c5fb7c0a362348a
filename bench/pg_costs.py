#!/usr/bin/env python3
"""Where a PostgreSQL hybrid search spends its time, on a corpus ``scale.py --keep`` left.

    python bench/pg_costs.py --reuse /work/pg100k --size 100000 [--queries 100] [--model-dir DIR]
                             [--explain 3] [--ab-overlap]

Opens the kept database in-process (as another site: the benchmark's own site lock may
be held), runs ``--queries`` hybrid searches (after 10 warm-ups) and prints:

* CPU per query with precomputed query vectors: this process (memoryd's Python) and the
  cluster's PostgreSQL processes, summed. Unlike latency, barely moved by a busy machine.
* with ``--explain N``: every statement the first N searches sent, with ``EXPLAIN
  (ANALYZE, BUFFERS, SETTINGS)`` run again on its parameters.
* with ``--ab-overlap``: p50 / p90 of the daemon's order (the query is embedded on its own
  thread while the keyword leg runs) against embedding first, interleaved query by query.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import psycopg

from memoryd.indexer.search.query import Query

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import _THINGS, bench_tmp, remove_tree
from _pg import database_dsn, server_dsn
from gen_corpus import _ZH_THINGS
from scale import QUERIES, SyntheticPassages

from memoryd.daemon.work.query_embedding import QueryEmbeddings
from memoryd.indexer.config import Config, EmbeddingConfig, with_overrides
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index


def server_cpu_s(pgdata: str) -> float:
    """User + system seconds of the postmaster whose command line names ``pgdata``, and its children."""
    total = 0.0
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            if proc.info["name"] == "postgres" and pgdata in " ".join(proc.info["cmdline"] or []):
                for p in (proc, *proc.children()):
                    t = p.cpu_times()
                    total += t.user + t.system
        except psutil.Error:
            continue
    return total


def explain(mi: Any, queries: list[str], vectors: list[Any]) -> None:
    """Each statement of each search, then its plan with actual times and buffers."""
    sent: list[tuple[str, Any]] = []
    original = psycopg.Connection.execute

    def recording(self: Any, sql: Any, params: Any = None, **kw: Any) -> Any:
        sent.append((str(sql), params))
        return original(self, sql, params, **kw)

    for query, vec in zip(queries, vectors, strict=True):
        sent.clear()
        psycopg.Connection.execute = recording  # type: ignore[method-assign]
        try:
            mi.query(Query(query, k=8, mode="hybrid", query_vector=lambda v=vec: v))
        finally:
            psycopg.Connection.execute = original  # type: ignore[method-assign]
        print(f"=== {query!r}: {len(sent)} statements")
        with mi.backend.pg.connection() as conn:
            for sql, params in sent:
                print(f"--- {sql[:200]}")
                for (line,) in conn.execute("EXPLAIN (ANALYZE, BUFFERS, SETTINGS) " + sql, params).fetchall():
                    if "Order By: ((embedding)" not in line:  # 384 numbers
                        print("   ", line[:200])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reuse", type=Path, required=True, metavar="DIR", help="what scale.py --keep DIR built")
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--model-dir", type=Path, default=Path("/tmp/memoryd-scale-model"))
    ap.add_argument("--explain", type=int, default=0, metavar="N")
    ap.add_argument("--ab-overlap", action="store_true")
    args = ap.parse_args()
    from memoryd.daemon.logs import configure_logging

    configure_logging("warning", "console")
    embedder = SyntheticPassages(load_embedder(EmbeddingConfig(), args.model_dir))
    base = server_dsn(None, args.reuse)
    dsn = database_dsn(base, f"memoryd_scale_{args.size}")
    tmp = bench_tmp("memoryd-pg-costs-")
    (tmp / "root").mkdir()
    cfg = with_overrides(Config(), roots=[tmp / "root"], data_dir=tmp / "data")
    cfg = dataclasses.replace(cfg, storage=dataclasses.replace(cfg.storage, backend="postgres", dsn=dsn,
                                                               sslmode="disable"))
    mi = open_index(cfg, embedder)
    try:
        rnd = random.Random(1)
        things = _THINGS + _ZH_THINGS
        queries = [rnd.choice(QUERIES).format(t=rnd.choice(things)) + f" {i}" for i in range(args.queries + 10)]
        vectors = [embedder.embed_query(q) for q in queries]
        pgdata = str(args.reuse / "pg")
        took: list[float] = []
        cpu0 = (0.0, 0.0)
        for i, (query, vec) in enumerate(zip(queries, vectors, strict=True)):
            if i == 10:
                cpu0 = (time.process_time(), server_cpu_s(pgdata))
            t0 = time.perf_counter()
            mi.query(Query(query, k=8, mode="hybrid", query_vector=lambda v=vec: v))
            if i >= 10:
                took.append((time.perf_counter() - t0) * 1000)
        n = len(took)
        client, server = (time.process_time() - cpu0[0]) * 1000 / n, (server_cpu_s(pgdata) - cpu0[1]) * 1000 / n
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        print(f"hybrid, query vector given: p50 {statistics.median(took):.2f} ms; CPU per query: memoryd "
              f"{client:.2f} ms, PostgreSQL {server:.2f} ms (load average {load})")
        if args.ab_overlap:
            ab_overlap(mi, embedder, queries)
        if args.explain:
            explain(mi, queries[10:10 + args.explain], vectors[10:10 + args.explain])
    finally:
        mi.close()
        remove_tree(tmp)
    return 0


def ab_overlap(mi: Any, embedder: Any, queries: list[str]) -> None:
    """Embedding on a thread while the keyword leg runs (the daemon's order) vs embedding first."""
    pool = QueryEmbeddings(embedder)
    took: dict[str, list[float]] = {"embedding meanwhile": [], "embedding first": []}
    try:
        for i, query in enumerate(queries):
            for mode in (list(took) if i % 2 else list(took)[::-1]):
                t0 = time.perf_counter()
                mi.query(Query(query, k=8, mode="hybrid",
                          query_vector=pool.start(query) if mode == "embedding meanwhile" else None))
                if i >= 10:
                    took[mode].append((time.perf_counter() - t0) * 1000)
    finally:
        pool.close()
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(" | ".join(f"{m}: p50 {statistics.median(v):.2f} p90 {statistics.quantiles(v, n=10)[-1]:.2f} ms"
                     for m, v in took.items()), f"(load average {load})")


if __name__ == "__main__":
    sys.exit(main())
