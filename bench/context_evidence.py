#!/usr/bin/env python3
"""How often a ``context`` block holds the evidence, on the LoCoMo/MADial dev sets.

    python bench/context_evidence.py [EVAL_DIR] [--work DIR] [--max-tokens 800] [--k 20] [--lexical]
                                     [--memo-lines 4096] [--limit N] [--scored-tokens N]
                                     [--min-score X] [--per-query FILE]

For each folder under EVAL_DIR holding ``queries.jsonl``, the index built by
``bench/eval_retrieval.py`` under ``--work`` is opened read-only (run that
first; this script embeds nothing but the questions). Every question is
searched as the daemon's ``context`` method does (hybrid, ``k`` hits) and the
block is built with the model's own token counter and, as the daemon does,
excerpt lines ranked by the model (``--lexical``: by the hits' matched lines
only, as before). A question counts as held
when one of its evidence lines is *shown* in the block: inside a whole span,
or among the lines of an excerpt. Prints one row per folder, the overall rate
per data set and over both, then the time ``build_context`` took per question
(p50/p99, in this process, beside a bare query embedding of the same questions),
then one JSON line. As in the daemon, each block first reads the line vectors the index filled in
for its hits (``--no-line-rows``: not, every line embedded here) and memoises line vectors across
blocks (``--memo-lines 0``: nothing kept from one question to the next, the cold cost;
``--limit N``: the first N questions per folder; ``--scored-tokens N``: the block's allowance of
scored line tokens, default as the daemon's).
As the daemon's ``context``, hits below ``search.min_score`` are dropped and a question with none
left gets no block (it counts as not held); ``--min-score 0`` measures the block without abstention.
``--per-query FILE`` writes ``{qid: held}`` (bench/calibrate_scores.py ``--held`` reads it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.indexer.search.query import Query

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import EVAL_DIR_HELP

from memoryd.daemon.work.line_vectors import MEMO_LINES, LineVectors
from memoryd.indexer.config import Config, with_overrides
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import MemoryIndex, open_index
from memoryd.indexer.search.context import MAX_SCORED_TOKENS, build_context, cosine_scorer
from memoryd.indexer.search.querytext import clean_query
from memoryd.indexer.storage.embedded.store_lines import read_line_texts


def shown(source: dict[str, Any], path: str, line: int) -> bool:
    """Whether ``path:line`` is visible in the block through ``source``."""
    if source["path"] != path:
        return False
    if "lines" in source:
        return line in source["lines"]
    return bool(source["start_line"] <= line <= source["end_line"])


class _StoredLines:
    """The index's filled-in line vectors, read as the daemon's ``LineCache`` reads them (this bench opens
    its indexes read-only, which keep no line cache of their own): nothing else is looked up or stored."""

    def __init__(self, index: MemoryIndex) -> None:
        self._index = index

    def get_many(self, lines: Any) -> dict[str, Any]:
        return {}

    def put_many(self, vectors: Any) -> None:
        return None

    def lines_of_chunks(self, ids: Any) -> dict[str, Any]:
        return read_line_texts(self._index.backend.sqlite.conn, ids, self._index.embedder.dimension)


def run_folder(
    folder: Path, work: Path, cfg: Config, embedder: Any, args: argparse.Namespace, times: dict[str, list[float]],
    per_query: dict[str, bool],
) -> dict[str, Any]:
    max_tokens, k = args.max_tokens, args.k
    fcfg = with_overrides(cfg, roots=[work / "roots" / folder.name], data_dir=work / "data" / folder.name)
    index = open_index(fcfg, embedder, read_only=True)
    rows = None if args.no_line_rows else _StoredLines(index)

    def fresh() -> LineVectors:  # --memo-lines 0: nothing kept across questions, but a block's own preload
        return LineVectors(embedder.embed_passages, args.memo_lines or MEMO_LINES, store=rows)  # type: ignore[arg-type]

    line_vectors = fresh()
    held = excerpts = spans = tokens = 0
    queries = [json.loads(x) for x in (folder / "queries.jsonl").read_text().splitlines() if x.strip()]
    queries = queries[: args.limit] if args.limit else queries
    try:
        for q in queries:
            t0 = time.perf_counter()
            qvec = embedder.embed_query(clean_query(q["question"]))  # the vector the daemon hands both steps
            times["query_embedding"].append(time.perf_counter() - t0)
            hits = index.query(Query(q["question"], k=k, query_vector=lambda v=qvec: v,
                                min_score=args.min_score or None)).hits
            t0 = time.perf_counter()
            if not args.memo_lines:
                line_vectors = fresh()
            if hits and not args.lexical:  # as the daemon's context handler does
                line_vectors.preload([i for h in hits for i in (h.chunk_id, *h.absorbed)])
            scorer = None if args.lexical or not hits else cosine_scorer(line_vectors, qvec)
            block = build_context(q["question"], hits, max_tokens, embedder.count_tokens, scorer,
                                  scored_tokens=args.scored_tokens).to_json()
            times["context"].append(time.perf_counter() - t0)
            evidence = [(r["path"], r["line"]) for r in q["relevant"]]
            found = any(shown(s, p, n) for s in block["sources"] for p, n in evidence)
            per_query[q["qid"]] = found
            held += found
            excerpts += sum(1 for s in block["sources"] if "lines" in s)
            spans += len(block["sources"])
            tokens += block["tokens"]
    finally:
        index.close()
    n = len(queries)
    return {"n": n, "held": held, "rate": round(held / n, 4), "sources_per_block": round(spans / n, 2),
            "excerpts_per_block": round(excerpts / n, 2), "mean_tokens": round(tokens / n, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_dir", type=Path, help=EVAL_DIR_HELP)
    ap.add_argument("--work", type=Path, default=Path("/tmp/memoryd-eval"))
    ap.add_argument("--max-tokens", type=int, default=800)
    ap.add_argument("--k", type=int, default=20, help="hits considered (the context method's default)")
    ap.add_argument("--lexical", action="store_true", help="excerpts by matched lines only (no model scoring)")
    ap.add_argument("--memo-lines", type=int, default=MEMO_LINES, help="line vectors memoised (0: none)")
    ap.add_argument("--limit", type=int, default=0, help="questions per folder (0: all)")
    ap.add_argument("--no-line-rows", action="store_true",
                    help="do not read the index's stored line vectors (every excerpt line embedded here)")
    ap.add_argument("--scored-tokens", type=int, default=MAX_SCORED_TOKENS, help="scored line tokens per block")
    ap.add_argument("--min-score", type=float, default=Config().search.min_score,
                    help="abstention threshold, as the daemon's context (0: never abstain)")
    ap.add_argument("--per-query", type=Path, help="write {qid: evidence shown} here")
    args = ap.parse_args()
    cfg = Config()
    embedder = load_embedder(cfg.embedding, args.work / "model")
    folders = sorted(p for p in args.eval_dir.iterdir() if (p / "queries.jsonl").exists())
    times: dict[str, list[float]] = {"query_embedding": [], "context": []}
    per_query: dict[str, bool] = {}
    rows = {f.name: run_folder(f, args.work, cfg, embedder, args, times, per_query)
            for f in folders}
    if args.per_query:
        args.per_query.write_text(json.dumps(per_query))
    print(f"{'data':<20} {'n':>4} {'held':>5} {'rate':>6} {'sources':>8} {'excerpts':>9} {'tokens':>7}")
    for name, r in rows.items():
        print(f"{name:<20} {r['n']:>4} {r['held']:>5} {r['rate']:>6.3f} {r['sources_per_block']:>8.2f} "
              f"{r['excerpts_per_block']:>9.2f} {r['mean_tokens']:>7.0f}")
    totals: dict[str, Any] = {}
    for group in ("locomo", "madial", ""):
        part = [r for name, r in rows.items() if name.startswith(group)]
        n, held = sum(r["n"] for r in part), sum(r["held"] for r in part)
        totals[group or "all"] = {"n": n, "held": held, "rate": round(held / max(n, 1), 4)}
        print(f"{(group or 'all') + ' (overall)':<20} {n:>4} {held:>5} {held / max(n, 1):>6.3f}")
    ms = {name: {f"p{p}": round(1000 * float(np.percentile(t, p)), 2) for p in (50, 99)} for name, t in times.items()}
    ratio = round(ms["context"]["p50"] / max(ms["query_embedding"]["p50"], 1e-9), 1)
    print(f"build_context ms p50 {ms['context']['p50']:.1f} p99 {ms['context']['p99']:.1f}; query embedding ms "
          f"p50 {ms['query_embedding']['p50']:.1f} p99 {ms['query_embedding']['p99']:.1f} (p50 ratio {ratio})")
    print(json.dumps({"max_tokens": args.max_tokens, "k": args.k, "lexical": args.lexical,
                      "min_score": args.min_score,
                      "memo_lines": args.memo_lines, "limit": args.limit,
                      "scored_tokens": args.scored_tokens, "folders": rows,
                      **totals, "ms": ms, "context_to_query_p50": ratio}))


if __name__ == "__main__":
    main()
