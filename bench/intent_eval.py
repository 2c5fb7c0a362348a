#!/usr/bin/env python3
"""Query intent, synonym expansion and the weak-result fallback, measured leave-one-conversation-out.

    python bench/intent_eval.py [EVAL_DIR] [--work DIR] [--k 10]

Each mechanism has a small grid of settings (``GRID``); "off" is its setting
that reproduces memoryd without it. Every setting runs on every folder of the
dev sets (5 LoCoMo conversations + MADial) in hybrid mode, the other two
mechanisms off, and is scored per folder. Then, per mechanism and per held-out
folder, the setting with the best mean R@1 (then MRR@10) over the *other*
folders is chosen and scored on the held-out one, against "off". A mechanism
is kept on by default only if, summed over the held-out folders, the chosen
settings lose neither R@1 nor MRR@10. A last row runs the shipped defaults
(all three on) against all three off.

Prints the per-setting and per-fold tables, then one JSON line. Query
embeddings are computed once and reused by every setting; indexes live under
``--work`` (copy a finished ``bench/eval_retrieval.py`` work dir to skip
embedding the corpus).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memoryd.indexer.search.query import Query

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eval_retrieval import EVAL_DIR_HELP, prepare_root, score

from memoryd.daemon.watch.pathfilter import PathFilter
from memoryd.indexer.config import Config, EmbeddingConfig, SearchConfig, with_overrides
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.engine import open_index
from memoryd.indexer.ingestion.reconcile import reconcile
from memoryd.indexer.search.querytext import clean_query

OFF: dict[str, Any] = {"intent_boost": 0.0, "synonyms": False, "fallback_candidates": 0}
GRID: dict[str, list[dict[str, Any]]] = {
    "intent": [{"intent_boost": v} for v in (0.0, 0.5, 1.0, 2.0)],
    "synonyms": [{"synonyms": v} for v in (False, True)],
    "fallback": [{"fallback_candidates": 0}]
    + [{"fallback_candidates": n, "min_score": t} for n in (200,) for t in (0.3, 0.5, 0.7)],  # calibrated
}
Scores = dict[str, dict[str, Any]]  # folder -> {"R@1", "MRR@10", "n", "triggered": {mechanism: queries}}


def label(setting: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in setting.items())


def run_setting(folders: list[Path], work: Path, base: Config, embedder: Any, qvecs: dict[str, Any],
                setting: dict[str, Any], k: int) -> Scores:
    """Run every query of every folder with ``setting`` over the all-off search config; score per folder."""
    cfg = dataclasses.replace(base, search=dataclasses.replace(base.search, **{**OFF, **setting}))
    out: Scores = {}
    for folder in folders:
        fcfg = with_overrides(cfg, roots=[work / "roots" / folder.name], data_dir=work / "data" / folder.name)
        index = open_index(fcfg, embedder)
        pf = PathFilter(fcfg.watch.include, fcfg.watch.exclude)
        reconcile(index, [work / "roots" / folder.name], pf, pf.accept_dir)
        rows: list[dict[str, Any]] = []
        took = 0.0
        triggered = {"intent": 0, "synonyms": 0, "fallback": 0}
        for q in _queries(folder):
            vec = qvecs[q["qid"]]
            asked = Query(q["question"], k=k, mode="hybrid", explain=True, query_vector=_const(vec))
            res = index.query(asked).to_json()
            took += res["took_ms"]
            for key in triggered:  # how many queries each mechanism touched
                triggered[key] += bool(res["query_analysis"][key])
            rows.append({"qid": q["qid"], "hits": [{k2: h[k2] for k2 in ("path", "start_line", "end_line")}
                                                   for h in res["hits"]]})
        index.close()
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write("".join(json.dumps(r) + "\n" for r in rows))
        s = score(folder.parent / "score.py", folder / "queries.jsonl", Path(f.name))
        Path(f.name).unlink()
        out[folder.name] = {"R@1": s["R@1"], "MRR@10": s["MRR@10"], "n": s["n"], "triggered": triggered,
                            "ms_per_query": round(took / max(len(rows), 1), 2)}
    return out


def _const(vec: Any) -> Callable[[], Any]:
    return lambda: vec


def _queries(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (folder / "queries.jsonl").read_text().splitlines() if x.strip()]


def _mean(scores: Scores, names: list[str], key: str) -> float:
    return sum(scores[n][key] for n in names) / len(names)


def loo(grid: list[dict[str, Any]], table: dict[str, Scores], names: list[str]) -> list[dict[str, Any]]:
    """Per held-out folder: the setting chosen on the others, and its held-out deltas against "off"."""
    off = label(grid[0])
    folds = []
    for held in names:
        rest = [n for n in names if n != held]
        best = max((label(s) for s in grid),
                   key=lambda lb: (_mean(table[lb], rest, "R@1"), _mean(table[lb], rest, "MRR@10")))
        folds.append({"held_out": held, "chosen": best,
                      "dR@1": round(table[best][held]["R@1"] - table[off][held]["R@1"], 4),
                      "dMRR": round(table[best][held]["MRR@10"] - table[off][held]["MRR@10"], 4)})
    return folds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("eval_dir", type=Path, help=EVAL_DIR_HELP)
    ap.add_argument("--work", type=Path, default=Path("/tmp/memoryd-eval"))
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    folders = sorted(p for p in args.eval_dir.iterdir() if (p / "queries.jsonl").exists())
    names = [f.name for f in folders]
    base = dataclasses.replace(Config(), embedding=EmbeddingConfig(provider="e5-small"))
    embedder = load_embedder(base.embedding, args.work / "model")
    for folder in folders:
        prepare_root(folder, args.work / "roots" / folder.name)
    qvecs = {q["qid"]: embedder.embed_query(clean_query(q["question"])) for f in folders for q in _queries(f)}
    report: dict[str, Any] = {}
    for mech, grid in GRID.items():
        table = {label(s): run_setting(folders, args.work, base, embedder, qvecs, s, args.k) for s in grid}
        print(f"\n## {mech}: R@1/MRR@10 (queries it touched) per folder\n{'setting':<50} "
              + " ".join(f"{n[-8:]:>17}" for n in names))
        for lb, sc in table.items():
            print(f"{lb:<50} " + " ".join(
                f"{sc[n]['R@1']:.3f}/{sc[n]['MRR@10']:.3f}({sc[n]['triggered'][mech]:>3})" for n in names))
        folds = loo(grid, table, names)
        for f in folds:
            print(f"  held out {f['held_out']:<18} chosen {f['chosen']:<42} "
                  f"dR@1 {f['dR@1']:+.4f} dMRR {f['dMRR']:+.4f}")
        d_r1, d_mrr = sum(f["dR@1"] for f in folds), sum(f["dMRR"] for f in folds)
        keep = d_r1 >= 0 and d_mrr >= 0
        print(f"  sum over held-out folders: dR@1 {d_r1:+.4f} dMRR {d_mrr:+.4f} -> {'keep on' if keep else 'off'}")
        report[mech] = {"table": table, "folds": folds, "sum_dR@1": round(d_r1, 4), "sum_dMRR": round(d_mrr, 4),
                        "keep": keep}
    shipped = {k: getattr(SearchConfig(), k) for k in ("intent_boost", "synonyms", "fallback_candidates",
                                                       "min_score")}
    # The reference row asks whether the weak-result test matters: every query with the wider candidate set.
    both = {"off": run_setting(folders, args.work, base, embedder, qvecs, {}, args.k),
            "shipped": run_setting(folders, args.work, base, embedder, qvecs, shipped, args.k),
            "always_wide": run_setting(folders, args.work, base, embedder, qvecs,
                                       {"candidates": shipped["fallback_candidates"]}, args.k)}
    for other in ("shipped", "always_wide"):
        print(f"\n## {label(shipped) if other == 'shipped' else 'candidates=200 for every query'} vs all off")
        for n in names:
            o, s = both["off"][n], both[other][n]
            print(f"  {n:<20} R@1 {o['R@1']:.4f} -> {s['R@1']:.4f}  MRR@10 {o['MRR@10']:.4f} -> {s['MRR@10']:.4f}"
                  f"  ms/query {o['ms_per_query']:.1f} -> {s['ms_per_query']:.1f}")
    report["shipped"] = {"settings": shipped, **both}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
