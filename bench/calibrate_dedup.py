#!/usr/bin/env python3
"""Calibrate (or check) the dedup thresholds of the write path on the labelled pair set.

    python bench/calibrate_dedup.py [--data tests/data/calibration.jsonl] [--provider e5-small]
                                    [--data-dir /tmp/memoryd-calibrate] [--check]

Embeds both sides of every pair exactly as the writer does (``passage:`` prefix,
Markdown decoration stripped), picks per-kind thresholds on the ``tune`` split
(lowest cost, see ``bench/dedup_tuning.py``) and prints the confusion
matrices of the tune and held-out splits, per kind and overall, as Markdown
tables; then one JSON line. ``--check`` skips the search and evaluates the
thresholds of the default config instead.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dedup_tuning as cal  # beside this script in bench/

from memoryd.indexer.config import EmbeddingConfig, WriteConfig
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.ingestion.embedtext import clean_line
from memoryd.indexer.write.dedup import KINDS, Thresholds

REPO = Path(__file__).resolve().parent.parent


def cosines(pairs: list[cal.Pair], provider: str, data_dir: Path) -> dict[str, float]:
    embedder = load_embedder(EmbeddingConfig(provider=provider), data_dir)
    texts = sorted({clean_line(t) for p in pairs for t in (p.existing, p.new)})
    vecs = dict(zip(texts, embedder.embed_passages(texts), strict=True))
    return {p.id: float(vecs[clean_line(p.existing)] @ vecs[clean_line(p.new)]) for p in pairs}


def seed_bands(cosine: float) -> str:
    """The seed's rule, for comparison: cosine alone, 0.92 / 0.85."""
    return "reinforce" if cosine >= 0.92 else "replace" if cosine >= 0.85 else "append"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=REPO / "tests" / "data" / "calibration.jsonl")
    ap.add_argument("--provider", default="e5-small")
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/memoryd-calibrate"))
    ap.add_argument("--check", action="store_true", help="evaluate the default config's thresholds, no search")
    args = ap.parse_args()
    pairs = cal.load_pairs(args.data)
    t0 = time.perf_counter()
    cos = cosines(pairs, args.provider, args.data_dir)
    tune = [p for p in pairs if p.split == "tune"]
    held = [p for p in pairs if p.split == "heldout"]
    default = Thresholds.from_config(WriteConfig())
    th = default if args.check else cal.search(tune, cos, default)
    print("| kind | reinforce | replace |\n|---|---|---|")
    for kind in KINDS:
        print(f"| {kind} | {th.reinforce[kind]:.3f} | {th.replace[kind]:.3f} |")
    report: dict[str, object] = {"thresholds": {"reinforce": th.reinforce, "replace": th.replace},
                                 "pairs": {"tune": len(tune), "heldout": len(held)}}
    for name, subset in (("tune", tune), ("heldout", held)):
        m = cal.confusion(subset, cos, th)
        print("\n" + cal.render(m, f"{name}: all kinds"))
        report[name] = {"accuracy": round(cal.accuracy(m), 4), "cost": cal.cost(m),
                        "matrix": {f"{c}->{a}": n for (c, a), n in sorted(m.items())}}
        for kind in KINDS:
            mk: Counter[tuple[str, str]] = cal.confusion([p for p in subset if p.kind == kind], cos, th)
            print("\n" + cal.render(mk, f"{name}: {kind}"))
    seed = Counter((p.cls, seed_bands(cos[p.id])) for p in held)
    print("\n" + cal.render(seed, "heldout: the seed's cosine-only bands (>= 0.92 reinforce, >= 0.85 replace)"))
    report["heldout_seed_bands"] = {"accuracy": round(cal.accuracy(seed), 4), "cost": cal.cost(seed)}
    report["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(report, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
