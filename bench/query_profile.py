#!/usr/bin/env python3
"""Where a search's time goes, per component, in-process: MADial, long English and one-line queries.

    python bench/query_profile.py EVAL_DIR [--work DIR] [--repeat 2]

Opens the per-folder indexes that ``bench/eval_retrieval.py --work DIR`` built
(MADial's own folder; LoCoMo ``conv-26`` for the English series) and times, per
query, the parts of the query pipeline (:mod:`memoryd.indexer.search.pipeline`, its embedded legs) with
``perf_counter`` spans (the functions are wrapped, not sampled). Three series:
the 76 MADial dev questions (Chinese dialogues, ~115 model tokens), 60 English
queries of 5–10 lines (consecutive LoCoMo questions) and the one-line LoCoMo
questions. Each is run as

* ``bare``: ``embed_query`` alone (the model; the floor of a hybrid search);
* ``no model``: the search with its query vector given (everything but the model);
* ``overlapped``: the search with the embedding started on another thread, as the
  daemon runs it (``daemon/work/query_embedding.py``): model and keyword leg share the cores.

FAISS runs on one thread, as in the daemon. Prints the medians (ms) of the last
``--repeat`` pass (the first warms the caches), component by component, and ``after legs``:
the sum of the medians of the work both storage backends share once the legs are back
(fusion, calibration features, calibrated scores, cut/merge/matched lines, the JSON dict).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (puts the repository on sys.path)

from memoryd.indexer.search.query import Query

SPANS = ("_keyword_plan", "_idfs", "_keyword_leg", "keyword_with_proximity", "_vector_leg", "fetch_chunks", "_fuse",
         "features", "calibrated", "_finish", "to_json")
AFTER_LEGS = ("_fuse", "features", "calibrated", "_finish", "to_json")
"""The Python work once both legs are back (shared by both storage backends): summed as ``after legs``."""

spans: dict[str, float] = {}
clock: Callable[[], float] = time.perf_counter


def timed(owner: Any, name: str) -> None:
    """Replace ``owner.name`` by a wrapper adding its wall time to ``spans[name]``."""
    inner = getattr(owner, name)

    @functools.wraps(inner)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = clock()
        try:
            return inner(*args, **kwargs)
        finally:
            spans[name] = spans.get(name, 0.0) + clock() - t0

    setattr(owner, name, wrapper)


def questions(folder: Path) -> list[str]:
    with open(folder / "queries.jsonl", encoding="utf-8") as fh:
        return [json.loads(line)["question"] for line in fh if line.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("eval_dir", type=Path, help="the LoCoMo/MADial dev sets")
    ap.add_argument("--work", type=Path, default=Path("/tmp/memoryd-eval"), help="eval_retrieval.py's --work")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--variants", default="bare,no model,overlapped", help="comma-separated: which runs to time")
    ap.add_argument("--clock", choices=("wall", "thread"), default="wall",
                    help="thread: CPU time of the searching thread (steadier on a busy machine; the model's own "
                         "threads and the overlapped embedding are then not counted)")
    args = ap.parse_args()
    global clock
    clock = time.thread_time if args.clock == "thread" else time.perf_counter

    import faiss

    from memoryd.daemon.logs import configure_logging
    from memoryd.indexer.config import Config, EmbeddingConfig, with_overrides
    from memoryd.indexer.embedding import load_embedder
    from memoryd.indexer.engine import open_index
    from memoryd.indexer.search import hits, pipeline, rescore, shaping
    from memoryd.indexer.storage.embedded import hybrid

    configure_logging("warning", "console")
    faiss.omp_set_num_threads(1)  # as the daemon runs queries (daemon/app.py)
    owners: dict[str, Any] = {"_keyword_leg": hybrid, "fetch_chunks": hybrid, "calibrated": shaping,
                              "keyword_with_proximity": rescore, "to_json": hits.SearchResult,
                              "_idfs": pipeline.SearchPipeline, "_fuse": pipeline.SearchPipeline,
                              "_finish": pipeline.SearchPipeline}
    for name in SPANS:  # the embedded legs' own steps are EmbeddedSession's
        timed(owners.get(name, hybrid.EmbeddedSession), name)
    cfg = dataclasses.replace(Config(), embedding=EmbeddingConfig())
    embedder = load_embedder(cfg.embedding, args.work / "model")
    english = questions(args.eval_dir / "locomo-conv-26")
    series = {
        "MADial": ("madial-zh-user-1", questions(args.eval_dir / "madial-zh-user-1")),
        "English, 5-10 lines": ("locomo-conv-26", ["\n".join(english[(i * 37 + j) % len(english)]
                                                             for j in range(5 + i % 6)) for i in range(60)]),
        "one-line": ("locomo-conv-26", english),
    }
    for label, (folder, queries) in series.items():
        fcfg = with_overrides(cfg, roots=[args.work / "roots" / folder], data_dir=args.work / "data" / folder)
        index = open_index(fcfg, embedder)
        print(f"== {label}: {len(queries)} queries, {folder}")
        profile_series(index, embedder, queries, args.repeat, args.variants.split(","))
        index.close()


def profile_series(index: Any, embedder: Any, queries: list[str], repeat: int, variants: list[str]) -> None:
    from memoryd.daemon.work.query_embedding import QueryEmbeddings
    from memoryd.indexer.search.querytext import clean_query

    ahead = QueryEmbeddings(embedder)
    vectors = {q: embedder.embed_query(clean_query(q)) for q in queries}
    runs: dict[str, Callable[[str], Any]] = {
        "bare": lambda q: embedder.embed_query(clean_query(q)),
        "no model": lambda q: index.query(Query(q, k=8, query_vector=lambda: vectors[q])).to_json(),
        "overlapped": lambda q: index.query(Query(q, k=8, query_vector=ahead.start(clean_query(q)))).to_json(),
    }
    for variant, run in runs.items():
        if variant not in variants:
            continue
        totals, parts = measure(run, queries, repeat)
        shown = "  ".join(f"{k.strip('_')} {v:.2f}" for k, v in parts.items() if v >= 0.05)
        after = f"  after legs {sum(parts[k] for k in AFTER_LEGS):.2f}" if variant != "bare" else ""
        p50, p99 = statistics.median(totals), quantile(totals, 0.99)
        print(f"  {variant:<11} p50 {p50:7.2f}  p99 {p99:7.2f}{after}  {shown}")
    ahead.close()


def measure(run: Callable[[str], Any], queries: list[str], repeat: int) -> tuple[list[float], dict[str, float]]:
    """Totals (ms) of the last pass over ``queries`` and each span's median (ms)."""
    totals: list[float] = []
    per: dict[str, list[float]] = {}
    for rep in range(repeat):
        for q in queries:
            spans.clear()
            t0 = clock()
            run(q)
            if rep == repeat - 1:
                totals.append((clock() - t0) * 1000)
                for name in SPANS:
                    per.setdefault(name, []).append(spans.get(name, 0.0) * 1000)
    return totals, {k: statistics.median(v) for k, v in per.items()}


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


if __name__ == "__main__":
    sys.exit(main())
