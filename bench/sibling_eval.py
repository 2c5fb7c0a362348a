#!/usr/bin/env python3
"""Sibling facts against updates: does the write path keep every fact and still replace updates?

    python bench/sibling_eval.py [--data tests/security/data/sibling_pairs.jsonl] [--provider e5-small]
                                 [--data-dir /tmp/memoryd-sibling-eval] [--show tune|heldout|all]

A *sibling* pair shares a sentence pattern but says another fact (another tier,
server, person, item under "likes"); replacing or reinforcing one with the other
loses a fact. An *update* pair is the same subject and slot with its value
changed; it should be replaced (or at least flagged, both kept). Each pair is
embedded as the writer embeds entries (``passage:`` prefix, decoration stripped)
and judged by :func:`memoryd.indexer.write.dedup.judge` with the default
thresholds, the existing entry in the route's own section (the strictest case:
it may be edited).

The set is split in two halves by the SHA-256 of each id (``tune``: first byte
even); the rules were written looking at the ``tune`` half only, and the
``heldout`` half is reported, per language, with the spread across languages.
``--show`` lists the pairs judged wrongly in a half (for the tune half while
working on the rules). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memoryd.indexer.config import EmbeddingConfig, WriteConfig
from memoryd.indexer.embedding import load_embedder
from memoryd.indexer.ingestion.embedtext import clean_line
from memoryd.indexer.write.dedup import REINFORCE, REPLACE, Candidate, Thresholds, judge

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "security" / "data" / "sibling_pairs.jsonl"


def half_of(pair_id: str) -> str:
    """``tune`` or ``heldout``, fixed by the id's hash (so adding pairs never moves the old ones)."""
    return "tune" if hashlib.sha256(pair_id.encode()).digest()[0] % 2 == 0 else "heldout"


def load(path: Path) -> list[dict[str, str]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for r in rows:
        r["half"] = half_of(r["id"])
    return rows


def cosines(rows: list[dict[str, str]], provider: str, data_dir: Path) -> dict[str, float]:
    embedder = load_embedder(EmbeddingConfig(provider=provider), data_dir)
    texts = sorted({clean_line(r[k]) for r in rows for k in ("existing", "new")})
    vecs = dict(zip(texts, embedder.embed_passages(texts), strict=True))
    return {r["id"]: float(vecs[clean_line(r["existing"])] @ vecs[clean_line(r["new"])]) for r in rows}


def label(r: dict[str, str], cos: float, th: Thresholds) -> str:
    """``replace``, ``reinforce``, ``flag`` (appended, the old entry named) or ``append``."""
    v = judge(r["new"], Candidate("f.md", 1, r["existing"], cos), th)
    return v.label


def summary(rows: list[dict[str, str]], labels: dict[str, str]) -> dict[str, object]:
    sib = [r for r in rows if r["class"] == "sibling"]
    upd = [r for r in rows if r["class"] == "update"]
    lost = [r["id"] for r in sib if labels[r["id"]] in (REPLACE, REINFORCE)]
    replaced = sum(labels[r["id"]] == REPLACE for r in upd)
    caught = sum(labels[r["id"]] in (REPLACE, "flag") for r in upd)
    swallowed = sum(labels[r["id"]] == REINFORCE for r in upd)
    return {"siblings": len(sib), "siblings_lost": len(lost), "updates": len(upd),
            "updates_replaced": round(replaced / len(upd), 4) if upd else None,
            "updates_caught": round(caught / len(upd), 4) if upd else None,
            "updates_swallowed": swallowed, "lost_ids": lost}


def table(rows: list[dict[str, str]], labels: dict[str, str], title: str) -> str:
    m = Counter((r["class"], labels[r["id"]]) for r in rows)
    cols = ("replace", "reinforce", "flag", "append")
    out = [f"**{title}**", "", "| class | " + " | ".join(cols) + " | n |", "|---|" + "---|" * (len(cols) + 1)]
    for cls in ("sibling", "update"):
        n = sum(m[(cls, c)] for c in cols)
        out.append(f"| {cls} | " + " | ".join(str(m[(cls, c)]) for c in cols) + f" | {n} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--provider", default="e5-small")
    ap.add_argument("--data-dir", type=Path, default=Path("/tmp/memoryd-sibling-eval"))
    ap.add_argument("--show", choices=("tune", "heldout", "all"), help="list the pairs judged wrongly")
    args = ap.parse_args()
    rows = load(args.data)
    t0 = time.perf_counter()
    cos = cosines(rows, args.provider, args.data_dir)
    th = Thresholds.from_config(WriteConfig())
    labels = {r["id"]: label(r, cos[r["id"]], th) for r in rows}
    report: dict[str, object] = {"pairs": len(rows)}
    langs = sorted({r["lang"] for r in rows})
    for half in ("tune", "heldout"):
        part = [r for r in rows if r["half"] == half]
        print(table(part, labels, f"{half} half, all languages") + "\n")
        per_lang = {lang: summary([r for r in part if r["lang"] == lang], labels) for lang in langs}
        for lang, s in per_lang.items():
            print(f"  {half} {lang}: siblings lost {s['siblings_lost']}/{s['siblings']}, updates replaced "
                  f"{s['updates_replaced']}, caught {s['updates_caught']}")
        rates = [s["updates_replaced"] for s in per_lang.values() if isinstance(s["updates_replaced"], float)]
        report[half] = {**summary(part, labels), "per_language": {k: {x: v for x, v in s.items() if x != "lost_ids"}
                                                                  for k, s in per_lang.items()},
                        "updates_replaced_spread": [min(rates), max(rates)] if rates else None}
        print()
    if args.show:
        for r in rows:
            if args.show not in ("all", r["half"]):
                continue
            got, want = labels[r["id"]], ("append", "flag") if r["class"] == "sibling" else (REPLACE,)
            if got not in want:
                v = judge(r["new"], Candidate("f.md", 1, r["existing"], cos[r["id"]]), th)
                print(f"{r['id']} [{r['half']}] cos {cos[r['id']]:.3f} → {got}: {r['existing']} ⇒ {r['new']}\n"
                      f"    {v.reason}")
    report["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(report, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
