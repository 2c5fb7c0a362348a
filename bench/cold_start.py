#!/usr/bin/env python3
"""Cold start: from ``memoryd run`` on a folder never indexed to every file searchable, then to every vector.

    python bench/cold_start.py [--chunks 2000,10000] [--probes 20] [--seed 0]
                               [--backend embedded|postgres] [--dsn DSN]

For each size, a folder is generated (``bench/gen_corpus.py``) and ``--probes`` random
files get one extra section holding a word found nowhere else. Then ``memoryd run``
(real model, empty data dir, the user's built model cache, no machine-wide embedding cache) is
spawned and timed:

* **socket**: from spawn until the socket answers ``ping``;
* **keyword**: until every probe word is found by a ``keyword`` search (each probe is
  asked every ~0.2 s until found): every file is keyword-searchable;
* **embedded**: until ``status`` says nothing is queued, no sweep runs and no vector is
  pending (``vectors.pending`` = 0).

While the backlog runs, one ``hybrid`` query (a probe word plus a phrase) is sent about
every 0.5 s and its round trip kept: query latency during the backlog. The daemon's
``vectors.done`` log line gives the backlog's own embedding time; the bare model's
throughput is measured afterwards in-process on the same texts' length mix
(``--bare`` chunks, same batch size, normal priority): their ratio says how much of the
model's speed the background pass keeps. ``--until keyword`` stops each size once every
probe is found, after ``--latency-s`` of queries against the running backlog (for sizes whose
full embedding takes too long on the machine at hand).

``--backend postgres``: each size's daemon gets a config file naming a database of its own,
created fresh (with pgvector) on the server of ``--dsn`` (which must allow ``CREATE DATABASE``),
else on a private pgserver started for the run (``bench/_pg.py``, its recommended settings)
and stopped at the end. Everything else is the same run. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import sys
import time
from pathlib import Path
from typing import Any

from _common import Daemon, bench_tmp, fmt, loadavg, print_table, remove_tree, summary
from gen_corpus import generate

from memoryd.indexer.errors import DaemonError


def plant_probes(root: Path, n: int, seed: int, as_section: bool = True) -> list[str]:
    """Append a unique word to ``n`` random files (all of them if fewer) — in a section of its own, or
    with ``as_section=False`` as one plain line (bench/first_search.py); returns the words."""
    rnd = random.Random(seed)
    files = sorted(root.rglob("*.md"))
    words = []
    for path in rnd.sample(files, min(n, len(files))):
        word = "probe" + "".join(rnd.choice(string.ascii_lowercase) for _ in range(10))
        with path.open("a", encoding="utf-8") as f:
            f.write(f"\n## Probe\n\nThe code word for this note is {word}, remember it.\n" if as_section
                    else f"\nThe code word for this note is {word}.\n")
        words.append(word)
    return words


def found(client: Any, word: str, mode: str = "keyword") -> bool:
    hits = client.call("search", {"query": word, "k": 1, "mode": mode})["hits"]
    return bool(hits) and word in hits[0]["text"]


def run_size(chunks: int, n_probes: int, seed: int, timeout: float, until: str = "embedded",
             latency_s: float = 30.0, pg_base: str | None = None) -> dict[str, Any]:
    """One size, on the embedded backend, or with ``pg_base`` (a server's maintenance DSN) on a
    fresh database of that server."""
    tmp = bench_tmp("mdcold-")
    try:
        root = tmp / "root"
        info = generate(root, chunks, seed)
        words = plant_probes(root, n_probes, seed)
        out: dict[str, Any] = {"chunks_target": chunks, "files": info.files, "probes": len(words),
                               "backend": "postgres" if pg_base else "embedded"}
        with Daemon(tmp, [root], tmp / "data", cold_config(tmp, pg_base, f"memoryd_cold_{chunks}"), name="cold") as d:
            out.update(_observe(d, words, timeout, until, latency_s))
            done = d.events("vectors.done")
            out["backlog_embed_s"] = done[-1]["seconds"] if done else None
            out["backlog_chunks"] = done[-1]["chunks"] if done else 0
        out["loadavg"] = loadavg()
        return out
    finally:
        remove_tree(tmp)


def cold_config(tmp: Path, pg_base: str | None, name: str) -> Path:
    """The daemon's config: no machine-wide embedding cache (an earlier run's vectors of the same
    generated folder would make the start warm), and with ``pg_base`` the PostgreSQL backend on
    database ``name``, created fresh on that server."""
    text = "[embedding]\nmachine_cache_entries = 0\n"
    if pg_base is not None:
        from _pg import fresh_database

        text += f'[storage]\nbackend = "postgres"\ndsn = "{fresh_database(pg_base, name)}"\nsslmode = "disable"\n'
    config = tmp / "memoryd.toml"
    config.write_text(text, encoding="utf-8")
    return config


def _observe(d: Daemon, words: list[str], timeout: float, until: str, latency_s: float) -> dict[str, Any]:
    """Poll the daemon from spawn: socket, every probe keyword-searchable, every vector done
    (or, ``until="keyword"``, ``latency_s`` of queries after the last probe was found)."""
    socket_s = d.wait_socket(timeout)
    with d.client(timeout=60) as c:
        while True:
            try:
                c.call("ping")
                break
            except DaemonError:
                time.sleep(0.02)
        socket_s = time.perf_counter() - d.started_at
        missing = set(words)
        keyword_s = embedded_s = None
        latencies: list[float] = []
        next_query = 0.0
        status: dict[str, Any] = {}
        while embedded_s is None:
            d.check_alive()
            now = time.perf_counter()
            if now - d.started_at > timeout:
                raise TimeoutError(f"not done after {timeout:g} s: {status}")
            for w in sorted(missing):
                if found(c, w):
                    missing.discard(w)
            if not missing and keyword_s is None:
                keyword_s = time.perf_counter() - d.started_at
            status = c.call("status")
            backlog = status.get("vectors", {}).get("pending", 0)
            if keyword_s is not None and backlog and now >= next_query:
                t0 = time.perf_counter()
                c.call("search", {"query": f"{words[len(latencies) % len(words)]} deployment decision", "k": 8})
                latencies.append((time.perf_counter() - t0) * 1000)
                next_query = now + 0.5
            if keyword_s is not None and status["pending"] == 0 and not status["reconciling"] and not backlog:
                embedded_s = time.perf_counter() - d.started_at
            if until == "keyword" and keyword_s is not None and now - d.started_at > keyword_s + latency_s:
                break
            time.sleep(0.2)
        vector_ok = sum(found(c, w, "vector") or found(c, w, "hybrid") for w in words)
    return {"socket_s": round(socket_s, 2), "keyword_all_s": round(keyword_s or 0.0, 2),
            "embedded_s": None if embedded_s is None else round(embedded_s, 2), "chunks": status["chunks"],
            "vectors": status["index"]["vectors"], "vectors_pending_at_end": status.get("vectors", {}).get("pending"),
            "hybrid_found_after": vector_ok, "query_ms_during_backlog": summary(latencies, digits=1),
            "queries_during_backlog": len(latencies)}


def bare_throughput(n: int) -> float:
    """Chunks per second of the bare model (in-process, same batch size) on generated sections."""
    from memoryd.daemon.oneshot import open_index  # noqa: F401  (same import path as the daemon)
    from memoryd.indexer.config import Config
    from memoryd.indexer.embedding import load_embedder

    tmp = bench_tmp("mdbare-")
    try:
        generate(tmp / "root", n, seed=1)
        texts = [p.read_text(encoding="utf-8") for p in sorted((tmp / "root").rglob("*.md"))]
        sections = [s for t in texts for s in t.split("\n## ")][:n]
        cfg = Config()
        embedder = load_embedder(cfg.embedding, cfg.model_cache_dir)
        batch = max(32, 2 * cfg.embedding.batch_size)
        ordered = sorted(sections, key=len)
        t0 = time.perf_counter()
        for start in range(0, len(ordered), batch):
            embedder.embed_passages(ordered[start : start + batch])
        return len(ordered) / (time.perf_counter() - t0)
    finally:
        remove_tree(tmp)


def run_sizes(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every size of ``--chunks``, on the backend asked for (a private PostgreSQL lives for the whole run)."""
    sizes = [int(c) for c in args.chunks.split(",")]
    if args.backend == "embedded":
        return [run_size(c, args.probes, args.seed, args.timeout, args.until, args.latency_s) for c in sizes]
    from _pg import server_dsn, stop_servers

    work = bench_tmp("mdcoldpg-")
    try:
        base = server_dsn(args.dsn, work)
        return [run_size(c, args.probes, args.seed, args.timeout, args.until, args.latency_s, base) for c in sizes]
    finally:
        stop_servers()
        remove_tree(work)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", default="2000,10000", help="comma-separated folder sizes (chunks)")
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bare", type=int, default=512, help="chunks for the bare-model throughput")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per size")
    ap.add_argument("--until", choices=("embedded", "keyword"), default="embedded")
    ap.add_argument("--latency-s", type=float, default=30.0, help="with --until keyword: query this long after")
    ap.add_argument("--backend", choices=("embedded", "postgres"), default="embedded")
    ap.add_argument("--dsn", default=None, help="--backend postgres: the server to use (default: a private one)")
    args = ap.parse_args(argv)
    results = run_sizes(args)
    bare = bare_throughput(args.bare) if args.bare else 0.0
    for r in results:
        rate = r["backlog_chunks"] / r["backlog_embed_s"] if r["backlog_embed_s"] else None
        r["backlog_per_s"] = None if rate is None else round(rate, 2)
        r["bare_per_s"] = round(bare, 2) if bare else None
        r["ratio_to_bare"] = None if rate is None or not bare else round(rate / bare, 3)
    print_table(
        ["backend", "chunks", "files", "socket s", "all keyword s", "embedded s", "query p50 ms", "query p95 ms",
         "backlog /s", "bare /s", "ratio"],
        [[r["backend"], r["chunks"], r["files"], fmt(r["socket_s"], 2), fmt(r["keyword_all_s"], 2),
          fmt(r["embedded_s"], 1), fmt(r["query_ms_during_backlog"].get("p50"), 1),
          fmt(r["query_ms_during_backlog"].get("p95"), 1),
          fmt(r["backlog_per_s"], 1), fmt(r["bare_per_s"], 1), fmt(r["ratio_to_bare"], 2)] for r in results],
    )
    print(json.dumps({"cold_start": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
