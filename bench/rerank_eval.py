#!/usr/bin/env python3
"""Measure a ``/rerank`` server as memoryd's reranker: R@1, multi-hop AllR@10 and abstention, with and without it.

    python bench/rerank_eval.py URL [EVAL_DIR] [--model NAME] [--api auto|documents|tei] [--key-env VAR]
                                [--timeout-ms 5000] [--top-n 30] [--work DIR]

Each eval folder is indexed with the default config (as ``eval_retrieval.py`` does) and searched twice:
without ``[rerank]`` and with it pointed at URL. Reported per data-set group: R@1, MRR@10 and LoCoMo's
multi-hop (category 1) AllR@10; the reranker's fallbacks (every one is a search that kept the fused
order: a server that falls back often is too slow for ``--timeout-ms``); and abstention at
``search.min_score``: the share of agent-chat prompts and off-topic questions (bench/relevance_sets.py,
dev half) that abstain, and the share of answerable questions that keep a hit.

It then fits ``rerank.scale`` and ``rerank.shift`` (a logistic fit of the top hit's relevance on the
reranker's logit, positives against the negatives) and prints them with the abstention they give, to
paste into ``[rerank]`` so that ``min_score`` keeps its meaning for this model. Checks for the llama.cpp
trap (docs/quality.md, "Remote reranker"): the script warns when the server's scores are (nearly) the
same for every passage or all near zero, the signs of a reranker family llama.cpp's ``/v1/rerank`` does
not score right (Qwen3-based rerankers among them), and when R@1 falls with the reranker on.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_retrieval import EVAL_DIR_HELP, GROUPS, index_folder, score
from relevance_sets import chat_prompts, offtopic

from memoryd.indexer.config import Config
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.search.query import Query
from memoryd.indexer.search.rerank_step import logit
from memoryd.indexer.settings.rerank import RerankConfig


def _hits(res: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"path": h["path"], "start_line": h["start_line"], "end_line": h["end_line"]} for h in res["hits"]]


def _relevant(hit: dict[str, Any], relevant: list[dict[str, Any]]) -> bool:
    return any(r["path"] == hit["path"] and hit["start_line"] <= r["line"] <= hit["end_line"] for r in relevant)


def run_folder(folder: Path, work: Path, cfg: Config, embedder: Any, negatives: list[str]) -> dict[str, Any]:
    index, fcfg, queries = index_folder(folder, work, cfg, embedder)
    threshold = fcfg.search.min_score
    out: dict[str, Any] = {"results": [], "kept": 0, "neg_abstained": 0, "neg": 0, "fit": [], "raw": []}
    for q in queries:
        res = index.query(Query(q["question"], k=10, explain=True)).to_json()
        out["results"].append({"qid": q["qid"], "hits": _hits(res)})
        out["kept"] += bool(res["hits"]) and res["hits"][0]["score"] >= threshold
        top = res["hits"][0] if res["hits"] else None
        if top is not None and "rerank_score" in top["explain"]:
            out["fit"].append((top["explain"]["rerank_score"], 1.0 if _relevant(top, q["relevant"]) else 0.0))
            out["raw"] += [h["explain"]["rerank_score"] for h in res["hits"] if "rerank_score" in h["explain"]]
    for text in negatives:
        res = index.query(Query(text, k=10, explain=True)).to_json()
        out["neg"] += 1
        top = res["hits"][0] if res["hits"] else None
        out["neg_abstained"] += top is None or top["score"] < threshold
        if top is not None and "rerank_score" in top["explain"]:
            out["fit"].append((top["explain"]["rerank_score"], 0.0))
    st = index.status().to_json().get("rerank") or {}
    out["fallbacks"], out["applied"] = st.get("fallbacks", 0), st.get("applied", 0)
    index.close()
    return out


def fit_scale(rows: list[tuple[float, float]], probability: bool) -> tuple[float, float]:
    """``scale``, ``shift`` of sigmoid(scale * logit + shift) by a few Newton steps (light L2 on the scale)."""
    if len({y for _, y in rows}) < 2:
        return 1.0, 0.0
    x = np.array([logit(s) if probability else s for s, _ in rows])
    y = np.array([v for _, v in rows])
    a, b = 1.0, 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-(a * x + b)))
        w = p * (1 - p) + 1e-9
        grad = np.array([np.sum((p - y) * x) + 1e-2 * a, np.sum(p - y)])
        hess = np.array([[np.sum(w * x * x) + 1e-2, np.sum(w * x)], [np.sum(w * x), np.sum(w)]])
        a, b = np.array([a, b]) - np.linalg.solve(hess, grad)
    return float(max(a, 1e-3)), float(b)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("eval_dir", type=Path, help=EVAL_DIR_HELP)
    ap.add_argument("--model", default="")
    ap.add_argument("--api", default="auto", choices=["auto", "documents", "tei"])
    ap.add_argument("--key-env", default="", help="the environment variable holding the server's key")
    ap.add_argument("--timeout-ms", type=int, default=5000)
    ap.add_argument("--top-n", type=int, default=30)
    ap.add_argument("--work", type=Path, default=Path("/tmp/memoryd-rerank-eval"))
    args = ap.parse_args()
    import os

    scorer = args.eval_dir / "score.py"
    folders = sorted(p for p in args.eval_dir.iterdir() if (p / "queries.jsonl").exists())
    base = Config()
    embedder = load_embedder(base.embedding, args.work / "model")
    rerank = RerankConfig(url=args.url, model=args.model, api=args.api, api_key_env=args.key_env,
                          timeout_ms=args.timeout_ms, top_n=args.top_n)
    key = os.environ.get(args.key_env, "") if args.key_env else ""
    negatives = chat_prompts("dev") + offtopic()
    runs = {"fused": base, "reranked": dataclasses.replace(base, rerank=rerank, rerank_api_key=key)}
    per = {run: {f.name: run_folder(f, args.work / run, cfg, embedder, negatives) for f in folders}
           for run, cfg in runs.items()}
    summary: dict[str, Any] = {"url": args.url, "model": args.model, "min_score": base.search.min_score}
    for group in GROUPS:
        names = [f.name for f in folders if f.name.startswith(group)]
        if not names:
            continue
        qfile = args.work / f"{group}.queries.jsonl"
        qfile.write_text("".join((args.eval_dir / n / "queries.jsonl").read_text() for n in names))
        n_pos = sum(len((args.eval_dir / n / "queries.jsonl").read_text().splitlines()) for n in names)
        g: dict[str, Any] = {}
        for run in runs:
            rfile = args.work / f"{group}.{run}.jsonl"
            rfile.write_text("".join(json.dumps(r) + "\n" for n in names for r in per[run][n]["results"]))
            overall = score(scorer, qfile, rfile)
            cats = json.loads(_score_all(scorer, qfile, rfile))["by_category"]
            multi = next((v for k, v in cats.items() if str(k).startswith("1")), None)
            neg = sum(per[run][n]["neg"] for n in names)
            g[run] = {"R@1": round(overall["R@1"], 4), "MRR@10": round(overall["MRR@10"], 4),
                      "multihop_AllR@10": round(multi["AllR@10"], 4) if multi else None,
                      "negatives_abstained": round(sum(per[run][n]["neg_abstained"] for n in names) / max(neg, 1), 4),
                      "answerable_kept": round(sum(per[run][n]["kept"] for n in names) / max(n_pos, 1), 4),
                      "fallbacks": sum(per[run][n].get("fallbacks", 0) for n in names)}
            print(f"{group:<7} {run:<9} R@1 {g[run]['R@1']:.3f}  MRR@10 {g[run]['MRR@10']:.3f}  multi-hop AllR@10 "
                  f"{g[run]['multihop_AllR@10']}  negatives abstained {g[run]['negatives_abstained']:.3f}  "
                  f"answerable kept {g[run]['answerable_kept']:.3f}  fallbacks {g[run]['fallbacks']}")
        rows = [r for n in names for r in per["reranked"][n]["fit"]]
        raw = [s for n in names for s in per["reranked"][n]["raw"]]
        probability = bool(raw) and all(0.0 <= s <= 1.0 for s in raw)
        g["fit"] = dict(zip(("scale", "shift"), fit_scale(rows, probability), strict=True))
        g["fit"]["score_kind"] = "probability" if probability else "logit"
        summary[group] = g
        _warn(group, raw, g)
    print(f"[rerank] suggestion (LoCoMo fit): {json.dumps(summary.get('locomo', {}).get('fit'))}")
    print(json.dumps(summary))


def _score_all(scorer: Path, qfile: Path, rfile: Path) -> str:
    import subprocess

    out = subprocess.run([sys.executable, str(scorer), str(qfile), str(rfile)], capture_output=True, text=True,
                         check=True)
    return out.stdout.strip().splitlines()[-1]


def _warn(group: str, raw: list[float], g: dict[str, Any]) -> None:
    """The llama.cpp trap's signs (docs/quality.md): scores all alike, all near zero, or a worse R@1."""
    if not raw:
        print(f"WARNING {group}: no search was reranked (every call fell back: see the fallbacks)")
        return
    spread = float(np.std(raw))
    if spread < 1e-3:
        print(f"WARNING {group}: the server gives (nearly) the same score to every passage (sd {spread:.2g}): "
              f"it is not scoring this model right")
    if max(abs(s) for s in raw) < 1e-6 or all(math.isclose(s, 0.0, abs_tol=1e-9) for s in raw):
        print(f"WARNING {group}: every score is near zero: a reranker family the server's /rerank does not support")
    if g["reranked"]["R@1"] < g["fused"]["R@1"]:
        print(f"WARNING {group}: R@1 is lower with the reranker ({g['reranked']['R@1']} < {g['fused']['R@1']})")


if __name__ == "__main__":
    main()
