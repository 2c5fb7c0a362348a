#!/usr/bin/env python3
"""Two sites writing one PostgreSQL database at once: what keeping BM25's counts in every write costs.

    python bench/pg_writers.py [--chunks 3000] [--dsn DSN]

Every write transaction ends by adding its change to the shared counts (``memoryd_terms``,
``memoryd_totals``; docs/postgres.md, "Schema 3"), so two daemons writing at the same moment
queue on the rows of the words both touched, until the first one commits. This measures it:
each of two sites indexes its own copy of a ``gen_corpus.py`` folder (different seeds: other
files, the same vocabulary, so nearly every write touches common words), first one site alone,
then both at once on two threads, each with its own connection pool, as two daemons would
have. Embeddings come from the deterministic hash embedder (no model): only the database
path is timed. Prints a table, then one JSON line; ``overlap`` is the sequential time of both
over the concurrent time (2.0: no waiting at all; 1.0: fully serialised), beside the same
ratio for a plain CPU-bound reference on this machine's two cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import bench_tmp, print_table, remove_tree
from _pg import fresh_database, server_dsn, stop_servers
from gen_corpus import generate

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.config import Config, with_overrides
from memoryd.indexer.embedding.hash_embedder import HashEmbedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile

FILTER = PathFilter(("*.md",), ())


def site(tmp: Path, name: str, dsn: str) -> tuple[Any, Path]:
    root, data = tmp / name / "root", tmp / name / "data"
    cfg = with_overrides(Config(), roots=[root], data_dir=data)
    cfg = dataclasses.replace(cfg, storage=dataclasses.replace(cfg.storage, backend="postgres", dsn=dsn,
                                                               sslmode="disable", site=name))
    return open_index(cfg, HashEmbedder(384)), root


def index_all(idx: Any, root: Path) -> float:
    t0 = time.perf_counter()
    reconcile(idx, [root], FILTER)
    return time.perf_counter() - t0


def reference_overlap() -> float:
    """The same CPU-bound loop twice, one after the other, over twice at once in two processes: this
    machine's own ceiling for doing two things at once (its two cores, shared with its neighbours)."""
    import multiprocessing as mp

    def spin() -> None:
        x = 0
        for i in range(3_000_000):
            x += i

    t0 = time.perf_counter()
    spin()
    spin()
    seq = time.perf_counter() - t0
    procs = [mp.Process(target=spin) for _ in range(2)]
    t0 = time.perf_counter()
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return seq / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=3000, help="chunks per site")
    ap.add_argument("--dsn", default=None)
    args = ap.parse_args()
    from memoryd.daemon.logs import configure_logging

    configure_logging("warning", "console")
    tmp = bench_tmp("memoryd-pg-writers-")
    try:
        base = server_dsn(args.dsn, tmp)
        for name, seed in (("alone", 1), ("a", 2), ("b", 3)):
            generate(tmp / name / "root", args.chunks, seed)
        alone, root = site(tmp, "alone", fresh_database(base, "memoryd_writers_alone"))
        t_alone = index_all(alone, root)
        alone.close()
        dsn = fresh_database(base, "memoryd_writers_two")
        (a, root_a), (b, root_b) = site(tmp, "a", dsn), site(tmp, "b", dsn)
        took: dict[str, float] = {}
        threads = [threading.Thread(target=lambda i=i, r=r, n=n: took.__setitem__(n, index_all(i, r)))
                   for i, r, n in ((a, root_a, "a"), (b, root_b, "b"))]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        t_both = time.perf_counter() - t0
        chunks = a.status().storage.to_json()["all_chunks"]
        a.close()
        b.close()
        ref = reference_overlap()
        result = {"chunks_per_site": args.chunks, "chunks_both": chunks, "one_site_alone_s": round(t_alone, 2),
                  "two_sites_at_once_s": round(t_both, 2), "site_a_s": round(took["a"], 2),
                  "site_b_s": round(took["b"], 2), "overlap": round(2 * t_alone / t_both, 2),
                  "cpu_reference_overlap": round(ref, 2)}
        print_table(["measure", "value"], [[k, v] for k, v in result.items()])
        print(json.dumps(result))
        return 0
    finally:
        stop_servers()
        remove_tree(tmp)


if __name__ == "__main__":
    sys.exit(main())
