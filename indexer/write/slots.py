"""Is a new memory the same fact as an old one with its value changed, or a sibling fact?

Dedup's change signals (:mod:`memoryd.indexer.write.lexical`) say *that* two
entries differ in a slot; they do not say *which* slot. "The API limit for the
*free* tier is *100*" and "… for the *pro* tier is *1000*" share a frame, score
0.96 and differ in two slots — and replacing one with the other deletes a true
fact. A replace is a delete, so it needs evidence that both entries are about
the same subject and slot and only the value changed (Vim → Neovim, 9:30 →
10:00, PostgreSQL 14 → 16). This module reads that evidence from the two token
sequences, without a parser:

* the **regions**: the places where the texts differ in content tokens, after
  stop words, numbers written two ways, synonyms
  (:mod:`memoryd.indexer.write.paraphrase`), update cues ("now", "改为") and
  negations are set aside;
* the **predicate**: the first copula, auxiliary or common verb of a small
  per-language table (:mod:`memoryd.indexer.write.predicates`) — what stands
  before it is the subject, what follows is the value;
* for each region, whether it is a **qualifier** (it lies in the subject, or
  in front of shared words that name what it qualifies), whether it is a
  **value** (numbers, times, versions, names, weekdays and months), and which
  verb governs it: a *single-valued* one (prefers, uses, runs, 是, 使用) holds
  one value at a time, a *multi-valued* one (likes, visited, is planning, 喜欢,
  去过) holds many, so "likes tea" and "likes coffee" are both true.

The rule (:func:`compare`, :func:`_judge`), when in doubt append:

* no region at all (only a cue or a negation added or removed) → **same slot**;
* an update cue in the new entry ("now", "switched to", "改用", "ab sofort") →
  **same slot**, unless a region exchanges a qualifier of the subject or of
  shared words ("the *pro* tier is now …": another tier) → **sibling**;
* without a cue: one region that says the opposite after the verb ("likes" →
  "hates", "dark" → "light mode") → **same slot**; a qualifier region →
  **sibling**; two or more regions → **sibling** unless every one is only a
  number, time or date after the verb, with no verb of many values;
* one region after the verb: only a number, time, version or date changed →
  **same slot** (a number in a name, "db-01", is an identifier: a qualifier); a
  verb of many values anywhere in the clause → **sibling**; one value right
  after a verb of one value, with no qualifying phrase inside → **same slot**;
  anything else → **unclear**, which dedup appends flagged ``possible_update``.

:attr:`SlotDiff.names_another_fact` applies the same reading to a reinforce (which
leaves the new text unwritten): two places that each say something new, an item
exchanged under a verb of many values, a value changed beside an exchanged word,
or a qualifier added to the subject — another fact, appended.

Pure and deterministic; written on the ``tune`` half of
``tests/security/data/sibling_pairs.jsonl`` and judged on the rest (docs/security/dedup.md).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher

from memoryd.indexer.write import predicates as pred
from memoryd.indexer.write.lexical import (
    _STOP,
    CJK,
    _light,
    _numeric_equal,
    _same_sense,
    _stem,
    negated,
    seq_tokens,
    update_cue,
    values,
)
from memoryd.indexer.write.paraphrase import opposite

SAME_SLOT, SIBLING, UNCLEAR = "same_slot", "sibling", "unclear"
#: How much of the sentence must align for a lone qualifier to count as "the same sentence" (see
#: :attr:`SlotDiff.names_another_fact`); a rewording that moves words around aligns less.
QUALIFIER_FRAME = 0.5
#: Below this share two texts hardly share a sentence: their differences are a rewording's, not places.
SHARED_FRAME = 0.35
#: With no verb found, what the first tokens hold is taken for the subject ("*Lab 2* closes at 6", "*3号*楼"):
#: a number there names a thing, it is no value.
_SUBJECT_SPAN = 2
_ZH_NUMERAL = re.compile("[零一二两三四五六七八九十百千万]")
_CJK = re.compile(f"[{CJK}]")


@dataclass(frozen=True)
class Region:
    """One place where the texts differ: ``old``/``new`` tokens, positions in each, what it is."""

    old: tuple[str, ...]
    new: tuple[str, ...]
    at_old: int
    at_new: int
    qualifier: bool  # in the subject, or modifying shared words before the predicate
    value: bool  # names a number, time, version, date, name on either side
    quantity: bool  # a number, time, version or date (never a qualifier of kind)
    governor: str  # "single" | "multi" | "" : the verb class nearest before it (after the predicate)
    whole_subject: bool  # the region is the subject itself, right before the predicate
    opposite: bool = False  # one side says the opposite of the other ("likes" / "hates", "快" / "慢")
    modifier: bool = False  # right before shared content words: it qualifies them ("*Canadian* traffic")
    pure_quantity: bool = False  # only a number, time or date differs; the words around it are the same
    adjacent: bool = False  # only stop words between its governing verb and it ("prefers *Vim*")
    exchange: bool = False  # each side has a content word (not a verb, cue or stop word) the other text lacks
    after_verb: bool = False  # after the verb on both sides (no verb: past the first tokens): in the value
    added: bool = False  # one side only, with a content word the other text lacks ("User's *partner's* …")
    compound: bool = False  # more than a value: a qualifying phrase inside ("Linux *at work*", "app *for* delivery")

    @property
    def size(self) -> int:
        """Tokens on the longer side."""
        return max(len(self.old), len(self.new))

    def words(self) -> str:
        return f"{' '.join(self.old) or '—'} → {' '.join(self.new) or '—'}"


@dataclass(frozen=True)
class SlotDiff:
    """What :func:`compare` found: the verdict, why, and the parts it read (for ``--explain``)."""

    verdict: str  # SAME_SLOT | SIBLING | UNCLEAR
    why: str
    subject: str
    slot: str
    regions: tuple[Region, ...] = ()
    frame: float = 0.0  # share of the longer text's tokens the two align on (1.0: the same sentence)
    values_differ: bool = False  # the texts name different numbers, times, dates or names

    @property
    def same_slot(self) -> bool:
        return self.verdict == SAME_SLOT

    @property
    def names_another_fact(self) -> bool:
        """Another fact that a reinforce would swallow: two places that each say something new (in texts that
        share at least :data:`SHARED_FRAME` of a sentence), or one exchanged word in a shared sentence
        (:data:`QUALIFIER_FRAME`), under a verb of many values or beside a changed value ("speaks Catalan" /
        "speaks Italian"), or a short qualifier added to the subject ("User's *partner's* favourite band").
        An unclear pair is left to the reinforce rule's own checks."""
        if self.verdict == UNCLEAR:
            return False
        values_changed = self.values_differ
        if sum(r.exchange for r in self.regions) >= 2 and self.frame >= SHARED_FRAME:
            return True  # two places each say something the other entry does not
        return any((r.exchange and (self.frame >= QUALIFIER_FRAME or values_changed or r.governor == "multi"))
                   or (r.added and r.qualifier and self.frame >= QUALIFIER_FRAME and r.size <= 2)
                   for r in self.regions)

    def explain(self) -> dict[str, object]:
        """The JSON-able account of the decision: subject, slot, the words that differ, why."""
        return {"verdict": self.verdict, "why": self.why, "subject": self.subject, "slot": self.slot,
                "differs": [r.words() for r in self.regions]}


def compare(old: str, new: str) -> SlotDiff:
    """Whether ``new`` restates ``old``'s subject and slot with another value (see the module docstring)."""
    return _compare(old, new)


@functools.lru_cache(maxsize=4096)
def _compare(old: str, new: str) -> SlotDiff:
    a, b = seq_tokens(old), seq_tokens(new)
    lang = pred.language_of(a + b)
    pa, pb = pred.predicate_at(a, lang), pred.predicate_at(b, lang)
    vals = _value_tokens(old) | _value_tokens(new)
    cue = update_cue(new) and not update_cue(old)
    idents = _identifiers(old) | _identifiers(new)
    regions = tuple(_regions(a, b, pa, pb, vals - idents, lang, cue, idents))
    sm = SequenceMatcher(a=a, b=b, autojunk=False)
    frame = sum(m.size for m in sm.get_matching_blocks()) / max(len(a), len(b), 1)
    subject = " ".join(t for t in a[: pa if pa is not None else 0] if not _light([t]))
    slot = a[pa] if pa is not None and pa < len(a) else ""
    multi = pred.has_multi(a, lang) and pred.has_multi(b, lang)
    verdict, why = _judge(regions, cue, negated(old) != negated(new), multi)
    differ = values(old) != values(new) or _calendar(a) != _calendar(b)
    return SlotDiff(verdict, why, subject, slot, regions, round(frame, 3), differ)


def _judge(regions: tuple[Region, ...], cue: bool, flip: bool, multi: bool) -> tuple[str, str]:
    if not regions:
        return (SAME_SLOT, "only an update cue or a negation differs") if cue or flip else (
            SAME_SLOT, "the same words (a rewording)")
    if cue:
        return _judge_cued(regions)
    if len(regions) == 1 and regions[0].opposite and not regions[0].qualifier:
        return SAME_SLOT, f"says the opposite about the same thing ({regions[0].words()})"
    quals = [r for r in regions if r.qualifier or (r.modifier and not r.quantity)]
    if quals:
        return SIBLING, f"a different subject or qualifier ({quals[0].words()}): another fact"
    if len(regions) > 1:
        if all(r.pure_quantity and r.after_verb for r in regions) and not multi:
            return SAME_SLOT, "only numbers, times or dates changed"
        return SIBLING, f"{len(regions)} places differ ({'; '.join(r.words() for r in regions)}): another fact"
    r = regions[0]
    if r.pure_quantity and r.after_verb:
        return SAME_SLOT, f"the number, time or date changed ({r.words()})"
    if multi or r.governor == "multi":
        return SIBLING, f"a verb that holds many values ({r.words()}): both true"
    if r.governor == "single" and r.adjacent and not r.compound:
        return SAME_SLOT, f"a slot that holds one value changed ({r.words()})"
    return UNCLEAR, f"not clear the same slot changed ({r.words()})"


def _judge_cued(regions: tuple[Region, ...]) -> tuple[str, str]:
    """With an update cue ("now", "switched to", "改用", "ab sofort") the new entry says it supersedes
    something; it supersedes *this* entry unless the two name another subject — a qualifier exchanged in
    the subject ("the *pro* tier is now …") or in front of shared words ("*Australian* traffic")."""
    other = [r for r in regions if r.exchange and ((r.qualifier and not r.whole_subject)
                                                   or (r.modifier and not r.quantity))]
    if other:
        return SIBLING, f"an update of another subject or qualifier ({other[0].words()}): another fact"
    return SAME_SLOT, f"an update cue and the value changed ({'; '.join(r.words() for r in regions)})"


def _regions(a: list[str], b: list[str], pa: int | None, pb: int | None, vals: frozenset[str],
             lang: str, cue: bool, idents: frozenset[str]) -> list[Region]:
    out: list[Region] = []
    for i1, i2, j1, j2 in _differences(a, b):
        sa, sb = a[i1:i2], b[j1:j2]
        if _ignorable(sa, sb, a, b, i1, i2, j1, j2, lang, cue):
            continue
        quantity = any(pred.is_quantity(t) and t not in idents for t in (*sa, *sb))
        value = quantity or any(t in vals for t in (*sa, *sb))
        in_subject = (_before(i1, pa) and _before(j1, pb)) or any(t in idents for t in (*sa, *sb))
        whole = in_subject and _ends_at(i2, pa, a) and _ends_at(j2, pb, b) and not _modifier_prefix(a, i1)
        governor, adjacent = pred.governor(a, i1, pa, lang)
        if not governor:
            governor, adjacent = pred.governor(b, j1, pb, lang)
        flip = _around(a, b, i1, i2, j1, j2, lambda x, y: opposite(x, y, _STOP))
        modifier = _modifies(a, b, i1, i2, j1, j2, lang) and not (update_cue(" ".join(sb)) or update_cue("".join(sb)))
        pure = quantity and _rest(sa, lang) == _rest(sb, lang)
        exchange = _new_content(sa, b, lang) and _new_content(sb, a, lang)
        added = not (sa and sb) and _new_content(sa or sb, b if sa else a, lang)
        compound = _compound(sa, lang) or _compound(sb, lang)
        after = (i1 > pa and j1 > pb) if pa is not None and pb is not None else (
            pa is None and pb is None and min(i1, j1) >= _SUBJECT_SPAN)
        out.append(Region(tuple(sa), tuple(sb), i1, j1, in_subject, value, quantity, governor, whole, opposite=flip,
                          modifier=modifier, pure_quantity=pure, adjacent=adjacent, exchange=exchange,
                          after_verb=after, added=added, compound=compound))
    return out


def _modifies(a: list[str], b: list[str], i1: int, i2: int, j1: int, j2: int, lang: str) -> bool:
    """The next token after the region is the same content word on both sides and not a verb: the region
    modifies it ("10% of *Canadian* traffic", "*支付*模块")."""
    if i2 >= len(a) or j2 >= len(b) or a[i2] != b[j2]:
        return False
    nxt = a[i2]
    if lang == "zh" and all(not _CJK.fullmatch(t) for t in (*a[i1:i2], *b[j1:j2])):
        return False  # "Vim 编辑器": a name before its kind, not a qualifier
    if _CJK.fullmatch(nxt) and (i2 + 1 >= len(a) or j2 + 1 >= len(b) or a[i2 + 1] != b[j2 + 1]
                                or pred.light([a[i2 + 1]], lang)):
        return False  # one shared character may end the exchanged word itself ("[英]文" / "[中]文")
    return not pred.light([nxt], lang) and not pred.verbal([nxt], lang) and not pred.is_quantity(nxt) \
        and not pred.is_cue_or_negation([nxt], lang)


def _compound(tokens: list[str], lang: str) -> bool:
    """A stop word followed by a content word inside the span, or more than three content words: the span
    holds a value *and* something that qualifies it, so it is not one slot's value."""
    content = [t for t in tokens if not pred.light([t], lang)]
    if len(content) > (6 if lang == "zh" else 3):  # a Chinese word is two characters or more
        return True
    inner = tokens[1:]
    return any(pred.light([t], lang) and i + 1 < len(inner) and not pred.light([inner[i + 1]], lang)
               for i, t in enumerate(inner))


def _new_content(tokens: list[str], other: list[str], lang: str) -> bool:
    """``tokens`` hold a content word the other text does not have anywhere (not a verb, cue or stop word)."""
    rest = {_stem(t) for t in other}
    return any(_stem(t) not in rest for t in _rest(tokens, lang) if not pred.is_cue_or_negation([t], lang))


def _rest(tokens: list[str], lang: str) -> list[str]:
    """A region's tokens less numbers, dates, stop words, cues and verbs: what must match for a change to be
    "only the number" ("PostgreSQL 14" / "PostgreSQL 16" yes, "GCC 13" / "CMake 3.28" no)."""
    return [t for t in tokens if not (pred.is_quantity(t) or pred.light([t], lang) or pred.verbal([t], lang))]


def _differences(a: list[str], b: list[str]) -> list[tuple[int, int, int, int]]:
    """The non-equal spans of the alignment, two spans joined when only numeral characters lie between
    them ("十[六]" / "[三]十[二]" is one number changed, not two places)."""
    spans: list[tuple[int, int, int, int]] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        if spans and _joined(spans[-1], (i1, i2, j1, j2), a, b):
            p1, _, q1, _ = spans[-1]
            spans[-1] = (p1, i2, q1, j2)
            continue
        spans.append((i1, i2, j1, j2))
    return spans


def _joined(prev: tuple[int, int, int, int], cur: tuple[int, int, int, int], a: list[str], b: list[str]) -> bool:
    """Two spans are one change when only numeral characters lie between them ("十[六]" / "[三]十[二]"), or
    one Chinese character that the alignment shifted ("[女]儿" / "儿[子]": one word exchanged)."""
    p1, p2, q1, q2 = prev
    i1, i2, j1, j2 = cur
    between = a[p2:i1]
    if not between or len(between) > 2:
        return False
    spans = (*a[p1:p2], *b[q1:q2], *a[i1:i2], *b[j1:j2])
    if all(_ZH_NUMERAL.fullmatch(t) for t in between) and any(_ZH_NUMERAL.fullmatch(t) for t in spans):
        return True
    one_sided = p1 == p2 or q1 == q2 or i1 == i2 or j1 == j2
    return len(between) == 1 and one_sided and all(_CJK.fullmatch(t) for t in (between[0], *spans))


def _ignorable(sa: list[str], sb: list[str], a: list[str], b: list[str], i1: int, i2: int, j1: int, j2: int,
               lang: str, cue: bool) -> bool:
    """Differences that change no slot: stop words, one number in two spellings, synonyms (a word may be
    split: "很[困]难" / "很难"), a cue or a negation added on one side, a verb exchanged beside a cue."""
    if pred.light(sa, lang) and pred.light(sb, lang):
        return True
    if (sa and sb and _numeric_equal(sa, sb)) or _same_sense(a, b, i1, i2, j1, j2):
        return True
    if not sa or not sb:
        return pred.is_cue_or_negation(sa or sb, lang) or _moved(sa or sb, b if sa else a, lang)
    return cue and _around(a, b, i1, i2, j1, j2, lambda x, y: pred.verbal(x, lang) and pred.verbal(y, lang))


def _moved(tokens: list[str], other: list[str], lang: str) -> bool:
    """Tokens one side adds that the other side has elsewhere ("Rust 是用户最喜欢的…" / "用户最喜欢的…是 Rust"):
    the sentence was reordered, nothing was added."""
    rest = set(other)
    return all(t in rest or pred.light([t], lang) for t in tokens)


def _around(a: list[str], b: list[str], i1: int, i2: int, j1: int, j2: int,
            test: Callable[[list[str], list[str]], bool]) -> bool:
    """``test`` on the two spans, alone or with up to two equal neighbours either side (a character
    alignment splits Chinese words: "偏好[使]用" / "[现在改]用")."""
    for left in range(3):
        if i1 - left < 0 or j1 - left < 0 or a[i1 - left : i1] != b[j1 - left : j1]:
            break
        for right in range(3):
            if i2 + right > len(a) or j2 + right > len(b) or a[i2 : i2 + right] != b[j2 : j2 + right]:
                break
            if test(a[i1 - left : i2 + right], b[j1 - left : j2 + right]):
                return True
    return False


def _before(i: int, p: int | None) -> bool:
    """Position ``i`` lies in the subject: before the predicate (no predicate: nothing is the subject)."""
    return p is not None and i < p


def _ends_at(end: int, p: int | None, toks: list[str]) -> bool:
    """The region reaches the predicate (only stop words between): it is the subject's head, not a modifier."""
    return p is not None and all(_light([t]) for t in toks[end:p])


def _modifier_prefix(toks: list[str], start: int) -> bool:
    """Content words before the region in the subject ("the API *rate* limit"): the region qualifies them."""
    return any(not _light([t]) for t in toks[:start])


_IDENT = re.compile(r"(?<![\w])[^\W\d_]+[-_#/]?(\d+)\b")


def _calendar(tokens: list[str]) -> frozenset[str]:
    """Weekdays and months named (any of the six languages; "terças" is "terça")."""
    return frozenset(t.removesuffix("s") for t in tokens if pred.is_weekday_or_month(t))


def _identifiers(text: str) -> frozenset[str]:
    """Numbers that are part of a name ("db-01", "node3", "issue #42"): they say *which* thing, not how
    many — an exchanged one is another subject (a sibling), never a changed value."""
    return frozenset(m.group(1) for m in _IDENT.finditer(text))


@functools.lru_cache(maxsize=4096)
def _value_tokens(text: str) -> frozenset[str]:
    """The tokens of ``text`` that :func:`memoryd.indexer.write.lexical.values` counts as values."""
    out: set[str] = set()
    for v in values(text):
        out |= set(seq_tokens(v.split(":", 1)[1] if v.startswith("weekday:") else v))
    toks = seq_tokens(text)
    out |= {t for t in toks if pred.is_quantity(t) or pred.is_weekday_or_month(t)}
    return frozenset(out)
