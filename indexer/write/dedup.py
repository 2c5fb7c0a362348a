"""Dedup and conflict: reinforce an existing entry, replace it, or append a new one.

The seed's bands (cosine ≥ 0.92 reinforce, 0.85–0.92 replace, below append) do
not survive contact with a multilingual model: with multilingual-e5-small a
Chinese pair of *unrelated* memories scores 0.85–0.90, a cross-lingual
*duplicate* only 0.82–0.89, and a conflicting update ("prefers Vim" →
"prefers Neovim") 0.97, as high as a paraphrase. So the rule here is:

1. texts equal after folding case, width and punctuation → **reinforce**;
2. a change signal fired (:mod:`indexer.write.lexical`: a value exchanged, one
   content slot swapped, negation flipped, an update cue such as "now"/"改为")
   → **replace** when cosine ≥ the kind's ``replace`` threshold, else **append**;
3. no change signal → **reinforce** when cosine ≥ the kind's ``reinforce``
   threshold, else **append**.

Thresholds are per pair kind (``latin``, ``cjk``, ``cross``) and come from the
``[write]`` config, calibrated by ``bench/calibrate_dedup.py``. Over several
candidates the strongest action wins (reinforce > replace > append), ties by
cosine: an entry already present must not be appended again because a less
similar one looked like an update.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from indexer.config import WriteConfig
from indexer.write.lexical import Features, features

REINFORCE, REPLACE, APPEND = "reinforce", "replace", "append"
_RANK = {REINFORCE: 2, REPLACE: 1, APPEND: 0}
KINDS = ("latin", "cjk", "cross")


@dataclass(frozen=True)
class Thresholds:
    """Cosine thresholds per pair kind: ``{kind: value}`` for both actions."""

    reinforce: Mapping[str, float]
    replace: Mapping[str, float]

    @classmethod
    def from_config(cls, w: WriteConfig) -> Thresholds:
        return cls(
            reinforce={"latin": w.reinforce_threshold, "cjk": w.cjk_reinforce_threshold,
                       "cross": w.cross_reinforce_threshold},
            replace={"latin": w.replace_threshold, "cjk": w.cjk_replace_threshold,
                     "cross": w.cross_replace_threshold},
        )


@dataclass(frozen=True)
class Candidate:
    """An existing memory entry: where it is, its text (list marker removed) and its cosine to the new one."""

    path: str
    line: int
    text: str
    score: float


@dataclass(frozen=True)
class Verdict:
    action: str  # REINFORCE | REPLACE | APPEND
    reason: str
    candidate: Candidate | None = None


def judge(new_text: str, cand: Candidate, th: Thresholds, f: Features | None = None) -> Verdict:
    """The action for ``new_text`` against one existing entry (see the module docstring).

    ``f`` is ``features(cand.text, new_text)`` when the caller already has it.
    """
    f = f or features(cand.text, new_text)
    score = round(cand.score, 3)
    if f.same_text:
        return Verdict(REINFORCE, "the same entry already exists", cand)
    if f.changed:
        limit = th.replace[f.kind]
        if cand.score >= limit:
            why = ", ".join(f.signals())
            return Verdict(REPLACE, f"updates an existing entry (cosine {score} >= {limit}, {f.kind}; {why})", cand)
        return Verdict(APPEND, f"differs from the closest entry (cosine {score} < {limit}, {f.kind})", cand)
    limit = th.reinforce[f.kind]
    if cand.score >= limit:
        return Verdict(REINFORCE, f"restates an existing entry (cosine {score} >= {limit}, {f.kind})", cand)
    return Verdict(APPEND, f"new fact (closest entry: cosine {score} < {limit}, {f.kind})", cand)


def decide(new_text: str, candidates: Iterable[Candidate], th: Thresholds) -> Verdict:
    """The strongest verdict over all candidates; append with no candidate at all.

    Candidates below every threshold are appends whatever their features say, so
    their features are not computed (a file of hundreds of entries stays cheap);
    the same text always scores above them.
    """
    floor = min(*th.reinforce.values(), *th.replace.values())
    ranked = sorted(candidates, key=lambda c: -c.score)
    if not ranked:
        return Verdict(APPEND, "new fact (no similar entry)")
    best: Verdict | None = None
    for cand in ranked:
        if cand.score < floor:
            break
        v = judge(new_text, cand, th)
        if best is None or _better(v, best):
            best = v
    top = ranked[0]
    return best or Verdict(APPEND, f"new fact (closest entry: cosine {round(top.score, 3)} < {floor})", top)


def _better(a: Verdict, b: Verdict) -> bool:
    if _RANK[a.action] != _RANK[b.action]:
        return _RANK[a.action] > _RANK[b.action]
    sa = a.candidate.score if a.candidate else -1.0
    sb = b.candidate.score if b.candidate else -1.0
    return sa > sb
