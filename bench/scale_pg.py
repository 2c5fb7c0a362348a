"""``bench/scale.py --backend postgres``: the same measurements on the PostgreSQL + pgvector backend.

One size per child process, like the embedded run: the corpus of ``gen_corpus.py``,
the same synthetic passage vectors and real query embeddings (see ``scale.py``),
through ``open_index`` (the PostgreSQL backend) in-process, against the server of ``--dsn`` or a private
one (``bench/_pg.py``) on the same machine. Measured: cold build, warm start (open
= migrations check + identity + pool), one-file update (median of 20), hybrid /
vector / keyword search p50 and p99, this process's RSS and PostgreSQL's, database
bytes per chunk, and recall@10 of pgvector's HNSW against exact search on the
stored vectors (queries: perturbed stored vectors, as for FAISS).

A 100k build takes tens of minutes, so ``--keep DIR`` builds into ``DIR`` (the corpus
under ``DIR/<size>/``, the private server's cluster under ``DIR/pg``, stopped at exit)
and keeps it, and ``--reuse DIR`` opens that database and measures only the rest (its
build time is the one recorded at ``--keep``). A kept database made by a memoryd with other
settings (a version bump of the chunker or the text rules) is refused with what to do:
``--reuse DIR --reindex`` re-indexes it in place (vectors from its cache), or build it again.
Each run's update measurement appends 20 sections to the kept corpus, so a reused corpus grows by 20 chunks per run.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from _common import bench_tmp, percentile, remove_tree
from gen_corpus import generate

EXTRA_COLUMNS = ["pg_rss_mb", "socket_p50_ms", "socket_p99_ms", "socket_embed_p50_ms"]


def run_one_pg(size: int, args: Any) -> dict[str, Any]:
    from _pg import database_dsn, fresh_database, postgres_rss_mb, server_dsn, stop_servers
    from scale import NOISE, SyntheticPassages, measure_search, measure_updates, rss_mb

    from memoryd.indexer.config import Config, EmbeddingConfig, with_overrides
    from memoryd.indexer.embedding import load_embedder
    from memoryd.indexer.engine import open_index

    keep = args.keep or args.reuse
    tmp = Path(keep) if keep else bench_tmp("memoryd-scale-pg-")
    try:
        root, data = tmp / str(size) / "root", tmp / str(size) / "data"
        built = tmp / str(size) / "built.json"
        if args.reuse and not built.exists():
            raise SystemExit(f"--reuse {args.reuse}: no finished {size}-chunk build there ({built} is missing)")
        embedder = SyntheticPassages(load_embedder(EmbeddingConfig(), args.model_dir))
        base = server_dsn(args.dsn, tmp, args.shared_buffers)
        name = f"memoryd_scale_{size}"
        dsn = fresh_database(base, name) if not args.reuse else database_dsn(base, name)
        cfg = with_overrides(Config(), roots=[root], data_dir=data)
        cfg = dataclasses.replace(cfg, storage=dataclasses.replace(cfg.storage, backend="postgres", dsn=dsn,
                                                                   sslmode="disable"))
        if args.reuse:
            info = json.loads(built.read_text())
        else:
            remove_tree(tmp / str(size))  # a --keep build starts from scratch, even over an unfinished one
            info = {"files": generate(root, size, args.seed).files}
            files = sorted(str(p.relative_to(root)) for p in root.rglob("*.md"))
            t0 = time.perf_counter()
            mi = open_index(cfg, embedder)
            mi.index_files([(root, rel) for rel in files])
            info["build_s"] = round(time.perf_counter() - t0, 2)
            mi.close()
            if keep:
                built.write_text(json.dumps(info))
        files = sorted(str(p.relative_to(root)) for p in root.rglob("*.md"))

        if args.reuse:
            reindex_kept(cfg, embedder, root, files, args)
        t0 = time.perf_counter()
        mi = open_index(cfg, embedder)
        warm_s = time.perf_counter() - t0
        try:
            update_ms = measure_updates(mi, root, files, args.seed)
            lat = measure_search(mi, embedder, args.queries, args.seed)
            rss = rss_mb()
            recall, hnsw_ms = pg_recall(mi, args.queries, args.seed, NOISE)
            with mi.backend.pg.connection() as c:  # every site's (a pg_replicate.py corpus has several)
                row = c.execute("SELECT pg_database_size(current_database()), count(*) FROM memoryd_chunks").fetchone()
            disk, chunks = (int(row[0]), int(row[1])) if row else (0, 0)
            pg_rss = postgres_rss_mb(base)
        finally:
            mi.close()
        sock = measure_socket(tmp / str(size), root, data, dsn, embedder, args) if args.socket_queries else {}
        return {"chunks": chunks, "files": info["files"], "index_type": "pgvector-hnsw", "build_s": info["build_s"],
                "warm_start_s": round(warm_s, 3), "update_ms": round(update_ms, 2),
                "search_p50_ms": round(percentile(lat["hybrid"], 50), 2),
                "search_p99_ms": round(percentile(lat["hybrid"], 99), 2),
                "vector_mode_p50_ms": round(percentile(lat["vector"], 50), 2),
                "keyword_mode_p50_ms": round(percentile(lat["keyword"], 50), 2),
                "query_embed_p50_ms": round(percentile(lat["embed"], 50), 2),
                "rss_mb": round(rss, 1), "pg_rss_mb": round(pg_rss, 1),
                "disk_bytes_per_chunk": round(disk / max(chunks, 1)), "ann_recall_at_10": round(recall, 4),
                "vector_hnsw_ms": round(hnsw_ms, 3), **sock}
    finally:
        if not keep:
            stop_servers()
            remove_tree(tmp)


def measure_socket(work: Path, root: Path, data: Path, dsn: str, embedder: Any, args: Any) -> dict[str, Any]:
    """Hybrid search over the real socket of a real daemon on the same database (the target's terms).

    The daemon is ``memoryd run`` with the same synthetic passage vectors (``_synthetic_daemon.py``),
    started on the same root, data dir (so the same site) and database, and asked once it is idle
    (its start-up reconcile finds nothing to do). Its queries are :func:`scale.measure_search`'s,
    one connection, one after another; the bare query embedding of each, in this process, alternates
    with them as the reference.
    """
    from _common import Daemon
    from scale import query_list

    toml = work / "socket-bench.toml"
    toml.write_text(f'[storage]\nbackend = "postgres"\ndsn = "{dsn}"\nsslmode = "disable"\n', encoding="utf-8")
    daemon = Daemon(work, [root], data, toml, name="socket-bench")
    daemon.argv[1:3] = [str(Path(__file__).resolve().parent / "_synthetic_daemon.py"), str(args.model_dir)]
    lat: dict[str, list[float]] = {"client": [], "took": [], "embed": []}
    with daemon:
        daemon.wait_idle(timeout=600)
        with daemon.client() as c:
            for i, query in enumerate(query_list(args.socket_queries + 10, args.seed)):
                t0 = time.perf_counter()
                took = float(c.call("search", {"query": query, "mode": "hybrid", "k": 8})["took_ms"])
                client = (time.perf_counter() - t0) * 1000
                t0 = time.perf_counter()
                embedder.embed_query(query)
                if i >= 10:  # warm-up
                    lat["client"].append(client)
                    lat["took"].append(took)
                    lat["embed"].append((time.perf_counter() - t0) * 1000)
    return {"socket_p50_ms": round(percentile(lat["client"], 50), 2),
            "socket_p99_ms": round(percentile(lat["client"], 99), 2),
            "socket_took_p50_ms": round(percentile(lat["took"], 50), 2),
            "socket_embed_p50_ms": round(percentile(lat["embed"], 50), 2)}


def reindex_kept(cfg: Any, embedder: Any, root: Path, files: list[str], args: Any) -> None:
    """A kept database of another memoryd's settings: re-index it with ``--reindex``, else say what to do."""
    from memoryd.indexer.engine import open_index
    from memoryd.indexer.storage.postgres.identity import IdentityMismatchError

    try:
        mi = open_index(cfg, embedder, reindex=bool(getattr(args, "reindex", False)))
    except IdentityMismatchError as exc:
        raise SystemExit(f"--reuse {args.reuse}: {str(exc).split(';')[0]}; add --reindex to re-index it in place"
                         f" (every chunk again, vectors from its cache), or build it again with --keep") from None
    try:
        if mi.backend.reset is not None:
            mi.index_files([(root, rel) for rel in files])
    finally:
        mi.close()


def pg_recall(mi: Any, n_queries: int, seed: int, noise: float) -> tuple[float, float]:
    """(recall@10 of the HNSW index vs exact, HNSW ms/query) on perturbed stored vectors."""
    with mi.backend.pg.connection() as c:
        rows = c.execute("SELECT id, embedding FROM memoryd_chunks ORDER BY id").fetchall()
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    mat = np.stack([np.asarray(r[1].to_numpy(), dtype=np.float32) for r in rows])
    rng = np.random.default_rng(seed)
    q = mat[rng.integers(0, len(mat), n_queries)] + noise * rng.standard_normal((n_queries, mat.shape[1]))
    q = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    exact = [set(ids[np.argsort(-(mat @ v))[:10]].tolist()) for v in q]
    t0 = time.perf_counter()
    got = [{i for i, _ in mi.backend.pgvectors.search(v, 10)} for v in q]
    ms = (time.perf_counter() - t0) / n_queries * 1000
    return sum(len(a & e) for a, e in zip(got, exact, strict=True)) / (10 * n_queries), ms
