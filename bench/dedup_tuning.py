"""Calibrating the dedup thresholds on a labelled set of memory pairs (benchmark-only tuning).

Used by ``bench/calibrate_dedup.py`` and ``bench/dedup_eval.py`` (and their tests), never by
the daemon: the thresholds it finds are written into :mod:`memoryd.indexer.write.dedup`.

The set (``tests/data/calibration.jsonl``) holds (existing, new) pairs in five
classes; each class has one right action for the writer:

==================== ==========
class                action
==================== ==========
duplicate            reinforce
paraphrase           reinforce
conflicting_update   replace
related_other_fact   append
unrelated            append
==================== ==========

Mistakes do not cost the same: reinforcing or replacing when the new memory is
a different fact loses information (cost 3 / 4), appending a duplicate only
adds a redundant line (cost 1), and replacing an entry by its own paraphrase
changes nothing that matters (0.5). :func:`search` picks, per pair kind, the
thresholds with the lowest total cost on the ``tune`` split; the ``heldout``
split is only ever evaluated. Pure: cosines are computed by the caller.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from memoryd.indexer.write.dedup import APPEND, KINDS, REINFORCE, REPLACE, Candidate, Thresholds, judge
from memoryd.indexer.write.lexical import Features, features, pair_kind

EXPECTED = {"duplicate": REINFORCE, "paraphrase": REINFORCE, "conflicting_update": REPLACE,
            "related_other_fact": APPEND, "unrelated": APPEND}
CLASSES = tuple(EXPECTED)
ACTIONS = (REINFORCE, REPLACE, APPEND)
COST = {  # (right action, chosen action) → cost
    (REINFORCE, REPLACE): 0.5, (REINFORCE, APPEND): 1.0,
    (REPLACE, REINFORCE): 3.0, (REPLACE, APPEND): 1.0,
    (APPEND, REINFORCE): 3.0, (APPEND, REPLACE): 4.0,
}


@dataclass(frozen=True)
class Pair:
    id: str
    cls: str
    lang: str
    split: str
    existing: str
    new: str

    @property
    def kind(self) -> str:
        return pair_kind(self.existing, self.new)

    @property
    def features(self) -> Features:
        cached: Features | None = _FEATURES.get(self)
        if cached is None:
            cached = _FEATURES[self] = features(self.existing, self.new)
        return cached


_FEATURES: dict[Pair, Features] = {}  # pairs are immutable: their features never change


def load_pairs(path: Path) -> list[Pair]:
    """Read the JSON-lines set; raises ValueError naming the line for a bad record."""
    pairs = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("class") not in EXPECTED or r.get("split") not in ("tune", "heldout"):
            raise ValueError(f"{path}:{n}: bad class or split in {r.get('id')!r}")
        pairs.append(Pair(r["id"], r["class"], r["lang"], r["split"], r["existing"], r["new"]))
    return pairs


def predict(pair: Pair, cosine: float, th: Thresholds) -> str:
    return judge(pair.new, Candidate("", 0, pair.existing, cosine), th, pair.features).action


def confusion(pairs: Iterable[Pair], cosines: dict[str, float], th: Thresholds) -> Counter[tuple[str, str]]:
    """Counts of (class, chosen action)."""
    return Counter((p.cls, predict(p, cosines[p.id], th)) for p in pairs)


def cost(matrix: Counter[tuple[str, str]]) -> float:
    return sum(COST.get((EXPECTED[c], a), 0.0) * n for (c, a), n in matrix.items())


def accuracy(matrix: Counter[tuple[str, str]]) -> float:
    total = sum(matrix.values())
    return sum(n for (c, a), n in matrix.items() if EXPECTED[c] == a) / total if total else 0.0


def search(pairs: Sequence[Pair], cosines: dict[str, float], base: Thresholds) -> Thresholds:
    """Per kind, the (reinforce, replace) pair with the lowest cost on ``pairs``.

    Candidates are midpoints between consecutive observed cosines (rounded to
    0.005); among equally good choices the middle one is taken, which keeps the
    widest margin to the pairs on either side.
    """
    reinforce, replace = dict(base.reinforce), dict(base.replace)
    for kind in KINDS:
        sub = [p for p in pairs if p.kind == kind]
        if not sub:
            continue
        grid = _grid(cosines[p.id] for p in sub)
        scored = []
        for r in grid:
            for q in grid:
                th = Thresholds({**reinforce, kind: r}, {**replace, kind: q})
                scored.append((cost(confusion(sub, cosines, th)), r, q))
        best = min(s[0] for s in scored)
        ties = sorted((r, q) for c, r, q in scored if c == best)
        reinforce[kind], replace[kind] = ties[len(ties) // 2]
    return Thresholds(reinforce, replace)


def _grid(values: Iterable[float]) -> list[float]:
    vs = sorted(set(values))
    mids = {round(round((a + b) / 2 / 0.005) * 0.005, 3) for a, b in itertools.pairwise(vs)}
    return sorted(mids | {round(vs[0] - 0.005, 3), 1.0})


def render(matrix: Counter[tuple[str, str]], title: str) -> str:
    """The confusion matrix as a Markdown table (rows: classes, columns: chosen actions)."""
    lines = [f"**{title}** (accuracy {accuracy(matrix):.3f}, cost {cost(matrix):.1f})", "",
             "| class (right action) | " + " | ".join(ACTIONS) + " | n |", "|---|" + "---|" * (len(ACTIONS) + 1)]
    for c in CLASSES:
        row = [matrix.get((c, a), 0) for a in ACTIONS]
        lines.append(f"| {c} ({EXPECTED[c]}) | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
    return "\n".join(lines)


# -- the bilingual trust set ------------------------------------------------------
#
# ``tests/security/data/dedup_pairs.jsonl``: four classes in en-en, zh-zh and en-zh,
# judged on *harm*, not on one right action. Reinforcing or replacing a pair
# that is not the same fact loses a memory (never allowed); an update must be
# replaced or at least flagged; a paraphrase should be reinforced.

TRUST_CLASSES = ("paraphrase", "update", "same_topic", "unrelated")
LABELS = ("reinforce", "replace", "flag", "append")
TRUST_LANGS = ("en", "zh", "cross")
TRUST_COST = {  # (class, verdict label) → cost; absent = 0
    ("paraphrase", "append"): 1.0, ("paraphrase", "flag"): 1.0, ("paraphrase", "replace"): 0.5,
    ("update", "append"): 2.0, ("update", "reinforce"): 4.0,
    ("same_topic", "reinforce"): 10.0, ("same_topic", "replace"): 10.0, ("same_topic", "flag"): 0.25,
    ("unrelated", "reinforce"): 10.0, ("unrelated", "replace"): 10.0, ("unrelated", "flag"): 0.25,
}


def load_trust_pairs(path: Path) -> list[Pair]:
    """Read the trust set (``split`` is unused: ``lang`` is the fold); ValueError names a bad line."""
    pairs = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("class") not in TRUST_CLASSES or r.get("lang") not in TRUST_LANGS:
            raise ValueError(f"{path}:{n}: bad class or lang in {r.get('id')!r}")
        pairs.append(Pair(r["id"], r["class"], r["lang"], "all", r["existing"], r["new"]))
    return pairs


#: The calibration set's classes as trust classes (to judge harm on it too).
AS_TRUST = {"duplicate": "paraphrase", "paraphrase": "paraphrase", "conflicting_update": "update",
            "related_other_fact": "same_topic", "unrelated": "unrelated"}


def as_trust(pairs: Iterable[Pair]) -> list[Pair]:
    """Calibration-set pairs relabelled with :data:`AS_TRUST`, ids prefixed (the two sets reuse ids)."""
    return [dataclasses.replace(p, id=f"calibration:{p.id}", cls=AS_TRUST[p.cls]) for p in pairs]


def trust_label(pair: Pair, cosine: float, th: Thresholds) -> str:
    return judge(pair.new, Candidate("", 0, pair.existing, cosine), th, pair.features).label


def trust_matrix(pairs: Iterable[Pair], cosines: dict[str, float], th: Thresholds) -> Counter[tuple[str, str]]:
    """Counts of (class, verdict label)."""
    return Counter((p.cls, trust_label(p, cosines[p.id], th)) for p in pairs)


def trust_summary(m: Counter[tuple[str, str]]) -> dict[str, float | int]:
    """The targets: unrelated pairs harmed (must be 0), updates caught, paraphrases reinforced."""
    def n(cls: str, *labels: str) -> int:
        return sum(m.get((cls, lb), 0) for lb in labels)

    def total(cls: str) -> int:
        return n(cls, *LABELS)

    harmed = sum(n(c, "reinforce", "replace") for c in ("same_topic", "unrelated"))
    updates, paras = total("update"), total("paraphrase")
    return {"unrelated_harmed": harmed,
            "updates_caught": round(n("update", "replace", "flag") / updates, 4) if updates else 1.0,
            "updates_lost": n("update", "reinforce"),
            "paraphrases_reinforced": round(n("paraphrase", "reinforce") / paras, 4) if paras else 1.0,
            "unrelated_flagged": sum(n(c, "flag") for c in ("same_topic", "unrelated")),
            "cost": sum(TRUST_COST.get(k, 0.0) * v for k, v in m.items())}


def tune_overlaps(pairs: Sequence[Pair], cosines: dict[str, float], base: Thresholds) -> Thresholds:
    """The (reinforce_overlap, replace_overlap) with the lowest trust cost on ``pairs``; ties: the middle one."""
    grid = [round(0.05 * i, 2) for i in range(1, 20)]
    scored = []
    for r in grid:
        for q in grid:
            th = dataclasses.replace(base, reinforce_overlap=r, replace_overlap=q)
            scored.append((float(trust_summary(trust_matrix(pairs, cosines, th))["cost"]), r, q))
    best = min(s[0] for s in scored)
    ties = [(r, q) for c, r, q in scored if c == best]
    rs, qs = sorted({r for r, _ in ties}), sorted({q for _, q in ties})
    r, q = rs[len(rs) // 2], qs[len(qs) // 2]
    if (r, q) not in ties:
        r, q = ties[len(ties) // 2]
    return dataclasses.replace(base, reinforce_overlap=r, replace_overlap=q)


def render_trust(m: Counter[tuple[str, str]], title: str) -> str:
    """The trust matrix as a Markdown table (rows: classes, columns: verdict labels)."""
    lines = [f"**{title}**", "", "| class | " + " | ".join(LABELS) + " | n |", "|---|" + "---|" * (len(LABELS) + 1)]
    for c in TRUST_CLASSES:
        row = [m.get((c, lb), 0) for lb in LABELS]
        lines.append(f"| {c} | " + " | ".join(map(str, row)) + f" | {sum(row)} |")
    return "\n".join(lines)
