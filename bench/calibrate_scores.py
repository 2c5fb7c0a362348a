#!/usr/bin/env python3
"""Fit the calibrated hit score and choose the abstention threshold (``search.min_score``) on the dev sets.

    python bench/calibrate_scores.py [EVAL_DIR] [--work DIR] [--reuse] [--target 0.95]

Runs memoryd's own search (default settings, k = 10, ``explain``) on every
folder of EVAL_DIR (the layout of bench/eval_retrieval.py, whose ``--work``
indexes it re-uses) with three kinds of queries:

- positives: the folder's own questions (a hit is relevant when it holds an
  evidence line);
- cross negatives: questions that cannot be answered there — for a LoCoMo
  conversation the next conversation's questions (names differ between
  conversations, so even generic ones are unanswerable) and every MADial
  question; for MADial every third question of each LoCoMo conversation;
- off-topic negatives: ``bench/data/offtopic_en.txt`` and ``offtopic_zh.txt``
  against every folder (each question is assigned to one fold, round-robin).

It records each hit's calibration features (cosine, keyword coverage, missing terms)
in ``WORK/calibration/rows.jsonl`` (``--reuse`` skips the searches), then:

1. leave-one-conversation-out: for each folder, fit the logistic model and
   choose the threshold on the rows that involve neither that folder nor its
   questions (nor the off-topic questions of its fold), and report the held-out share of negatives that abstain and of
   positive R@10 kept;
2. the fit and threshold on all rows (the shipped coefficients), the curve of
   abstention precision/recall and positive R@10 kept versus threshold, and
   the same numbers with the scores the engine returns (so a run after
   pasting the coefficients into ``indexer/search/calibration.py`` checks them).

The threshold rule: the lowest threshold at which ``--target`` of the
training negatives abstain. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.eval_retrieval import DEFAULT_EVAL, prepare_root
from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.config import Config, with_overrides
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import MemoryIndex
from memoryd.indexer.reconcile import reconcile
from memoryd.indexer.search import calibration
from memoryd.indexer.search.querytext import clean_query

DATA = Path(__file__).resolve().parent / "data"
K = 10
L2 = 1e-2  # on a training set weighted to its size: a light touch that keeps the fit finite
HYBRID = (0, 1, 2, 3)  # design() columns of calibration.HYBRID_COEF
KEYWORD = (0, 2, 3)  # ... and of calibration.KEYWORD_COEF (no cosine)
THRESHOLDS = [round(x, 2) for x in np.arange(0.05, 0.96, 0.05)]


def load_queries(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (folder / "queries.jsonl").read_text().splitlines() if x.strip()]


def offtopic() -> list[str]:
    out = []
    for name in ("offtopic_en.txt", "offtopic_zh.txt"):
        out += [x.strip() for x in (DATA / name).read_text(encoding="utf-8").splitlines()
                if x.strip() and not x.startswith("#")]
    return out


def query_plan(folders: list[Path]) -> dict[str, list[dict[str, Any]]]:
    """Per folder name: the queries to run there, each with its kind and the fold its question belongs to."""
    names = [f.name for f in folders]
    qs = {f.name: load_queries(f) for f in folders}
    locomo = [n for n in names if n.startswith("locomo")]
    madial = [n for n in names if n.startswith("madial")]
    extra = offtopic()
    plan: dict[str, list[dict[str, Any]]] = {}
    for n in names:
        rows = [{"kind": "pos", "source": n, "qid": q["qid"], "question": q["question"],
                 "relevant": q["relevant"]} for q in qs[n]]
        if n in locomo:
            other = [locomo[(locomo.index(n) + 1) % len(locomo)], *madial]
            cross = [(o, q) for o in other for q in qs[o]]
        else:
            cross = [(o, q) for o in locomo for q in qs[o][::3]]
        rows += [{"kind": "cross", "source": o, "qid": q["qid"], "question": q["question"]} for o, q in cross]
        rows += [{"kind": "offtopic", "source": names[i % len(names)], "qid": f"offtopic-{i:03d}", "question": x}
                 for i, x in enumerate(extra)]
        plan[n] = rows
    return plan


def relevant_hit(hit: dict[str, Any], relevant: Sequence[dict[str, Any]]) -> bool:
    return any(r["path"] == hit["path"] and hit["start_line"] <= r["line"] <= hit["end_line"] for r in relevant)


def run_searches(eval_dir: Path, work: Path) -> list[dict[str, Any]]:
    """Every planned query through MemoryIndex.search; one row per (folder, query) with its hits' features."""
    folders = sorted(p for p in eval_dir.iterdir() if (p / "queries.jsonl").exists())
    cfg = Config()
    embedder = load_embedder(cfg.embedding, work / "model")
    plan = query_plan(folders)
    vectors: dict[str, Any] = {}
    out: list[dict[str, Any]] = []
    for folder in folders:
        root = work / "roots" / folder.name
        prepare_root(folder, root)
        fcfg = with_overrides(cfg, roots=[root], data_dir=work / "data" / folder.name)
        index = MemoryIndex(fcfg, embedder)
        pf = PathFilter(fcfg.watch.include, fcfg.watch.exclude)
        reconcile(index, [root], pf, pf.accept_dir)
        for q in plan[folder.name]:
            text = clean_query(q["question"])
            if text not in vectors:
                vectors[text] = embedder.embed_query(text)
            vec = vectors[text]
            res = index.search(q["question"], k=K, explain=True, query_vector=lambda v=vec: v).to_json()
            hits = [{"score": h["score"], **h["explain"]["calibration"],
                     "relevant": relevant_hit(h, q["relevant"]) if q["kind"] == "pos" else False}
                    for h in res["hits"]]
            out.append({"folder": folder.name, "kind": q["kind"], "source": q["source"], "qid": q["qid"],
                        "hits": hits})
        index.close()
        print(f"searched {folder.name}: {len(plan[folder.name])} queries", file=sys.stderr)
    return out


# -- the model --------------------------------------------------------------------


def design(hits: Sequence[dict[str, Any]]) -> np.ndarray:
    """Feature rows as calibration.probability weighs them: [1, cosine, coverage, missing]."""
    return np.array([[1.0, h["cosine"] or 0.0, h["coverage"], h["missing"]] for h in hits], dtype=np.float64)


def training_set(rows: Sequence[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """X, y, weights. Positive: each positive query's first relevant hit. Negative: every hit of a
    negative query, weighted 1/len(hits). Other hits of positive queries are left out (they may be
    related without holding the evidence line). Both classes weigh the same in total; the weights
    sum to the number of rows."""
    pos, neg, wneg = [], [], []
    for r in rows:
        if r["kind"] == "pos":
            rel = [h for h in r["hits"] if h["relevant"]]
            pos += rel[:1]
        elif r["hits"]:
            neg += r["hits"]
            wneg += [1.0 / len(r["hits"])] * len(r["hits"])
    x = design([*pos, *neg])
    y = np.array([1.0] * len(pos) + [0.0] * len(neg))
    w = np.array([1.0 / len(pos)] * len(pos) + [v / sum(wneg) for v in wneg])
    return x, y, w * len(y) / 2


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Weighted logistic regression by Newton's method with a small L2 penalty (not on the intercept)."""
    beta = np.zeros(x.shape[1])
    reg = np.eye(x.shape[1]) * L2
    reg[0, 0] = 0.0
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(x @ beta)))
        grad = x.T @ (w * (p - y)) + reg @ beta
        hess = x.T @ (x * (w * p * (1 - p))[:, None]) + reg + np.eye(x.shape[1]) * 1e-9
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def scored(rows: Sequence[dict[str, Any]], beta: np.ndarray | None, cols: Sequence[int] = HYBRID) -> list[list[float]]:
    """Each row's monotone calibrated scores: recomputed with ``beta`` over the feature columns ``cols``,
    or the engine's (None)."""
    out = []
    for r in rows:
        if beta is None or not r["hits"]:
            out.append([h["score"] for h in r["hits"]])
        else:
            p = 1.0 / (1.0 + np.exp(-(design(r["hits"])[:, cols] @ beta)))
            out.append(calibration.monotone([float(v) for v in p]))
    return out


def outcome(rows: Sequence[dict[str, Any]], scores: Sequence[list[float]], t: float) -> dict[str, float]:
    """At threshold ``t``: share of negatives that abstain, positive R@10 kept, abstention precision."""
    neg_abstain = neg = pos = pos_r10 = pos_kept = pos_abstain = 0
    for r, s in zip(rows, scores, strict=True):
        abstains = not s or s[0] < t
        if r["kind"] == "pos":
            pos += 1
            pos_abstain += abstains
            ranks = [i for i, h in enumerate(r["hits"]) if h["relevant"]]
            pos_r10 += bool(ranks)
            pos_kept += bool(ranks) and s[ranks[0]] >= t
        else:
            neg += 1
            neg_abstain += abstains
    return {"threshold": t, "neg_abstain": neg_abstain / max(neg, 1), "pos_r10_kept": pos_kept / max(pos_r10, 1),
            "abstain_precision": neg_abstain / max(neg_abstain + pos_abstain, 1), "n_pos": pos, "n_neg": neg}


def choose(rows: Sequence[dict[str, Any]], scores: Sequence[list[float]], target: float) -> float:
    """The lowest threshold (0.01 steps) at which ``target`` of the negatives abstain."""
    for t in np.arange(0.01, 1.0, 0.01):
        if outcome(rows, scores, float(t))["neg_abstain"] >= target:
            return round(float(t), 2)
    return 0.99


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("eval_dir", nargs="?", type=Path, default=DEFAULT_EVAL)
    ap.add_argument("--work", type=Path, default=Path("/tmp/memoryd-eval"))
    ap.add_argument("--reuse", action="store_true", help="re-use WORK/calibration/rows.jsonl instead of searching")
    ap.add_argument("--target", type=float, default=0.95, help="share of training negatives that must abstain")
    args = ap.parse_args()
    cache = args.work / "calibration" / "rows.jsonl"
    if args.reuse and cache.exists():
        rows = [json.loads(x) for x in cache.read_text().splitlines()]
    else:
        rows = run_searches(args.eval_dir, args.work)
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("".join(json.dumps(r) + "\n" for r in rows))
    folders = sorted({r["folder"] for r in rows})

    print(f"{'held-out':<18} {'threshold':>9} {'neg abst':>8} {'R@10 kept':>9} {'precision':>9}  coefficients")
    folds = []
    for x in folders:
        train = [r for r in rows if r["folder"] != x and r["source"] != x]
        test = [r for r in rows if r["folder"] == x]
        beta = fit(*training_set(train))
        t = choose(train, scored(train, beta), args.target)
        o = outcome(test, scored(test, beta), t)
        folds.append({"fold": x, **{k: round(v, 4) for k, v in o.items()}})
        print(f"{x:<18} {t:>9.2f} {o['neg_abstain']:>8.3f} {o['pos_r10_kept']:>9.3f} {o['abstain_precision']:>9.3f}"
              f"  {np.round(beta, 2).tolist()}")
    na = [f["neg_abstain"] for f in folds]
    pk = [f["pos_r10_kept"] for f in folds]
    print(f"LOCO spread: neg abstain {min(na):.3f}..{max(na):.3f} (mean {np.mean(na):.3f}); "
          f"R@10 kept {min(pk):.3f}..{max(pk):.3f} (mean {np.mean(pk):.3f})")

    beta = fit(*training_set(rows))
    fitted, engine = scored(rows, beta), scored(rows, None)
    t_all = choose(rows, fitted, args.target)
    print(f"\nall rows: coefficients {np.round(beta, 3).tolist()}  threshold {t_all}")
    print(f"{'threshold':>9} {'neg abst':>8} {'precision':>9} {'R@10 kept':>9}   "
          f"engine: {'neg abst':>8} {'R@10 kept':>9}")
    curve = []
    for t in sorted({*THRESHOLDS, t_all}):
        o, e = outcome(rows, fitted, t), outcome(rows, engine, t)
        curve.append({"threshold": t, "neg_abstain": round(o["neg_abstain"], 4),
                      "abstain_precision": round(o["abstain_precision"], 4),
                      "pos_r10_kept": round(o["pos_r10_kept"], 4), "engine_neg_abstain": round(e["neg_abstain"], 4),
                      "engine_pos_r10_kept": round(e["pos_r10_kept"], 4)})
        print(f"{t:>9.2f} {o['neg_abstain']:>8.3f} {o['abstain_precision']:>9.3f} {o['pos_r10_kept']:>9.3f}"
              f"           {e['neg_abstain']:>8.3f} {e['pos_r10_kept']:>9.3f}")
    by_kind = {}
    for kind in ("pos", "cross", "offtopic"):
        sub = [(r, s) for r, s in zip(rows, engine, strict=True) if r["kind"] == kind]
        by_kind[kind] = {k: round(v, 4) for k, v in outcome([r for r, _ in sub], [s for _, s in sub], t_all).items()}
    print("engine scores at the chosen threshold, by kind:", json.dumps(by_kind))
    x, y, w = training_set(rows)
    beta_kw = fit(x[:, KEYWORD], y, w)
    kw = {k: round(v, 4) for k, v in outcome(rows, scored(rows, beta_kw, KEYWORD), t_all).items()}
    print(f"keyword-only model (no cosine): coefficients {np.round(beta_kw, 3).tolist()}; at {t_all}: "
          f"neg abstain {kw['neg_abstain']:.3f}, R@10 kept {kw['pos_r10_kept']:.3f}")
    print(json.dumps({"version": calibration.CALIBRATION_VERSION, "coefficients": np.round(beta, 4).tolist(),
                      "keyword_coefficients": np.round(beta_kw, 4).tolist(), "keyword_only": kw,
                      "threshold": t_all, "target": args.target, "loco": folds, "curve": curve,
                      "by_kind": by_kind, "config": dataclasses.asdict(Config().search)}))


if __name__ == "__main__":
    main()
