#!/usr/bin/env python3
"""Search while vectors are pending: half of the chunk vectors withheld, against keyword-only and whole.

    python bench/pending_legs.py [EVAL_DIR] [--work DIR] [--share 0.5]

Each folder is indexed whole (the default config and model, as ``eval_retrieval.py`` does), searched
in ``keyword`` and ``hybrid`` mode, then the vectors of a share of its chunks (chosen by sha256 of the
chunk id, the same share every run) are removed from the vector index in memory, as keyword-first
indexing leaves them while the backlog is embedded, and the hybrid search runs again with
``--explain``. Printed per data-set group: R@1 / MRR@10 of the three, and among hits at or above
``search.min_score`` on queries with content words, how many hold no query content term
(``coverage`` 0): the issue's bar is R@1 (withheld) >= R@1 (keyword) and none such above the threshold.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from eval_retrieval import EVAL_DIR_HELP, GROUPS, index_folder, score

from memoryd.indexer.config import Config
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.search.query import Query


def withheld(chunk_id: int, share: float) -> bool:
    """Whether ``chunk_id``'s vector is withheld: a fixed pseudo-random ``share`` of the chunks."""
    return int(hashlib.sha256(str(chunk_id).encode()).hexdigest()[:8], 16) / 0xFFFFFFFF < share


def _hits(res: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"path": h["path"], "start_line": h["start_line"], "end_line": h["end_line"]} for h in res["hits"]]


def run_folder(folder: Path, work: Path, cfg: Config, embedder: Any, share: float) -> dict[str, Any]:
    index, fcfg, queries = index_folder(folder, work, cfg, embedder)
    out: dict[str, Any] = {"keyword": [], "hybrid": [], "withheld": [], "above": 0, "above_no_kw": 0, "pending": 0}
    for q in queries:
        for mode in ("keyword", "hybrid"):
            res = index.query(Query(q["question"], k=10, mode=mode)).to_json()  # type: ignore[arg-type]
            out[mode].append({"qid": q["qid"], "hits": _hits(res)})
    ids = [int(i) for i in index.backend.faiss.ids().tolist()]
    gone = [i for i in ids if withheld(i, share)]
    kept = index.backend.faiss.vectors_of(gone)
    with index.lock:
        index.backend.faiss.remove(gone)  # put back before close(), which saves the snapshot
    out["pending"] = len(gone)
    threshold = fcfg.search.min_score
    for q in queries:
        res = index.query(Query(q["question"], k=10, mode="hybrid", explain=True)).to_json()
        out["withheld"].append({"qid": q["qid"], "hits": _hits(res)})
        for h in res["hits"]:
            cal = h["explain"]["calibration"]
            if not cal["content"] or h["score"] < threshold:
                continue
            out["above"] += 1
            out["above_no_kw"] += cal["coverage"] <= 0.0
    with index.lock:
        index.backend.faiss.add(gone, kept)
    index.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("eval_dir", type=Path, help=EVAL_DIR_HELP)
    ap.add_argument("--work", type=Path, default=Path("/tmp/memoryd-pending-legs"))
    ap.add_argument("--share", type=float, default=0.5, help="the share of chunk vectors withheld")
    args = ap.parse_args()
    scorer = args.eval_dir / "score.py"
    folders = sorted(p for p in args.eval_dir.iterdir() if (p / "queries.jsonl").exists())
    cfg = Config()
    embedder = load_embedder(cfg.embedding, args.work / "model")
    (args.work / "results").mkdir(parents=True, exist_ok=True)
    per = {f.name: run_folder(f, args.work, cfg, embedder, args.share) for f in folders}
    summary: dict[str, Any] = {}
    for group in GROUPS:
        names = [n for n in per if n.startswith(group)]
        if not names:
            continue
        qfile = args.work / "results" / f"{group}.queries.jsonl"
        qfile.write_text("".join((args.eval_dir / n / "queries.jsonl").read_text() for n in names))
        g: dict[str, Any] = {"pending": sum(per[n]["pending"] for n in names),
                             "above_threshold": sum(per[n]["above"] for n in names),
                             "above_without_keyword": sum(per[n]["above_no_kw"] for n in names)}
        for run in ("keyword", "hybrid", "withheld"):
            rfile = args.work / "results" / f"{group}.{run}.jsonl"
            rfile.write_text("".join(json.dumps(r) + "\n" for n in names for r in per[n][run]))
            s = score(scorer, qfile, rfile)
            g[run] = {"R@1": round(s["R@1"], 4), "MRR@10": round(s["MRR@10"], 4)}
        summary[group] = g
        print(f"{group:<8} keyword R@1 {g['keyword']['R@1']:.3f}  hybrid {g['hybrid']['R@1']:.3f}  "
              f"{args.share:.0%} withheld {g['withheld']['R@1']:.3f} (MRR@10 {g['withheld']['MRR@10']:.3f}); "
              f"hits >= min_score {g['above_threshold']}, without keyword evidence {g['above_without_keyword']}")
    print(json.dumps({"share": args.share, "min_score": cfg.search.min_score, "search": dataclasses.asdict(cfg.search),
                      **summary}))


if __name__ == "__main__":
    main()
