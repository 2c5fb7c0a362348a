#!/usr/bin/env python3
"""Leave-one-conversation-out choice of a setting, from saved ``bench/eval_retrieval.py`` results.

    python bench/loco_select.py EVAL_DIR --run 0=DIR0 --run 0.1=DIR1 ... [--mode hybrid]

Each ``--run LABEL=DIR`` is the ``results`` folder of one ``eval_retrieval.py`` run (copy it away between
runs: the next run overwrites it). For every conversation folder, the label with the best MRR@10 on the
*other* folders (pooled; ties go to the first ``--run``, list the default first) is scored on the held-out
one. Prints, per data-set group, the default's scores, the held-out scores of the chosen labels and which
labels were chosen, then one JSON line. A setting earns its keep only if the held-out scores beat the default.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

GROUPS = ("locomo", "madial")


def scores(scorer: Path, queries: list[str], results: list[str]) -> dict[str, float]:
    """The scorer's overall numbers for these query and result lines."""
    with tempfile.TemporaryDirectory() as tmp:
        q, r = Path(tmp) / "q.jsonl", Path(tmp) / "r.jsonl"
        q.write_text("".join(queries))
        r.write_text("".join(results))
        out = subprocess.run([sys.executable, str(scorer), str(q), str(r)], capture_output=True, text=True,
                             check=True)
    overall: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])["overall"]
    return overall


def lines(path: Path) -> list[str]:
    return [x + "\n" for x in path.read_text().splitlines() if x.strip()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("eval_dir", type=Path)
    ap.add_argument("--run", action="append", required=True, metavar="LABEL=DIR")
    ap.add_argument("--mode", default="hybrid")
    args = ap.parse_args()
    runs = dict(kv.split("=", 1) for kv in args.run)
    scorer = args.eval_dir / "score.py"
    folders = sorted(p.name for p in args.eval_dir.iterdir() if (p / "queries.jsonl").exists())
    queries = {f: lines(args.eval_dir / f / "queries.jsonl") for f in folders}
    results = {label: {f: lines(Path(d) / f"{f}.{args.mode}.jsonl") for f in folders} for label, d in runs.items()}
    default = next(iter(runs))
    chosen: dict[str, str] = {}
    for held in folders:
        rest = [f for f in folders if f != held]
        pooled_q = [x for f in rest for x in queries[f]]
        train = {lab: scores(scorer, pooled_q, [x for f in rest for x in results[lab][f]])["MRR@10"]
                 for lab in runs}
        chosen[held] = max(runs, key=lambda lab: (train[lab], -list(runs).index(lab)))
    summary: dict[str, Any] = {"chosen": chosen}
    print(f"{'group':<8} {'setting':<22} {'R@1':>6} {'MRR@10':>7}")
    for group in GROUPS:
        names = [f for f in folders if f.startswith(group)]
        if not names:
            continue
        q = [x for f in names for x in queries[f]]
        rows = {f"default ({default})": [x for f in names for x in results[default][f]],
                "held-out choice": [x for f in names for x in results[chosen[f]][f]]}
        rows.update({f"all folders {lab}": [x for f in names for x in results[lab][f]] for lab in runs})
        summary[group] = {}
        for name, res in rows.items():
            s = scores(scorer, q, res)
            summary[group][name] = {"R@1": round(s["R@1"], 4), "MRR@10": round(s["MRR@10"], 4)}
            print(f"{group:<8} {name:<22} {s['R@1']:>6.4f} {s['MRR@10']:>7.4f}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
