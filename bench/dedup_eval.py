#!/usr/bin/env python3
"""Evaluate the write path's dedup rule on the bilingual trust set, with the real model.

    python bench/dedup_eval.py [--data tests/security/data/dedup_pairs.jsonl] [--provider e5-small]
                               [--data-dir /tmp/memoryd-dedup-eval]

Embeds both sides of every pair exactly as the writer does (``passage:`` prefix,
Markdown decoration stripped) and judges each with the default thresholds.
Prints the confusion matrix (expected class × verdict: reinforce, replace,
flag = appended and the old entry named, append) per language pair and overall;
then, to show the overlap minimums are not fitted to one language, tunes them
leave-one-language-pair-out (tune on en-en, evaluate zh-zh, and the reverse;
en-zh pairs never reinforce or replace, so overlap does not touch them). The last
line is one JSON object. With ``--also tests/data/calibration.jsonl`` the
calibration set (231 pairs, its five classes mapped onto these four) is judged
the same way, as a second check.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memoryd.indexer.config import EmbeddingConfig, WriteConfig
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.embedtext import clean_line
from memoryd.indexer.write import calibration as cal
from memoryd.indexer.write.dedup import Thresholds

REPO = Path(__file__).resolve().parent.parent
NAMES = {"en": "en-en", "zh": "zh-zh", "cross": "en-zh"}


def cosines(pairs: list[cal.Pair], provider: str, data_dir: Path) -> dict[str, float]:
    embedder = load_embedder(EmbeddingConfig(provider=provider), data_dir)
    texts = sorted({clean_line(t) for p in pairs for t in (p.existing, p.new)})
    vecs = dict(zip(texts, embedder.embed_passages(texts), strict=True))
    return {p.id: float(vecs[clean_line(p.existing)] @ vecs[clean_line(p.new)]) for p in pairs}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=REPO / "tests" / "security" / "data" / "dedup_pairs.jsonl")
    ap.add_argument("--provider", default="e5-small")
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/memoryd-dedup-eval"))
    ap.add_argument("--also", type=Path, help="a calibration-format set to judge too")
    args = ap.parse_args()
    pairs = cal.load_trust_pairs(args.data)
    extra = cal.as_trust(cal.load_pairs(args.also)) if args.also else []
    t0 = time.perf_counter()
    cos = cosines(pairs + extra, args.provider, args.data_dir)
    th = Thresholds.from_config(WriteConfig())
    report: dict[str, object] = {"pairs": len(pairs), "reinforce_overlap": th.reinforce_overlap,
                                 "replace_overlap": th.replace_overlap}
    for lang in cal.TRUST_LANGS:
        m = cal.trust_matrix([p for p in pairs if p.lang == lang], cos, th)
        print(cal.render_trust(m, f"{NAMES[lang]} (default thresholds)") + "\n")
        report[NAMES[lang]] = cal.trust_summary(m)
    m = cal.trust_matrix(pairs, cos, th)
    print(cal.render_trust(m, "all pairs (default thresholds)") + "\n")
    report["all"] = cal.trust_summary(m)
    folds = {}
    for held in ("en", "zh"):
        tune = [p for p in pairs if p.lang not in (held, "cross")]
        tuned = cal.tune_overlaps(tune, cos, th)
        s = cal.trust_summary(cal.trust_matrix([p for p in pairs if p.lang == held], cos, tuned))
        folds[NAMES[held]] = {"reinforce_overlap": tuned.reinforce_overlap,
                              "replace_overlap": tuned.replace_overlap, **s}
        print(f"held out {NAMES[held]}: tuned on the other language reinforce_overlap={tuned.reinforce_overlap} "
              f"replace_overlap={tuned.replace_overlap} → {json.dumps(s)}")
    report["leave_one_language_out"] = folds
    if extra:
        for lang in cal.TRUST_LANGS:
            m = cal.trust_matrix([p for p in extra if p.lang == lang], cos, th)
            print("\n" + cal.render_trust(m, f"{args.also.name}: {NAMES[lang]}"))
        m = cal.trust_matrix(extra, cos, th)
        print("\n" + cal.render_trust(m, f"{args.also.name}: all pairs"))
        report[args.also.name] = cal.trust_summary(m)
    report["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(report, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
