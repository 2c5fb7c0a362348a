"""Dedup and conflict: reinforce an existing entry, replace it, or append a new one.

The seed's bands (cosine ≥ 0.92 reinforce, 0.85–0.92 replace, below append) do
not survive contact with a multilingual model: with multilingual-e5-small a
Chinese pair of *unrelated* memories scores 0.85–0.90, a cross-lingual
*duplicate* only 0.82–0.89, and a conflicting update ("prefers Vim" →
"prefers Neovim") 0.97, as high as a paraphrase. Cosine says "same topic", not
"same fact", so a reinforce or a replace — the two actions that leave the new
text unwritten or the old one gone — also needs *agreement*: the two texts
share content words (:func:`memoryd.indexer.write.lexical.overlap`) and, for a
reinforce, name the same values. The rule:

1. texts equal after folding case, width and punctuation → **reinforce**;
2. the two texts are in different languages (kind ``cross``) → **append**,
   always: across languages there are no shared words to confirm a cosine, and
   measured cross-language paraphrases (0.82–0.89) and unrelated same-topic
   pairs (up to 0.85) overlap. The verdict carries a *flag* naming the entry it
   may update (a change signal and cosine ≥ the ``cross`` replace threshold) or
   restate (cosine ≥ the ``cross`` reinforce threshold, the same values), so the
   caller can show it; both texts stay;
3. a change signal fired (:mod:`memoryd.indexer.write.lexical`: a value exchanged, one
   content slot swapped, negation flipped, an update cue such as "now"/"改为")
   and cosine ≥ the kind's ``replace`` threshold → **replace** when the texts
   share enough content words (``replace_overlap``), else **append** flagged as
   a possible update;
4. no change signal and cosine ≥ the kind's ``reinforce`` threshold →
   **reinforce** when they share enough content words (``reinforce_overlap``),
   every value named on one side is named on the other, and no long run of
   words is exchanged in the same place (:func:`memoryd.indexer.write.lexical.residue`,
   :data:`MAX_RESIDUE`: "每天早上喝咖啡" is not "每天早上去散步"), else **append**;
5. otherwise **append**.

Only the entries of the file and section the router chose (:attr:`Candidate.scoped`)
may be replaced; a similar entry anywhere else is reported as a flag
(``possible_duplicate`` for what would be a reinforce, ``possible_update`` for a
replace) and left alone (:func:`decide`) — except the same entry, word for word
(:func:`near_exact`), which is reinforced wherever in the scope it lives (seed 000):
a memory is never written twice.

A replace is a delete: it also needs evidence that both entries are about the same
subject and slot (:mod:`memoryd.indexer.write.slots`). A *sibling* — the same sentence
pattern with another tier, server, person or item — is appended and named in
``related`` (flag ``sibling``); so is a doubt (flag ``possible_update``). A slot exchanged for a synonym is a
rewording, not a changed value (:mod:`memoryd.indexer.write.paraphrase`), so a
paraphrase ("prefers" → "likes" → "enjoys") reinforces.

Thresholds are per pair kind (``latin``, ``cjk``, ``cross``) and come from the
``[write]`` config; the overlap minimums were measured on
``tests/security/data/dedup_pairs.jsonl`` by ``bench/dedup_eval.py``
(docs/security/dedup.md). Over several candidates the strongest action wins
(reinforce > replace > flagged append > append), ties by cosine: an entry
already present must not be appended again because a less similar one looked
like an update.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from memoryd.indexer.config import WriteConfig
from memoryd.indexer.markdown.mdlines import fold
from memoryd.indexer.write import slots
from memoryd.indexer.write.lexical import Features, content_sequence, features, negated, values

REINFORCE, REPLACE, APPEND = "reinforce", "replace", "append"
POSSIBLE_UPDATE, POSSIBLE_DUPLICATE, SIBLING = "possible_update", "possible_duplicate", "sibling"
_RANK = {REINFORCE: 3, REPLACE: 2, APPEND: 0}
KINDS = ("latin", "cjk", "cross")
#: Content-word overlap a same-language reinforce / replace needs (bench/dedup_eval.py picks them).
REINFORCE_OVERLAP = 0.3
REPLACE_OVERLAP = 0.4
#: The longest exchanged run a reinforce tolerates, per kind (Latin words / Chinese characters).
MAX_RESIDUE = {"latin": 4, "cjk": 3, "cross": 0}


@dataclass(frozen=True)
class Thresholds:
    """Cosine thresholds per pair kind: ``{kind: value}`` for both actions."""

    reinforce: Mapping[str, float]
    replace: Mapping[str, float]
    reinforce_overlap: float = REINFORCE_OVERLAP
    replace_overlap: float = REPLACE_OVERLAP

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
    """An existing memory entry: where it is, its text (list marker removed) and its cosine to the new one.

    ``scoped``: the entry lies in the file and section the router chose for the new memory, so it may
    be reinforced or replaced; any other entry is only ever reported (:func:`decide`).
    """

    path: str
    line: int
    text: str
    score: float
    scoped: bool = True


@dataclass(frozen=True)
class Verdict:
    """``flag`` (appends only): the candidate may be updated (``possible_update``) or restated
    (``possible_duplicate``) by the new text; both are kept and the caller reports it.

    ``elsewhere``: a flagged verdict about an entry outside the route's file and section, reported
    beside a reinforce, a replace or an append that already names an entry (never edited)."""

    action: str  # REINFORCE | REPLACE | APPEND
    reason: str
    candidate: Candidate | None = None
    flag: str | None = None
    elsewhere: Verdict | None = None
    slots: slots.SlotDiff | None = None  # what the same-slot check read (subject, slot, words that differ)

    @property
    def label(self) -> str:
        """``reinforce``, ``replace``, ``flag`` (an append that names a candidate) or ``append``."""
        return "flag" if self.flag else self.action


def judge(new_text: str, cand: Candidate, th: Thresholds, f: Features | None = None) -> Verdict:
    """The action for ``new_text`` against one existing entry (see the module docstring).

    ``f`` is ``features(cand.text, new_text)`` when the caller already has it.
    """
    f = f or features(cand.text, new_text)
    score = round(cand.score, 3)
    if f.same_text:
        return Verdict(REINFORCE, "the same entry already exists", cand)
    if f.kind == "cross":
        return _judge_cross(cand, th, f, score)
    if f.changed:
        limit = th.replace[f.kind]
        if cand.score < limit:
            return Verdict(APPEND, f"differs from the closest entry (cosine {score} < {limit}, {f.kind})", cand)
        why = ", ".join(f.signals())
        if f.overlap >= th.replace_overlap:
            return _same_fact(new_text, cand, f"cosine {score} >= {limit}, {f.kind}; {why}; "
                              f"shared words {f.overlap:.2f}")
        return Verdict(APPEND, f"may update {cand.path}:{cand.line} (cosine {score}; {why}) but shares too few "
                       f"words to replace it ({f.overlap:.2f} < {th.replace_overlap}); both kept", cand,
                       POSSIBLE_UPDATE)
    limit = th.reinforce[f.kind]
    if cand.score < limit:
        return Verdict(APPEND, f"new fact (closest entry: cosine {score} < {limit}, {f.kind})", cand)
    residue_ok = f.residue <= MAX_RESIDUE[f.kind]
    if f.overlap >= th.reinforce_overlap and f.entities_agree and residue_ok:
        sd = slots.compare(cand.text, new_text)
        if sd.names_another_fact:
            flag = SIBLING if sd.verdict == slots.SIBLING else POSSIBLE_UPDATE
            what = "a sibling of" if flag == SIBLING else "may update"
            return Verdict(APPEND, f"{what} {cand.path}:{cand.line} (cosine {score}): {sd.why}; both kept",
                           cand, flag, slots=sd)
        return Verdict(REINFORCE, f"restates an existing entry (cosine {score} >= {limit}, {f.kind}; "
                       f"shared words {f.overlap:.2f})", cand, slots=sd)
    lacking = f.missing_old | f.missing_new  # counted, not quoted: reasons go to the audit log
    why = (f"one names {len(lacking)} value(s) the other does not" if lacking
           else f"shares too few words ({f.overlap:.2f} < {th.reinforce_overlap})" if f.overlap < th.reinforce_overlap
           else f"says something else in the same frame ({f.residue} tokens exchanged)")
    return Verdict(APPEND, f"new fact: similar to {cand.path}:{cand.line} (cosine {score}) but {why}", cand)


def _same_fact(new_text: str, cand: Candidate, evidence: str) -> Verdict:
    """A replace only with evidence of the same subject and slot (:func:`memoryd.indexer.write.slots.compare`);
    a sibling fact (another tier, server, person, item) or a doubt is appended, naming the entry."""
    sd = slots.compare(cand.text, new_text)
    if sd.same_slot:
        return Verdict(REPLACE, f"updates an existing entry ({evidence}; same subject and slot: {sd.why})", cand,
                       slots=sd)
    if sd.verdict == slots.SIBLING:
        return Verdict(APPEND, f"a sibling of {cand.path}:{cand.line}, not an update ({sd.why}); both kept", cand,
                       SIBLING, slots=sd)
    return Verdict(APPEND, f"may update {cand.path}:{cand.line} ({evidence}) but {sd.why}; both kept", cand,
                   POSSIBLE_UPDATE, slots=sd)


def near_exact(a: str, b: str) -> bool:
    """The same entry up to case, width, punctuation and stop words: the same content words, in the same
    order ("tea over coffee" is not "coffee over tea"), and the same values."""
    if fold(a) == fold(b):
        return True
    return content_sequence(a) == content_sequence(b) and values(a) == values(b) and negated(a) == negated(b)


def _judge_cross(cand: Candidate, th: Thresholds, f: Features, score: float) -> Verdict:
    """Across languages: always append; flag the entry it may update or restate."""
    if f.changed and cand.score >= th.replace["cross"]:
        return Verdict(APPEND, f"may update {cand.path}:{cand.line}, written in another language (cosine {score}; "
                       f"{', '.join(f.signals())}); both kept", cand, POSSIBLE_UPDATE)
    if not f.changed and cand.score >= th.reinforce["cross"] and f.entities_agree:
        return Verdict(APPEND, f"may restate {cand.path}:{cand.line}, written in another language (cosine "
                       f"{score}); both kept", cand, POSSIBLE_DUPLICATE)
    return Verdict(APPEND, f"new fact (closest entry in another language: cosine {score})", cand)


def decide(new_text: str, candidates: Iterable[Candidate], th: Thresholds) -> Verdict:
    """The strongest verdict over the route's own entries (:attr:`Candidate.scoped`); the strongest
    over the others is only reported.

    An entry elsewhere that the new text would reinforce or replace is flagged
    (``possible_duplicate`` / ``possible_update``), never edited: the new memory goes where the
    router sent it, and the answer names the other entry (``related``).
    """
    cands = list(candidates)
    inside = _strongest(new_text, [c for c in cands if c.scoped], th)
    outside = [c for c in cands if not c.scoped]
    if inside.action != REINFORCE:
        twin = _twin(new_text, outside)
        if twin is not None:  # the memory is already in the scope: reinforce it there, never write it twice
            return Verdict(REINFORCE, f"the same entry already exists at {twin.path}:{twin.line} (outside the "
                           "file and section the memory is routed to): reinforced there", twin)
    near = _as_flag(_strongest(new_text, outside, th)) if outside else None
    if near is None:
        return inside
    if inside.action != APPEND or inside.flag:
        return replace(inside, elsewhere=near)
    return near


def _twin(new_text: str, candidates: list[Candidate]) -> Candidate | None:
    """The most similar candidate that is the same entry up to case, punctuation and stop words
    (:func:`near_exact`); None when there is none."""
    twins = [c for c in candidates if near_exact(c.text, new_text)]
    return max(twins, key=lambda c: c.score) if twins else None


def _as_flag(v: Verdict) -> Verdict | None:
    """A verdict about an entry outside the route's place as a flagged append (None: nothing to report)."""
    c = v.candidate
    flag = {REINFORCE: POSSIBLE_DUPLICATE, REPLACE: POSSIBLE_UPDATE}.get(v.action, v.flag)
    if flag is None or c is None:
        return None
    what = "restate" if flag == POSSIBLE_DUPLICATE else "update"
    return Verdict(APPEND, f"may {what} {c.path}:{c.line} (cosine {round(c.score, 3)}), outside the file and "
                   "section the memory is routed to: not edited, both kept", c, flag)


def _strongest(new_text: str, candidates: Iterable[Candidate], th: Thresholds) -> Verdict:
    """The strongest verdict over ``candidates``; append with no candidate at all.

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


def _rank(v: Verdict) -> int:
    return 1 if v.flag else _RANK[v.action]


def _better(a: Verdict, b: Verdict) -> bool:
    if _rank(a) != _rank(b):
        return _rank(a) > _rank(b)
    sa = a.candidate.score if a.candidate else -1.0
    sb = b.candidate.score if b.candidate else -1.0
    return sa > sb


def explain_verdict(new_text: str, v: Verdict) -> dict[str, object]:
    """Why ``v`` was decided, JSON-able (``remember --explain``): the entry compared, its cosine, the lexical
    signals, and the same-slot check's subject, slot and differing words; the same for an entry elsewhere."""
    out: dict[str, object] = {"action": v.action, "flag": v.flag, "reason": v.reason}
    c = v.candidate
    if c is not None:
        f = features(c.text, new_text)
        sd = v.slots or slots.compare(c.text, new_text)
        out["candidate"] = {"path": c.path, "line": c.line, "text": c.text, "cosine": round(c.score, 4),
                            "in_route": c.scoped}
        out["signals"] = f.signals()
        out["shared_words"] = round(f.overlap, 3)
        out["kind"] = f.kind
        out["slots"] = sd.explain()
    if v.elsewhere is not None:
        out["elsewhere"] = explain_verdict(new_text, v.elsewhere)
    return out
