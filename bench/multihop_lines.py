#!/usr/bin/env python3
"""Does a line's cosine with the query order the multi-hop tail better than the fused score?

    python bench/multihop_lines.py [EVAL_DIR] [--work DIR] [--cache DIR] [--cold 5]

Issue #29 item 2, the family bench/multihop_order.py left open: a signal that reads the candidate
*lines* against the question. The cheapest one this project has is the line vector the context
builder already uses (indexer/search/context.py ``cosine_scorer``): each line embedded as a passage
with the real model, its cosine with the query's vector. Each question's fused ranking is captured as
bench/multihop_order.py captures it (its unchanged order reproduces the shipped search); the lines of
its first ``LINE_CHUNKS`` chunks are embedded, memoised across questions (the same line recurs), and
each chunk gets its best line's cosine. Orderings, each from merged hit ``r0`` on (the hits above never
move), merged and scored as multihop_order.py does:

- ``cos``: the tail re-ranked by each hit's best line cosine;
- ``blend``: by z(fused score) + ``w`` x z(best line cosine), both z-scored over the question's hits
  within the first ``LINE_CHUNKS`` chunks;
- ``diverse``: greedily, z(best line cosine) + ``a`` x z(fused score) + ``d`` if the hit's file is not
  yet shown (line-cosine-led diversification across sessions).

Hits beyond the first ``LINE_CHUNKS`` chunks have no line vectors and keep their order after the rest.
Knobs are chosen leave-one-conversation-out as multihop_order.py chooses them. The cold cost — every
line of a question's first ``LINE_CHUNKS`` chunks embedded with no memo, as a daemon without stored
line vectors would pay at query time — is timed on the first ``--cold`` questions of each folder.
``--cache DIR`` keeps the capture, query and line vectors between runs (the machine is shared).
Prints the cost, a separability check, the per-setting table, the held-out table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import pickle
import statistics
import sys
import time
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.eval_retrieval import EVAL_DIR_HELP
from bench.multihop_order import (
    K,
    Order,
    Question,
    capture,
    flat,
    groups,
    is_mh,
    loco,
    pooled,
    run,
    run_families,
)
from memoryd.indexer.config import Config
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.search.hits import Hit
from memoryd.indexer.search.querytext import clean_query

LINE_CHUNKS = 30  # chunks of the fused ranking whose lines are embedded (the merge reads no further)
Cosines = dict[str, dict[int, float]]  # qid -> chunk_id -> its best line's cosine with the query


def chunk_lines(q: Question) -> list[list[str]]:
    """The non-blank lines of each of the question's first ``LINE_CHUNKS`` chunks."""
    return [[x for x in h.text.split("\n") if x.strip()] for h in q.hits[:LINE_CHUNKS]]


def load_or_capture(eval_dir: Path, work: Path, depth: int, cache: Path | None) -> tuple[list[Question], int]:
    path = cache / f"capture-{depth}.pkl" if cache else None
    if path is not None and path.exists():
        qs, differ = pickle.loads(path.read_bytes())
        return qs, differ
    qs, differ = capture(eval_dir, work, depth, hops=False)
    if path is not None:
        path.write_bytes(pickle.dumps((qs, differ)))
    return qs, differ


def vectors(qs: Sequence[Question], raw: dict[str, str], embedder: Any, cache: Path | None
            ) -> tuple[dict[str, Any], dict[str, Any], dict[str, float]]:
    """Query vectors and line vectors (memoised across questions, kept in ``cache``), and what the memoised
    pass cost: lines embedded, seconds."""
    qpath, lpath = (cache / "queries.pkl", cache / "lines.pkl") if cache else (None, None)
    qvec: dict[str, Any] = pickle.loads(qpath.read_bytes()) if qpath and qpath.exists() else {}
    memo: dict[str, Any] = pickle.loads(lpath.read_bytes()) if lpath and lpath.exists() else {}
    for q in qs:
        if q.qid not in qvec:
            qvec[q.qid] = embedder.embed_query(clean_query(raw[q.qid]))
    t0, fresh = time.perf_counter(), 0
    for q in qs:
        todo = list(dict.fromkeys(x for lines in chunk_lines(q) for x in lines if x not in memo))
        if todo:
            memo.update(zip(todo, np.asarray(embedder.embed_passages(todo), dtype=np.float32), strict=True))
            fresh += len(todo)
    cost = {"lines_embedded": float(fresh), "seconds": time.perf_counter() - t0, "lines_known": float(len(memo))}
    if qpath and lpath:
        qpath.write_bytes(pickle.dumps(qvec))
        lpath.write_bytes(pickle.dumps(memo))
    return qvec, memo, cost


def cold_cost(qs: Sequence[Question], embedder: Any, per_folder: int) -> dict[str, float]:
    """Every line of the first ``per_folder`` questions of each folder embedded afresh, one call a question
    (no memo: what a query pays when no line of its candidates was embedded before)."""
    seen: dict[str, int] = {}
    n_lines, ms = [], []
    for q in qs:
        if seen.get(q.folder, 0) >= per_folder:
            continue
        seen[q.folder] = seen.get(q.folder, 0) + 1
        lines = list(dict.fromkeys(x for c in chunk_lines(q) for x in c))
        t0 = time.perf_counter()
        embedder.embed_passages(lines)
        ms.append((time.perf_counter() - t0) * 1000)
        n_lines.append(len(lines))
    return {"questions": float(len(ms)), "lines_p50": statistics.median(n_lines),
            "lines_mean": statistics.fmean(n_lines), "ms_p50": statistics.median(ms),
            "ms_mean": statistics.fmean(ms), "ms_per_line": sum(ms) / max(sum(n_lines), 1)}


def cosines(qs: Sequence[Question], qvec: dict[str, Any], memo: dict[str, Any]) -> Cosines:
    out: Cosines = {}
    for q in qs:
        out[q.qid] = {h.chunk_id: max((float(memo[x] @ qvec[q.qid]) for x in lines), default=-1.0)
                      for h, lines in zip(q.hits, chunk_lines(q), strict=False)}
    return out


# -- the orderings ---------------------------------------------------------------------------------


def z(values: Sequence[float]) -> list[float]:
    m = statistics.fmean(values)
    s = statistics.pstdev(values) or 1.0
    return [(v - m) / s for v in values]


Features = tuple[list[list[Hit]], list[list[Hit]], list[float], list[float]]


def features(hits: list[Hit], cos: dict[int, float]) -> Features:
    """The merged groups with line vectors (all their chunks within the first ``LINE_CHUNKS``), the
    groups without, and the z-scored fused score and best line cosine of the former."""
    gs = groups(hits)
    scored = [g for g in gs if all(h.chunk_id in cos for h in g)]
    rest = [g for g in gs if not all(h.chunk_id in cos for h in g)]
    fused = z([g[0].score for g in scored]) if scored else []
    best = z([max(cos[h.chunk_id] for h in g) for g in scored]) if scored else []
    return scored, rest, fused, best


def by_key(r0: int, cos_of: Cosines, key: Any) -> Order:
    """The tail (merged hits r0 on, within the first ``LINE_CHUNKS`` chunks) sorted by ``key(fused_z, cos_z)``."""
    def order(hits: list[Hit], q: Question) -> list[Hit]:
        scored, rest, fused, best = features(hits, cos_of[q.qid])
        head = list(range(min(r0 - 1, len(scored))))
        tail = sorted(range(len(head), len(scored)), key=lambda i: (-key(fused[i], best[i]), i))
        return flat([scored[i] for i in head + tail] + rest)
    return order


def diverse(r0: int, a: float, d: float, cos_of: Cosines) -> Order:
    def order(hits: list[Hit], q: Question) -> list[Hit]:
        scored, rest, fused, best = features(hits, cos_of[q.qid])
        out = list(range(min(r0 - 1, len(scored))))
        left = list(range(len(out), len(scored)))
        shown = {scored[i][0].path for i in out}
        while left and len(out) < K + 2:
            pick = max(left, key=lambda i: (best[i] + a * fused[i] + d * (scored[i][0].path not in shown), -i))
            left.remove(pick)
            out.append(pick)
            shown.add(scored[pick][0].path)
        return flat([scored[i] for i in out + left] + rest)
    return order


def chunk_cosines(qs: Sequence[Question]) -> Cosines:
    """The control signal: each chunk's own vector score (its cosine as the search's vector leg saw it), for
    the same chunks the line vectors cover: free at query time."""
    return {q.qid: {h.chunk_id: h.vector_score for h in q.hits[:LINE_CHUNKS]} for q in qs}


def families(cos_of: Cosines, chunk_of: Cosines) -> dict[str, dict[str, Order]]:
    return {
        "cos": {f"r0={r}": by_key(r, cos_of, lambda f, c: c) for r in (2, 3, 4, 5, 6)},
        "blend": {f"r0={r} w={w}": by_key(r, cos_of, lambda f, c, w=w: f + w * c)
                  for r in (2, 3, 4) for w in (0.0, 0.05, 0.1, 0.15, 0.25, 0.5, 1.0)},
        "diverse": {f"r0={r} a={a} d={d}": diverse(r, a, d, cos_of)
                    for r in (3, 4) for a in (0.0, 0.5, 1.0) for d in (0.25, 0.5, 1.0)},
        # controls: the fused order with its exact ties broken by the line cosine; the blend with the
        # chunk's own vector score in place of its best line's (no line vectors needed)
        "tiebreak": {f"r0={r}": by_key(r, cos_of, lambda f, c: f + 1e-9 * c) for r in (2, 3, 4)},
        "chunkvec": {f"r0={r} w={w}": by_key(r, chunk_of, lambda f, c, w=w: f + w * c)
                     for r in (2, 3, 4) for w in (0.05, 0.1, 0.15, 0.25, 0.5, 1.0)},
    }


# -- checks ----------------------------------------------------------------------------------------


def separability(qs: Sequence[Question], cos_of: Cosines, r0: int = 4) -> dict[str, float]:
    """Within each multi-hop question, over its merged hits r0 on in the first ``LINE_CHUNKS`` chunks: how
    often a hit holding an evidence line outranks one holding none (pairwise AUC), by each signal."""
    wins = {"fused": 0.0, "cos": 0.0}
    pairs = ties = neighbours = 0
    for q in qs:
        if not is_mh(q):
            continue
        scored, _, _, _ = features(q.hits, cos_of[q.qid])
        ties += sum(a[0].score == b[0].score for a, b in pairwise(scored))
        neighbours += max(len(scored) - 1, 0)
        cos = cos_of[q.qid]
        tail = [(g[0].score, max(cos[h.chunk_id] for h in g),
                 any(h.path == p and h.start_line <= n <= h.end_line for h in g for p, n in q.relevant))
                for g in scored[r0 - 1:]]
        for gf, gc, _ in (t for t in tail if t[2]):
            for bf, bc, _ in (t for t in tail if not t[2]):
                pairs += 1
                wins["fused"] += 1.0 if gf > bf else 0.5 if gf == bf else 0.0
                wins["cos"] += 1.0 if gc > bc else 0.5 if gc == bc else 0.0
    return {f"auc_{k}": v / max(pairs, 1) for k, v in wins.items()} | {
        "pairs": float(pairs), "tied_neighbours": float(ties), "neighbours": float(neighbours)}


def changes(qs: Sequence[Question], runs: dict[str, dict[str, dict[str, float]]], label: str) -> dict[str, Any]:
    """One setting against today on all five: multi-hop questions whose AllR@10 rose / fell, and AllR@10 per
    LoCoMo category and for MADial."""
    mh = [q for q in qs if is_mh(q)]
    out: dict[str, Any] = {
        "label": label, "up": sum(runs[label][q.qid]["AllR@10"] > runs["off"][q.qid]["AllR@10"] for q in mh),
        "down": sum(runs[label][q.qid]["AllR@10"] < runs["off"][q.qid]["AllR@10"] for q in mh)}
    keeps = {f"locomo {c}": (lambda q, c=c: q.folder.startswith("locomo") and q.category == c) for c in "1234"}
    for name, keep in (keeps | {"madial": lambda q: q.folder.startswith("madial")}).items():
        off, got = (pooled(qs, runs[lab], keep) for lab in ("off", label))
        out[name] = [off["AllR@10"] / max(off["n"], 1), got["AllR@10"] / max(got["n"], 1)]
    return out


def verdict(qs: Sequence[Question], chosen: list[dict[str, Any]], runs: dict[str, dict[str, dict[str, float]]]
            ) -> dict[str, Any]:
    """The held-out figures the issue's rule reads, pooled over the five held-out LoCoMo conversations."""
    got: dict[str, float] = {"mh_off": 0.0, "mh_chosen": 0.0, "n_mh": 0.0, "R@1": 0.0, "MRR@10": 0.0,
                             "lines_off": 0.0, "lines_chosen": 0.0, "n": 0.0}
    for r in chosen:
        test = [q for q in qs if q.folder == r["held_out"]]
        off, pick = (pooled(test, runs[lab], lambda q: True) for lab in ("off", r["chosen"]))
        moff, mpick = (pooled(test, runs[lab], is_mh) for lab in ("off", r["chosen"]))
        got["mh_off"] += moff["AllR@10"]
        got["mh_chosen"] += mpick["AllR@10"]
        got["n_mh"] += moff["n"]
        got["R@1"] += pick["R@1"] - off["R@1"]
        got["MRR@10"] += pick["MRR@10"] - off["MRR@10"]
        got["lines_off"] += off["lines@10"]
        got["lines_chosen"] += pick["lines@10"]
        got["n"] += off["n"]
    gain = (got["mh_chosen"] - got["mh_off"]) / max(got["n_mh"], 1)
    lines = got["lines_chosen"] / max(got["lines_off"], 1) - 1
    return {"multihop_allr10": [got["mh_off"] / got["n_mh"], got["mh_chosen"] / got["n_mh"]], "gain": gain,
            "R@1_queries": got["R@1"], "MRR@10_queries": got["MRR@10"], "lines_change": lines,
            "generalises": gain >= 0.03 and got["R@1"] >= -1 and got["MRR@10"] >= -1 and lines <= 0.05}


def main() -> None:
    global LINE_CHUNKS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("eval_dir", type=Path, help=EVAL_DIR_HELP)
    ap.add_argument("--work", type=Path, default=Path("/tmp/memoryd-eval"))
    ap.add_argument("--depth", type=int, default=Config().search.candidates)
    ap.add_argument("--cache", type=Path, default=None, help="keep capture and vectors here between runs")
    ap.add_argument("--cold", type=int, default=5, help="questions per folder timed with no line memo")
    ap.add_argument("--line-chunks", type=int, default=30,
                    help="chunks of each question's ranking whose lines are read (the daemon reads k x 3)")
    args = ap.parse_args()
    LINE_CHUNKS = args.line_chunks
    if args.cache:
        args.cache.mkdir(parents=True, exist_ok=True)
    qs, differ = load_or_capture(args.eval_dir, args.work, args.depth, args.cache)
    print(f"unchanged order vs the shipped search: {differ} of {len(qs)} questions differ")
    raw = {json.loads(x)["qid"]: json.loads(x)["question"]
           for f in args.eval_dir.iterdir() if (f / "queries.jsonl").exists()
           for x in (f / "queries.jsonl").read_text().splitlines() if x.strip()}
    embedder = load_embedder(Config().embedding, args.work / "model")
    cold = cold_cost(qs, embedder, args.cold) if args.cold else {}
    if cold:
        print(f"cold line embedding per question ({cold['questions']:.0f} questions, first {LINE_CHUNKS} chunks, "
              f"no memo): lines p50 {cold['lines_p50']:.0f} mean {cold['lines_mean']:.0f}; ms p50 "
              f"{cold['ms_p50']:.0f} mean {cold['ms_mean']:.0f}; {cold['ms_per_line']:.2f} ms a line")
    qvec, memo, memo_cost = vectors(qs, raw, embedder, args.cache)
    print(f"memoised pass: {memo_cost['lines_embedded']:.0f} lines embedded in {memo_cost['seconds']:.1f} s; "
          f"{memo_cost['lines_known']:.0f} distinct lines over {len(qs)} questions")
    cos_of = cosines(qs, qvec, memo)
    sep = separability(qs, cos_of)
    print(f"multi-hop tail (merged hits 4+ in the first {LINE_CHUNKS} chunks), evidence hit above a hit without: "
          f"fused score {sep['auc_fused']:.3f}, best line cosine {sep['auc_cos']:.3f} ({sep['pairs']:.0f} pairs); "
          f"neighbouring hits with the same score: {sep['tied_neighbours']:.0f} of {sep['neighbours']:.0f}")
    runs = {"off": run(qs, None)}
    fams = families(cos_of, chunk_cosines(qs))
    table = run_families(qs, fams, runs)
    print("\nleave-one-conversation-out, per family (held-out multi-hop AllR@10 off -> chosen; R@1; MRR@10; lines@10)")
    chosen: dict[str, list[dict[str, Any]]] = {}
    verdicts: dict[str, dict[str, Any]] = {}
    for fam, orders in fams.items():
        chosen[fam] = loco(qs, runs, ["off", *(f"{fam} {k}" for k in orders)])
        v = verdicts[fam] = verdict(qs, chosen[fam], runs)
        deltas = " ".join(f"{r['multihop_allr10'][1] - r['multihop_allr10'][0]:+.3f}" for r in chosen[fam])
        print(f"{fam:<8} pooled {v['multihop_allr10'][0]:.3f} -> {v['multihop_allr10'][1]:.3f} ({deltas}); "
              f"R@1 {v['R@1_queries']:+.0f} MRR@10 {v['MRR@10_queries']:+.2f} queries; lines@10 "
              f"{v['lines_change']:+.1%}; generalises: {v['generalises']}")
        for r in chosen[fam]:
            print(f"    {r['held_out']:<16} {r['chosen']}")
        best = max((f"{fam} {k}" for k in orders), key=lambda lab: pooled(qs, runs[lab], is_mh)["AllR@10"])
        c = v["best_on_all_five"] = changes(qs, runs, best)
        print(f"    best on all five, {best}: multi-hop questions up {c['up']} down {c['down']}; AllR@10 "
              + ", ".join(f"{k} {ab[0]:.3f}->{ab[1]:.3f}" for k, ab in c.items() if isinstance(ab, list)))
    print(json.dumps({"depth": args.depth, "differ": differ, "line_chunks": LINE_CHUNKS, "cold": cold,
                      "memoised": memo_cost, "separability": sep, "table": table, "loco": chosen,
                      "verdict": verdicts}))


if __name__ == "__main__":
    main()
