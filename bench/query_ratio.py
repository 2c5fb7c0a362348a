#!/usr/bin/env python3
"""A LoCoMo question's hybrid search over the socket, against the bare query embedding, at 1k–100k chunks.

    python bench/query_ratio.py EVAL_DIR [--chunks 1000,10000,100000] [--rounds 2] [--block 20]
                                [--model-dir DIR] [--compare-env KEY=VALUE ...]

For each size: a corpus of about that many chunks — the LoCoMo dev conversations' ``*.md``
files (~430 chunks) plus ``gen_corpus.py``'s synthetic sections for the rest — is indexed
in-process, line vectors included, then served by the real daemon (``memoryd run``: socket,
JSON-RPC, threads, the query embedding overlapped with the keyword leg). Every LoCoMo dev
``question`` is sent as a hybrid search (``k`` 8) over one connection, in blocks that alternate
with blocks of the bare model — ``embed_query`` of the same questions, in this process, the
same ONNX files and threads — so both series see the same background load. The ratio
client / bare is taken at p50 and at p99 of each series.

**Benchmark-only passage vectors**, as ``bench/scale.py`` builds them: embedding 100k chunks
with e5 on 2 cores takes hours, so the passages' (and lines') vectors are
:class:`scale.SyntheticPassages`' clustered unit vectors and the daemon runs with the same
wrapper (``bench/_synthetic_daemon.py``). Chunking and every query embedding — the daemon's and
the bare reference — are the real model; SQLite, FTS5, FAISS (flat below
``search.hnsw_threshold``, HNSW above), fusion, calibration and the reply are the real code.

``--compare-env KEY=VALUE`` (repeatable) starts a second daemon on a copy of the same index
with that extra environment (another checkout's code, an experiment's knob); its blocks
alternate with the others', so before/after is measured in one run. Each size runs in a child
process with its own ``XDG_CACHE_HOME`` (the synthetic vectors never reach the machine's
embedding cache). ``--keep DIR`` builds into ``DIR/SIZE`` and reuses it next time (a 100k build
takes ~5 min on 2 cores). Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import EVAL_DIR_HELP, REPO, Daemon, bench_tmp, fmt, loadavg, print_table, remove_tree, summary

CONVS = ("26", "30", "41", "42", "43")
HERE = Path(__file__).resolve().parent


def questions(eval_dir: Path) -> list[str]:
    out: list[str] = []
    for conv in CONVS:
        with open(eval_dir / f"locomo-conv-{conv}" / "queries.jsonl", encoding="utf-8") as fh:
            out += [json.loads(line)["question"] for line in fh if line.strip()]
    return out


def build(root: Path, data: Path, eval_dir: Path, chunks: int, embedder: Any) -> float:
    """Index the LoCoMo files plus synthetic sections up to ``chunks``, lines too; returns seconds."""
    from gen_corpus import generate

    from memoryd.daemon.watch.pathfilter import PathFilter
    from memoryd.indexer.config import Config, with_overrides
    from memoryd.indexer.engine import open_index
    from memoryd.indexer.ingestion.reconcile import reconcile

    for conv in CONVS:
        src = eval_dir / f"locomo-conv-{conv}"
        for f in sorted(src.rglob("*.md")):
            dst = root / "locomo" / conv / f.relative_to(src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(f, dst)
    t0 = time.perf_counter()
    cfg = with_overrides(Config(), roots=[root], data_dir=data)
    index = open_index(cfg, embedder)
    try:
        pf = PathFilter(cfg.watch.include, cfg.watch.exclude)
        reconcile(index, [root], pf, pf.accept_dir)
        have = index.status().chunks or 0
        if chunks > have:
            generate(root / "generated", chunks - have, seed=0)
            reconcile(index, [root], pf, pf.accept_dir)
        while index.lines_pending():  # what a daemon idle a while has: the line blend reads them
            index.fill_line_vectors()
    finally:
        index.close()
    return time.perf_counter() - t0


def run_size(chunks: int, args: argparse.Namespace) -> dict[str, Any]:
    """One size, in this (child) process: build, serve, alternate blocks; the figures."""
    from scale import SyntheticPassages

    from memoryd.daemon.logs import configure_logging
    from memoryd.indexer.config import EmbeddingConfig
    from memoryd.indexer.embedding import load_embedder

    configure_logging("warning", "console")
    kept = args.keep / str(chunks) if args.keep else None
    tmp = bench_tmp("mdb-qr-")
    try:
        home = kept or tmp
        os.environ["XDG_CACHE_HOME"] = str(home / "cache")  # before any index is opened
        root, data = home / "root", home / "data"
        embedder = SyntheticPassages(load_embedder(EmbeddingConfig(), args.model_dir))
        build_s = build(root, data, args.eval_dir, chunks, embedder) if not (kept and data.exists()) else 0.0
        env = {"XDG_CACHE_HOME": str(home / "cache")}
        daemons = {"daemon": _daemon(tmp, root, data, "d", env, args.model_dir)}
        if args.compare_env:
            shutil.copytree(data, tmp / "data-compare")
            daemons["compare"] = _daemon(tmp, root, tmp / "data-compare", "c",
                                         {**env, **dict(kv.split("=", 1) for kv in args.compare_env)}, args.model_dir)
        try:
            for d in daemons.values():
                d.start()
            status = {name: d.wait_idle(timeout=1800, lines=True) for name, d in daemons.items()}
            times = alternate(daemons, embedder, questions(args.eval_dir), args)
        finally:
            for d in daemons.values():
                d.stop()
        return report_size(chunks, status["daemon"], build_s, times)
    finally:
        remove_tree(tmp)


def _daemon(tmp: Path, root: Path, data: Path, name: str, env: dict[str, str], model_dir: Path) -> Daemon:
    d = Daemon(tmp, [root], data, name=name, extra_env=env)
    d.argv[1:3] = [str(HERE / "_synthetic_daemon.py"), str(model_dir)]  # memoryd run, synthetic passages
    return d


def alternate(daemons: dict[str, Daemon], embedder: Any, qs: list[str],
              args: argparse.Namespace) -> dict[str, list[float]]:
    """Seconds per call of each series; blocks rotate (bare, daemon[, compare]) so none is always first."""
    clients = {name: d.client() for name, d in daemons.items()}
    out: dict[str, list[float]] = {"bare": [], "took": [], **{name: [] for name in clients}}
    try:
        for q in qs[: args.warmup]:
            embedder.embed_query(q)
            for c in clients.values():
                c.call("search", {"query": q, "mode": "hybrid", "k": 8})
        series: list[str] = ["bare", *clients]
        for _ in range(args.rounds):
            for b, start in enumerate(range(0, len(qs), args.block)):
                block = qs[start: start + args.block]
                for name in series[b % len(series):] + series[: b % len(series)]:
                    for q in block:
                        t0 = time.perf_counter()
                        if name == "bare":
                            embedder.embed_query(q)
                            out[name].append(time.perf_counter() - t0)
                            continue
                        took = clients[name].call("search", {"query": q, "mode": "hybrid", "k": 8})["took_ms"]
                        out[name].append(time.perf_counter() - t0)
                        if name == "daemon":
                            out["took"].append(float(took) / 1000)
                    time.sleep(0.03)  # each side's worker threads go to sleep before the next block
    finally:
        for c in clients.values():
            c.close()
    return out


def report_size(chunks: int, st: dict[str, Any], build_s: float, times: dict[str, list[float]]) -> dict[str, Any]:
    bare = summary(times["bare"], 1000, 2)
    out: dict[str, Any] = {"target_chunks": chunks, "chunks": st["chunks"], "index_type": st["index"]["type"],
                           "build_s": round(build_s, 1), "bare_p50_ms": bare["p50"], "bare_p99_ms": bare["p99"],
                           "n": bare["n"], "loadavg": loadavg()}
    out["took_p50_ms"] = summary(times["took"], 1000, 2)["p50"]
    for name in ("daemon", "compare"):
        if name in times:
            s = summary(times[name], 1000, 2)
            out[name] = {"p50_ms": s["p50"], "p99_ms": s["p99"],
                         "ratio_p50": round(s["p50"] / bare["p50"], 2), "ratio_p99": round(s["p99"] / bare["p99"], 2)}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_dir", type=Path, help=EVAL_DIR_HELP + "; the LoCoMo dev folders locomo-conv-N are used")
    ap.add_argument("--chunks", default="1000,10000,100000", help="corpus sizes (comma-separated)")
    ap.add_argument("--rounds", type=int, default=2, help="passes over the 760 questions, per series")
    ap.add_argument("--block", type=int, default=20, help="questions per alternating block")
    ap.add_argument("--warmup", type=int, default=30)
    ap.add_argument("--model-dir", type=Path, default=Path("/tmp/memoryd-scale-model"),
                    help="where the ONNX model is built or found (bench/scale.py's default)")
    ap.add_argument("--compare-env", action="append", default=[], metavar="KEY=VALUE",
                    help="a second daemon on a copy of the index, with this extra environment")
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="build each size into DIR/SIZE and keep it; a later run with the same DIR reuses it")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child mode: one size, JSON on stdout
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_size(args.one, args)))
        return 0
    results = []
    for size in (int(s) for s in args.chunks.split(",") if s):
        child = [sys.executable, __file__, "--one", str(size), *sys.argv[1:]]
        done = subprocess.run(child, capture_output=True, text=True, cwd=REPO)
        if done.returncode != 0:
            print(f"size {size}: FAILED (exit {done.returncode}): {done.stderr.strip()[-2000:]}", file=sys.stderr)
            continue
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
        print(f"size {size}: {json.dumps(results[-1])}", file=sys.stderr, flush=True)
    rows = []
    for r in results:
        for name in ("daemon", "compare"):
            if name in r:
                s = r[name]
                rows.append([r["chunks"], r["index_type"], name, fmt(r["bare_p50_ms"], 2), fmt(r["bare_p99_ms"], 2),
                             fmt(s["p50_ms"], 2), fmt(s["p99_ms"], 2), s["ratio_p50"], s["ratio_p99"],
                             fmt(r["took_p50_ms"], 2) if name == "daemon" else "", r["loadavg"][0]])
    print_table(["chunks", "index", "series", "bare p50", "bare p99", "client p50", "client p99", "ratio p50",
                 "ratio p99", "took p50", "load"], rows)
    print(json.dumps({"sizes": results, "compare_env": args.compare_env}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
