#!/usr/bin/env python3
"""The cost curve: build, warm start, update, search latency, RSS and disk against corpus size.

    python bench/scale.py [--sizes 1000,10000] [--seed 0] [--queries 200] [--index-type auto]
                          [--backend embedded|postgres] [--dsn DSN]
                          [--hnsw-threshold N] [--model-dir /tmp/memoryd-scale-model] [--plot docs/scaling.png]
                          [--keep DIR | --reuse DIR]   (--backend postgres: see bench/scale_pg.py)

Each size runs in a fresh child process (so RSS is that size's own), on a corpus
from ``gen_corpus.py``, through ``MemoryIndex`` in-process (no socket: the daemon
adds ~0.3 ms of JSON and hand-off per call, see ``bench/query_latency.py``).

**Benchmark-only embedding path.** Embedding 100k chunks with e5 on 2 cores takes
hours, so :class:`SyntheticPassages` wraps the real e5 model: ``count_tokens``
(chunking) and ``embed_query`` (every search) are the real model, but
``embed_passages`` returns deterministic unit vectors — a topic centre chosen by
a hash of the text plus noise, so the vectors are clustered like real embeddings
(uniform noise would be a pathological worst case for any ANN index). Its
``model_id`` is ``bench-synthetic-e5`` so these vectors can never mix with real
ones in a cache. Everything else — chunking, SQLite, FTS5, FAISS, hybrid fusion —
runs for real. Build time therefore excludes embedding.

Measured per size: cold build (index every file), warm start (open ``MemoryIndex``
on the existing data = load snapshot + sync with SQLite; the model load is
reported apart), one-file update (append a section to a daily file and re-index
it; median of 20), hybrid search p50/p99 including the real query embedding, the
bare query embedding p50, RSS after searching, disk bytes per chunk, and recall@10
of HNSW against exact search on the stored vectors (queries: perturbed stored
vectors), and a *background* switch to the other kind as the daemon runs it
(build on a thread from the SQLite snapshot, no lock): vector-search p50/p99
while it builds, its build seconds and the swap's milliseconds under the lock.
Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.indexer.search.query import Query

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import _THINGS, REPO, bench_tmp, fmt, percentile, print_table, remove_tree
from gen_corpus import _ZH_THINGS, generate

from memoryd.daemon.work.query_embedding import QueryEmbeddings

N_TOPICS = 512
NOISE = 0.05  # per-dimension std: a chunk's cosine to its topic centre ≈ 0.7, like related e5 passages
QUERIES = ["when does {t} run", "who owns {t}", "why did we decide to change {t}", "{t} timeout",
           "{t} 的配置在哪里", "谁负责{t}"]


class SyntheticPassages:
    """Real e5 tokenizer and query embedding; synthetic clustered passage vectors (see module doc)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.dimension: int = inner.dimension
        self.model_id = "bench-synthetic-e5"
        rng = np.random.default_rng(1234)
        centres = rng.standard_normal((N_TOPICS, self.dimension)).astype(np.float32)
        self._centres = centres / np.linalg.norm(centres, axis=1, keepdims=True)

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return list(self._inner.count_tokens(texts))

    def embed_query(self, text: str) -> Any:
        return self._inner.embed_query(text)

    def embed_passages(self, texts: Sequence[str]) -> Any:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")
            rng = np.random.default_rng(seed)
            v = self._centres[seed % N_TOPICS] + NOISE * rng.standard_normal(self.dimension).astype(np.float32)
            out[row] = v / np.linalg.norm(v)
        return out


def rss_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def ann_recall(vectors: Any, n_queries: int, seed: int) -> tuple[float, float, float, float]:
    """(recall@10, HNSW build s, flat ms/query, HNSW ms/query) on copies of ``vectors``' contents."""
    from memoryd.indexer.storage.embedded.vectors import VectorIndex

    ids = vectors.ids()
    mat = vectors.vectors_of(ids.tolist())
    rng = np.random.default_rng(seed)
    q = mat[rng.integers(0, len(mat), n_queries)] + NOISE * rng.standard_normal((n_queries, mat.shape[1]))
    q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    flat, hnsw = VectorIndex(mat.shape[1]), VectorIndex(mat.shape[1])
    flat.maybe_switch(1, "flat")
    flat.add(ids.tolist(), mat)
    t0 = time.perf_counter()
    hnsw.maybe_switch(1, "hnsw")
    hnsw.add(ids.tolist(), mat)
    build = time.perf_counter() - t0
    timings: list[float] = []
    hits = 0
    for index in (flat, hnsw):
        t0 = time.perf_counter()
        got = [{i for i, _ in index.search(v, 10)} for v in q]
        timings.append((time.perf_counter() - t0) / n_queries * 1000)
        if index is flat:
            exact = got
        else:
            hits = sum(len(a & e) for a, e in zip(got, exact, strict=True))
    return hits / (10 * n_queries), build, timings[0], timings[1]


class _NoQueries:
    dimension = 384


def recall_only(size: int, queries: int, seed: int) -> dict[str, Any]:
    """:func:`ann_recall` on ``size`` of the benchmark's passage vectors, without the SQLite pipeline.

    The vectors are exactly those a full run stores (same generator, texts differ); ~8 min at 1M
    instead of ~70, for checking the ANN parameters at sizes a full run takes an hour to reach.
    """
    from memoryd.indexer.storage.embedded import ann
    from memoryd.indexer.storage.embedded.vectors import VectorIndex

    gen = SyntheticPassages(_NoQueries())
    index = VectorIndex(gen.dimension)
    index.maybe_switch(1, "flat")
    for start in range(0, size, 50_000):
        ids = list(range(start + 1, min(size, start + 50_000) + 1))
        index.add(ids, gen.embed_passages([f"chunk {i} of the synthetic corpus" for i in ids]))
    recall, build_s, flat_ms, hnsw_ms = ann_recall(index, queries, seed)
    return {"chunks": size, "ef_construction": ann.HNSW_EF_CONSTRUCTION, "ef_search": ann.ef_search(10, size),
            "ann_recall_at_10": round(recall, 4), "hnsw_build_s": round(build_s, 1),
            "vector_flat_ms": round(flat_ms, 2), "vector_hnsw_ms": round(hnsw_ms, 2)}


def run_one(size: int, args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement for one corpus size, in this process."""
    if args.backend == "postgres":
        from scale_pg import run_one_pg

        return run_one_pg(size, args)
    from memoryd.indexer.config import Config, EmbeddingConfig, with_overrides
    from memoryd.indexer.embedding import load_embedder
    from memoryd.indexer.engine import open_index

    tmp = bench_tmp("memoryd-scale-")
    try:
        root, data = tmp / "root", tmp / "data"
        info = generate(root, size, args.seed)
        files = sorted(str(p.relative_to(root)) for p in root.rglob("*.md"))
        t0 = time.perf_counter()
        embedder = SyntheticPassages(load_embedder(EmbeddingConfig(), args.model_dir))
        model_s = time.perf_counter() - t0
        cfg = with_overrides(Config(), roots=[root], data_dir=data)
        search = dataclasses.replace(cfg.search, index_type=args.index_type,
                                     hnsw_threshold=args.hnsw_threshold or cfg.search.hnsw_threshold)
        cfg = dataclasses.replace(cfg, search=search)

        t0 = time.perf_counter()
        mi = open_index(cfg, embedder)
        mi.index_files([(root, rel) for rel in files])
        build_s = time.perf_counter() - t0
        mi.close()

        t0 = time.perf_counter()
        mi = open_index(cfg, embedder)
        warm_s = time.perf_counter() - t0
        try:
            update_ms = measure_updates(mi, root, files, args.seed)
            lat = measure_search(mi, embedder, args.queries, args.seed)
            rss = rss_mb()
            recall, hnsw_build_s, flat_ms, hnsw_ms = ann_recall(mi.vectors, args.queries, args.seed)
            chunks, kind = mi.store.counts()[1], mi.vectors.kind
            switch = measure_background_switch(mi, embedder, args.seed)
        finally:
            mi.close()
        disk = dir_bytes(data) - dir_bytes(data / "models") if (data / "models").exists() else dir_bytes(data)
        return {"chunks": chunks, "files": info.files, "index_type": kind, "build_s": round(build_s, 2),
                "model_load_s": round(model_s, 2), "warm_start_s": round(warm_s, 3),
                "update_ms": round(update_ms, 2), "search_p50_ms": round(percentile(lat["hybrid"], 50), 2),
                "search_p99_ms": round(percentile(lat["hybrid"], 99), 2),
                "vector_mode_p50_ms": round(percentile(lat["vector"], 50), 2),
                "keyword_mode_p50_ms": round(percentile(lat["keyword"], 50), 2),
                "query_embed_p50_ms": round(percentile(lat["embed"], 50), 2),
                "rss_mb": round(rss, 1), "disk_bytes_per_chunk": round(disk / max(chunks, 1)),
                "ann_recall_at_10": round(recall, 4), "hnsw_build_s": round(hnsw_build_s, 2),
                "vector_flat_ms": round(flat_ms, 3), "vector_hnsw_ms": round(hnsw_ms, 3), **switch}
    finally:
        remove_tree(tmp)


def measure_updates(mi: Any, root: Path, files: list[str], seed: int, n: int = 20) -> float:
    """Median ms to re-index one edited daily file (its new section's vector is synthetic: ~0 ms)."""
    rnd = random.Random(seed)
    daily = [f for f in files if f.startswith("memory/")] or files
    times = []
    for i in range(n):
        rel = rnd.choice(daily)
        with open(root / rel, "a", encoding="utf-8") as fh:
            fh.write(f"\n## Update {i}\n\n- Learned: {rnd.choice(_THINGS)} changed owner ({i}).\n")
        t0 = time.perf_counter()
        mi.index_files([(root, rel)])
        times.append((time.perf_counter() - t0) * 1000)
    return float(np.median(times))


def measure_background_switch(mi: Any, embedder: SyntheticPassages, seed: int) -> dict[str, Any]:
    """Switch to the other kind as the daemon does, searching (vector mode) on this thread meanwhile."""
    import threading

    target = "hnsw" if mi.vectors.kind == "flat" else "flat"
    mi.vectors.set_policy(mi.cfg.search.hnsw_threshold, target)
    mi.set_background_rebuilds(True)
    job = mi.start_rebuild()
    assert job is not None
    builder = threading.Thread(target=job.build, name="bench-rebuild")
    rnd = random.Random(seed + 2)
    qvecs = [embedder.embed_query(rnd.choice(QUERIES).format(t=rnd.choice(_THINGS))) for _ in range(50)]
    during: list[float] = []
    builder.start()
    while builder.is_alive() or not during:
        t0 = time.perf_counter()
        with mi.lock:  # what a search holds: the vector leg, without the model
            mi.vectors.search(qvecs[len(during) % len(qvecs)], 50)
        during.append((time.perf_counter() - t0) * 1000)
    builder.join()
    t0 = time.perf_counter()
    assert mi.finish_rebuild(job)
    return {"bg_switch_to": target, "bg_build_s": round(job.seconds, 2),
            "bg_swap_ms": round((time.perf_counter() - t0) * 1000, 1), "bg_searches": len(during),
            "bg_search_p50_ms": round(percentile(during, 50), 2), "bg_search_p99_ms": round(percentile(during, 99), 2)}


def query_list(n: int, seed: int) -> list[str]:
    """The ``n`` benchmark queries: English and Chinese templates, each with a number of its own."""
    rnd = random.Random(seed + 1)
    things = _THINGS + _ZH_THINGS
    return [rnd.choice(QUERIES).format(t=rnd.choice(things)) + f" {i}" for i in range(n)]


def measure_search(mi: Any, embedder: SyntheticPassages, n: int, seed: int) -> dict[str, list[float]]:
    """Latencies (ms) of hybrid, vector-only and keyword-only searches and of the bare query embedding.

    Interleaved query by query so all four see the same background load.
    """
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)  # as the daemon runs queries (daemon/app.py): OpenMP spin-up costs ms per query
    queries = query_list(n + 10, seed)
    out: dict[str, list[float]] = {"hybrid": [], "vector": [], "keyword": [], "embed": []}
    # As the daemon searches (daemon/api/read.py): the query's embedding starts on its own thread
    # and the keyword leg runs meanwhile.
    pool = QueryEmbeddings(embedder)
    try:
        for i, query in enumerate(queries):
            for mode in ("hybrid", "vector", "keyword", "embed"):
                t0 = time.perf_counter()
                if mode == "embed":
                    embedder.embed_query(query)
                else:
                    vector = pool.start(query) if mode != "keyword" else None
                    mi.query(Query(query, k=8, mode=mode, query_vector=vector))
                if i >= 10:  # warm-up
                    out[mode].append((time.perf_counter() - t0) * 1000)
    finally:
        pool.close()
    faiss.omp_set_num_threads(threads)  # the builds that follow use every core
    return out


COLUMNS = ["chunks", "index_type", "build_s", "warm_start_s", "update_ms", "search_p50_ms", "search_p99_ms",
           "vector_mode_p50_ms", "keyword_mode_p50_ms", "query_embed_p50_ms",
           "rss_mb", "disk_bytes_per_chunk", "ann_recall_at_10", "vector_flat_ms",
           "vector_hnsw_ms", "hnsw_build_s", "bg_switch_to", "bg_build_s", "bg_swap_ms", "bg_search_p99_ms"]


def plot(results: dict[str, dict[str, Any]], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot", file=sys.stderr)
        return False
    sizes = sorted(results, key=int)
    xs = [results[s]["chunks"] for s in sizes]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for key in ("search_p50_ms", "search_p99_ms", "keyword_mode_p50_ms", "vector_mode_p50_ms", "update_ms"):
        a.plot(xs, [results[s][key] for s in sizes], marker="o", label=key)
    a.set(xscale="log", xlabel="chunks", ylabel="ms", title="latency")
    a.legend()
    b.plot(xs, [results[s]["rss_mb"] for s in sizes], marker="o", label="RSS MB")
    b.set(xscale="log", xlabel="chunks", ylabel="MB", title="memory")
    b.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--index-type", default="auto", choices=["auto", "flat", "hnsw"])
    ap.add_argument("--hnsw-threshold", type=int, default=0, help="0: the config default")
    ap.add_argument("--model-dir", type=Path, default=Path("/tmp/memoryd-scale-model"))
    ap.add_argument("--plot", type=Path, default=REPO / "docs" / "scaling.png")
    ap.add_argument("--merge", type=Path, action="append", default=[], metavar="FILE",
                    help="saved stdout of an earlier run: its sizes join this run's table, plot and JSON "
                         "(sizes measured now win); with --sizes '' nothing is measured")
    ap.add_argument("--recall-only", type=int, metavar="N",
                    help="only HNSW recall@10 vs exact on N benchmark vectors (no indexing pipeline)")
    ap.add_argument("--backend", default="embedded", choices=["embedded", "postgres"],
                    help="postgres: the PostgreSQL + pgvector backend (bench/scale_pg.py)")
    ap.add_argument("--dsn", default=None, help="--backend postgres: the server to use (default: a private one)")
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="--backend postgres: build into DIR (corpus, private server) and keep it there")
    ap.add_argument("--reuse", type=Path, metavar="DIR",
                    help="--backend postgres: measure on the build --keep DIR left, without building")
    ap.add_argument("--shared-buffers", metavar="SIZE",
                    help="--backend postgres, private server: its shared_buffers (default 512MB; ~5 KB per chunk)")
    ap.add_argument("--socket-queries", type=int, default=100, metavar="N",
                    help="--backend postgres: also N hybrid searches over a real daemon's socket (0: skip)")
    ap.add_argument("--reindex", action="store_true",
                    help="with --reuse: a kept database of another memoryd's settings is re-indexed in place")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child mode: one size, JSON on stdout
    args = ap.parse_args(argv)
    if (args.keep or args.reuse) and (args.backend != "postgres" or (args.keep and args.reuse)):
        ap.error("--keep and --reuse: one of them, with --backend postgres")
    if args.recall_only:
        result = recall_only(args.recall_only, args.queries, args.seed)
        print_table(list(result), [[fmt(v, 3) if isinstance(v, float) else v for v in result.values()]])
        print(json.dumps(result))
        return 0
    if args.one:
        from memoryd.daemon.logs import configure_logging

        configure_logging("warning", "console")
        print(json.dumps(run_one(args.one, args)))
        return 0
    results: dict[str, dict[str, Any]] = {}
    for saved in args.merge:
        results.update(json.loads(saved.read_text().strip().splitlines()[-1])["detail"])
    for size in [int(s) for s in args.sizes.split(",") if s]:
        child = [sys.executable, __file__, "--one", str(size), *sys.argv[1:]] if argv is None else \
            [sys.executable, __file__, "--one", str(size), *argv]
        done = subprocess.run(child, capture_output=True, text=True, cwd=REPO)
        if done.returncode != 0:  # report it and keep the sizes already measured
            print(f"size {size}: FAILED (exit {done.returncode}): {done.stderr.strip()[-2000:]}", file=sys.stderr)
            continue
        results[str(size)] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"size {size}: done {json.dumps(results[str(size)])}", file=sys.stderr)
    results = dict(sorted(results.items(), key=lambda kv: int(kv[0])))
    cols = [c for c in COLUMNS if all(c in r for r in results.values())]  # --backend postgres has fewer
    cols += [c for c in ("pg_rss_mb", "socket_p50_ms", "socket_p99_ms", "socket_embed_p50_ms")
             if all(c in r for r in results.values())]
    print_table(["size", *cols], [[s, *(fmt(r[c], 3) if isinstance(r[c], float) else r[c] for c in cols)]
                                  for s, r in results.items()])
    if len(results) > 1 and str(args.plot) not in ("", "."):  # --plot "" : no plot
        plot(results, args.plot)
    keys = ("search_p50_ms", "search_p99_ms", "update_ms", "warm_start_s", "rss_mb", "ann_recall_at_10")
    keys += ("socket_p50_ms", "socket_p99_ms")  # --backend postgres: over a real daemon's socket
    print(json.dumps({"sizes": {s: {k: r[k] for k in keys if k in r} for s, r in results.items()},
                      "detail": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
