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

The set's synonym pairs (ids ``*-syn-*``, issue #28: paraphrases that exchange a verb or an
adjective for a synonym, and contrast pairs that exchange one for an antonym or change a value
next to a synonym) carry a ``split``: the overlap minimums are tuned on the other pairs plus the
``tune`` half, and the ``heldout`` half is only evaluated (with the defaults and with the tuned
values). ``--no-synonyms`` judges without the synonym table
(:mod:`memoryd.indexer.write.paraphrase`), to show what it changes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import dedup_tuning as cal  # beside this script in bench/

from memoryd.indexer.config import EmbeddingConfig, WriteConfig
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.ingestion.embedtext import clean_line
from memoryd.indexer.write import lexical
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
    ap.add_argument("--no-synonyms", action="store_true", help="judge without the synonym table (a baseline)")
    args = ap.parse_args()
    if args.no_synonyms:
        lexical.synonymous = lambda *_a, **_k: False  # type: ignore[assignment]
    pairs = cal.load_trust_pairs(args.data)
    split = {r["id"]: r.get("split", "") for r in map(json.loads, args.data.read_text(encoding="utf-8").splitlines())
             if r}
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
    report["synonym_pairs"] = synonym_halves(pairs, split, cos, th)
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


def synonym_halves(pairs: list[cal.Pair], split: dict[str, str], cos: dict[str, float],
                   th: Thresholds) -> dict[str, object]:
    """The synonym pairs' two halves: overlap minimums tuned on the rest plus ``tune``, ``heldout`` reported."""
    syn = [p for p in pairs if "-syn-" in p.id]
    if not syn:
        return {}
    halves = {h: [p for p in syn if split.get(p.id) == h] for h in ("tune", "heldout")}
    tuned = cal.tune_overlaps([p for p in pairs if "-syn-" not in p.id] + halves["tune"], cos, th)
    out: dict[str, object] = {"tuned_reinforce_overlap": tuned.reinforce_overlap,
                              "tuned_replace_overlap": tuned.replace_overlap}
    for half, ps in halves.items():
        for lang in ("en", "zh"):
            m = cal.trust_matrix([p for p in ps if p.lang == lang], cos, th)
            print(cal.render_trust(m, f"synonym pairs, {half} half: {NAMES[lang]} (default thresholds)") + "\n")
        m = cal.trust_matrix(ps, cos, th)
        print(cal.render_trust(m, f"synonym pairs, {half} half (default thresholds)") + "\n")
        out[half] = cal.trust_summary(m)
    out["heldout_with_tuned"] = cal.trust_summary(cal.trust_matrix(halves["heldout"], cos, tuned))
    paras = sorted(cos[p.id] for p in halves["tune"] if p.cls == "paraphrase")
    out["tune_paraphrase_cosine_min"] = round(paras[0], 3) if paras else None
    print(f"synonym pairs: overlap minimums tuned on the other pairs + the tune half: reinforce "
          f"{tuned.reinforce_overlap}, replace {tuned.replace_overlap}; held-out half with them → "
          f"{json.dumps(out['heldout_with_tuned'])}\n")
    return out


if __name__ == "__main__":
    sys.exit(main())
