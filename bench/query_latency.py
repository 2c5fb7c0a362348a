#!/usr/bin/env python3
"""Query latency over the socket, idle and during a full re-index, against the bare query embedding.

    python bench/query_latency.py [EVAL_DIR] [--convs 26,30,41,42,43] [--queries 0] [--max-reindex-s 420]
                                  [--long-queries 100] [--no-reindex]

On the LoCoMo dev folders (only their ``*.md`` files, copied into one temp
root, one sub-folder per conversation) with the real e5-small model:

  a. idle: every ``question`` of the folders' ``queries.jsonl`` as a hybrid
     search over ONE socket connection, one after another (after a warm-up);
  b. reference: the bare model, in this process (the same ONNX file, the
     same threads) — ``embed_query`` on the same questions, in blocks that
     alternate with (a)'s, so both see the same background load (one query
     embedding is the floor of a hybrid search);
  a2. long and Chinese queries, the same way against the same index, which also
     holds the MADial dev folder (``madial-zh-user-1``, a sub-folder of its
     own): every MADial dev ``question`` (a Chinese dialogue of 2–8 turns,
     ~115 model tokens), and ``--long-queries`` English queries of 5–10 lines
     (consecutive LoCoMo questions joined by newlines, ~100–200 tokens). Each
     series has its own bare-model reference, so the table shows what the
     search adds to the model, whose cost grows with the query's tokens;
  c. during a full re-index (skipped with ``--no-reindex``): every non-blank line of every file gets a marker
     appended, so every chunk's text changes and must really be embedded (the
     embedding cache only saves unchanged text); the same questions are then
     sent in a loop until ``status`` (polled on a second connection every
     0.25 s) says pending=0 and reconciling=false. Only queries that started
     after the first busy ``status`` and ended before the last busy one count;
     every 5th iteration also sends a keyword-only search (no model) to show
     how much of the wait is the model.

Client latency is the call's round trip; ``took_ms`` is the daemon's own
timing of the search (the rest is socket, JSON and thread hand-off).
Prints a table, then one JSON line. ``bench/query_ratio.py`` measures the same ratio
(client / bare, p50 and p99) at 1k, 10k and 100k chunks.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from _common import EVAL_DIR_HELP, Daemon, bench_tmp, fmt, is_idle, loadavg, print_table, remove_tree, summary

MADIAL = "madial-zh-user-1"


def copy_corpus(eval_dir: Path, convs: list[str], root: Path) -> tuple[list[Path], list[str]]:
    """Copy the ``*.md`` files of each ``locomo-conv-N`` into ``root/conv-N``; returns (files, questions)."""
    files: list[Path] = []
    questions: list[str] = []
    for conv in convs:
        files += copy_folder(eval_dir / f"locomo-conv-{conv}", root / f"conv-{conv}")
        questions += read_questions(eval_dir / f"locomo-conv-{conv}")
    return files, questions


def copy_folder(src: Path, dst_root: Path) -> list[Path]:
    files = []
    for f in sorted(src.rglob("*.md")):
        dst = dst_root / f.relative_to(src)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dst)
        files.append(dst)
    return files


def read_questions(folder: Path) -> list[str]:
    with open(folder / "queries.jsonl", encoding="utf-8") as fh:
        return [json.loads(line)["question"] for line in fh if line.strip()]


def long_queries(questions: list[str], n: int) -> list[str]:
    """``n`` English queries of 5–10 lines: runs of consecutive questions, a different start each time."""
    out = []
    for i in range(n):
        start, lines = (i * 37) % len(questions), 5 + i % 6
        out.append("\n".join(questions[(start + j) % len(questions)] for j in range(lines)))
    return out


def load_bare_model(model_dir: Path) -> tuple[Any, float]:
    """The e5 embedder in this process (builds the ONNX model into ``model_dir``, the daemon's model cache)."""
    from memoryd.daemon.logs import configure_logging
    from memoryd.indexer.config import EmbeddingConfig
    from memoryd.indexer.embedding import load_embedder

    configure_logging("warning", "console")  # this process's model.built/model.loaded lines are noise here
    t0 = time.perf_counter()
    embedder = load_embedder(EmbeddingConfig(), model_dir)
    return embedder, time.perf_counter() - t0


def timed_embed(embedder: Any, query: str) -> float:
    t0 = time.perf_counter()
    embedder.embed_query(query)
    return time.perf_counter() - t0


def search(client: Any, query: str, mode: str = "hybrid") -> tuple[float, float, float]:
    """(start, client seconds, daemon took_ms) of one search."""
    t0 = time.perf_counter()
    result = client.call("search", {"query": query, "mode": mode, "k": 8})
    return t0, time.perf_counter() - t0, float(result["took_ms"])


def idle_queries(d: Daemon, embedder: Any, questions: list[str], warmup: int,
                 block: int) -> tuple[list[float], list[float], list[float]]:
    """Every question through the daemon and through the bare model, in alternating blocks.

    Alternating blocks (bare, daemon, bare, ...) make both series see the same background load; a
    short pause between blocks lets each side's spinning worker threads go to sleep first.
    Returns (bare seconds, client seconds, daemon took_ms).
    """
    bare: list[float] = []
    runs: list[tuple[float, float, float]] = []
    with d.client() as c:
        for q in questions[:warmup]:
            search(c, q)
            embedder.embed_query(q)
        for start in range(0, len(questions), block):
            chunk = questions[start: start + block]
            bare += [timed_embed(embedder, q) for q in chunk]
            time.sleep(0.05)
            runs += [search(c, q) for q in chunk]
            time.sleep(0.05)
    return bare, [r[1] for r in runs], [r[2] for r in runs]


def rewrite_everything(files: list[Path]) -> None:
    """Append a marker to every non-blank line: every chunk's text changes, so every chunk is re-embedded."""
    for f in files:
        lines = f.read_text(encoding="utf-8").split("\n")
        f.write_text("\n".join(ln + " (rev 2)" if ln.strip() else ln for ln in lines), encoding="utf-8")


def reindex_queries(d: Daemon, files: list[Path], questions: list[str], max_s: float) -> dict[str, Any]:
    """Queries in a loop while the daemon re-embeds everything; see the module docstring for what counts."""
    hybrid: list[tuple[float, float, float]] = []
    keyword: list[tuple[float, float, float]] = []
    first_busy = last_busy = None
    with d.client() as c, d.client() as sc:
        misses0 = sc.call("status")["cache"]["misses"]
        t_trigger = time.perf_counter()
        rewrite_everything(files)
        next_status, i = 0.0, 0
        while True:
            now = time.perf_counter()
            if now >= next_status:
                busy = not is_idle(st := sc.call("status"))
                if busy:
                    last_busy = time.perf_counter()
                    first_busy = first_busy or now
                elif first_busy is not None:
                    break
                elif now - t_trigger > 30:
                    raise RuntimeError("the daemon never became busy after every file was rewritten")
                next_status = now + 0.25
            if now - t_trigger > max_s:
                break
            q = questions[i % len(questions)]
            hybrid.append(search(c, q))
            if i % 5 == 0:
                keyword.append(search(c, q, "keyword"))
            i += 1
        t_end = time.perf_counter()
        st = d.wait_idle(timeout=900)
    assert first_busy is not None and last_busy is not None

    def inside(rs: list[tuple[float, float, float]]) -> list[tuple[float, float, float]]:
        return [r for r in rs if r[0] >= first_busy and r[0] + r[1] <= last_busy]

    h, k = inside(hybrid), inside(keyword)
    return {
        "client": summary([r[1] for r in h], 1000, 2), "took": summary([r[2] for r in h], 1, 2),
        "keyword_client": summary([r[1] for r in k], 1000, 2), "total_sent": len(hybrid),
        "busy_s": round(last_busy - first_busy, 1), "cut_off": t_end - t_trigger > max_s,
        "embedded": st["cache"]["misses"] - misses0, "chunks": st["chunks"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_dir", type=Path, help=EVAL_DIR_HELP)
    ap.add_argument("--convs", default="26,30,41,42,43", help="LoCoMo conversations to use")
    ap.add_argument("--queries", type=int, default=0, help="idle queries (0: every question, 760 by default)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment for the daemon (experiments, e.g. OMP_NUM_THREADS=1)")
    ap.add_argument("--block", type=int, default=20, help="idle run: questions per alternating block")
    ap.add_argument("--max-reindex-s", type=float, default=420.0, help="stop querying the re-index after this")
    ap.add_argument("--long-queries", type=int, default=100, help="English queries of 5-10 lines (0: none)")
    ap.add_argument("--no-reindex", action="store_true", help="skip the series during a full re-index")
    args = ap.parse_args()

    load_before = loadavg()
    tmp = bench_tmp("mdb-ql-")
    try:
        root, data = tmp / "root", tmp / "data"
        files, questions = copy_corpus(args.eval_dir, args.convs.split(","), root)
        extra_series = {"madial": read_questions(args.eval_dir / MADIAL) if (args.eval_dir / MADIAL).is_dir() else [],
                        "long English": long_queries(questions, args.long_queries) if args.long_queries else []}
        if extra_series["madial"]:
            copy_folder(args.eval_dir / MADIAL, root / MADIAL)  # not in ``files``: the re-index rewrites LoCoMo only
        questions = questions[: args.queries] if args.queries else questions
        embedder, load_s = load_bare_model(tmp / "cache" / "memoryd" / "models")
        extra = {"XDG_CACHE_HOME": str(tmp / "cache"), **dict(kv.split("=", 1) for kv in args.env)}
        with Daemon(tmp, [root], data, extra_env=extra) as d:
            t0 = time.perf_counter()
            st = d.wait_idle(timeout=900)
            cold_s = time.perf_counter() - t0
            d.wait_idle(timeout=900, lines=True)  # the default ranking reads every chunk's line vectors
            bare_s, idle_client, idle_took = idle_queries(d, embedder, questions, args.warmup, args.block)
            series = {name: idle_queries(d, embedder, qs, min(args.warmup, len(qs)), args.block)
                      for name, qs in extra_series.items() if qs}
            load_idle = loadavg()
            during = None if args.no_reindex else reindex_queries(d, files, questions, args.max_reindex_s)
        bare = {"load_s": round(load_s, 2), **summary(bare_s, 1000, 2)}
        report(args, files, st, cold_s, bare, idle_client, idle_took, during, [load_before, load_idle, loadavg()])
        report_series(series)
    finally:
        remove_tree(tmp)


def report_series(series: dict[str, tuple[list[float], list[float], list[float]]]) -> None:
    """The long/Chinese series: each against its own bare-model time (ratio of p50s and of p99s)."""
    rows, out = [], {}
    for name, (bare_s, client_s, took) in series.items():
        b, c, t = summary(bare_s, 1000, 2), summary(client_s, 1000, 2), summary(took, 1, 2)
        ratio = (round(c["p50"] / b["p50"], 2), round(c["p99"] / b["p99"], 2))
        rows += [[f"{name}: bare embed_query", b["n"], fmt(b["p50"], 2), fmt(b["p99"], 2), fmt(b["mean"], 2), ""],
                 [f"{name}: hybrid, client round trip", c["n"], fmt(c["p50"], 2), fmt(c["p99"], 2), fmt(c["mean"], 2),
                  f"{ratio[0]} / {ratio[1]}"],
                 [f"{name}: hybrid, daemon took_ms", t["n"], fmt(t["p50"], 2), fmt(t["p99"], 2), fmt(t["mean"], 2), ""]]
        out[name] = {"bare_p50_ms": b["p50"], "bare_p99_ms": b["p99"], "p50_ms": c["p50"], "p99_ms": c["p99"],
                     "took_p50_ms": t["p50"], "took_p99_ms": t["p99"], "ratio_p50": ratio[0], "ratio_p99": ratio[1]}
    if rows:
        print_table(["series", "n", "p50 ms", "p99 ms", "mean ms", "client/bare p50 / p99"], rows)
        print(json.dumps({"series": out}))


def report(args: argparse.Namespace, files: list[Path], st: dict[str, Any], cold_s: float, bare: dict[str, Any],
           idle_client: list[float], idle_took: list[float], during: dict[str, Any] | None,
           loads: list[Any]) -> None:
    idle = summary(idle_client, 1000, 2)
    took = summary(idle_took, 1, 2)
    rows = [
        ["idle: bare embed_query (model alone)", bare["n"], fmt(bare["p50"], 2), fmt(bare["p99"], 2),
         fmt(bare["mean"], 2), fmt(bare["max"], 2)],
        ["idle: hybrid, client round trip", idle["n"], fmt(idle["p50"], 2), fmt(idle["p99"], 2),
         fmt(idle["mean"], 2), fmt(idle["max"], 2)],
        ["idle: hybrid, daemon took_ms", took["n"], fmt(took["p50"], 2), fmt(took["p99"], 2), fmt(took["mean"], 2),
         fmt(took["max"], 2)],
    ]
    for key, label in (("client", "re-index: hybrid, client round trip"), ("took", "re-index: hybrid, daemon took_ms"),
                       ("keyword_client", "re-index: keyword only, client")):
        if during is None:
            break
        s = during[key]
        rows.append([label, s["n"], fmt(s["p50"], 2), fmt(s["p99"], 2), fmt(s["mean"], 2), fmt(s["max"], 2)])
    print(f"corpus: {len(files)} files, {st['chunks']} chunks ({args.convs}); model {st['model']['id']}; "
          f"cold index {cold_s:.0f} s; bare model load {bare['load_s']} s")
    print_table(["series", "n", "p50 ms", "p99 ms", "mean ms", "max ms"], rows)
    if during is not None:
        print(f"re-index: {during['embedded']} chunks embedded, busy {during['busy_s']} s, {during['total_sent']} "
              f"hybrid queries sent ({during['client']['n']} inside the busy window)"
              + (" — cut off by --max-reindex-s" if during["cut_off"] else ""))
    print(f"load average: before {loads[0]}, after idle run {loads[1]}, at end {loads[2]}")
    print(json.dumps({
        "queries": idle["n"], "files": len(files), "chunks": st["chunks"], "model": st["model"]["id"],
        "idle": {"p50_ms": idle["p50"], "p99_ms": idle["p99"], "mean_ms": idle["mean"], "max_ms": idle["max"],
                 "took_p50_ms": took["p50"], "took_p99_ms": took["p99"]},
        "during_reindex": None if during is None else _during_json(during),
        "bare_query_embed_ms": bare["p50"], "bare_query_embed_p99_ms": bare["p99"],
        "cold_index_s": round(cold_s, 1),
        "daemon_env": args.env, "loadavg": loads,
    }))


def _during_json(during: dict[str, Any]) -> dict[str, Any]:
    d = during["client"]
    return {"p50_ms": d["p50"], "p99_ms": d["p99"], "mean_ms": d["mean"], "max_ms": d["max"], "n": d["n"],
            "took_p50_ms": during["took"]["p50"], "took_p99_ms": during["took"]["p99"],
            "keyword_p50_ms": during["keyword_client"]["p50"], "keyword_p99_ms": during["keyword_client"]["p99"],
            "embedded": during["embedded"], "busy_s": during["busy_s"], "cut_off": during["cut_off"]}

if __name__ == "__main__":
    sys.exit(main())
