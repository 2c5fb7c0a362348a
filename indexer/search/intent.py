"""What a query asks for, by rule: temporal, preference, decision, person/entity, how-to.

A memory root is often organised by kind: dated session files, a "Decisions"
section, a "Preferences" file, a "People" page, "How-to" notes. A question's
wording says which kind it wants ("when did…", "什么时候…" → a dated file or
section; "what did we decide…", "决定" → a Decisions section). The searcher
raises the fused score of candidates whose file or section is of the wanted
kind by ``search.intent_boost`` standard deviations of the fused scores
(:func:`intent_boost`), the same scale as the named-date boost of
:mod:`memoryd.indexer.search.rescore`: evidence, never a filter.

Rules, not a model: a few English and Chinese cue patterns per intent, read
from the query's end (its latest turn, for a pasted dialogue). A query may
have several intents or none. Targets are matched against the chunk's heading
and its file path, so a root without kind-named files or sections is left
alone. Pure functions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Literal

Intent = Literal["temporal", "preference", "decision", "person", "howto"]
INTENTS: tuple[Intent, ...] = ("temporal", "preference", "decision", "person", "howto")

MAX_QUERY_CHARS = 1000
"""Characters of a query read from its end: the cues of a question sit in its last sentence."""

# Question cues. English words are matched on word boundaries, case-insensitive; Chinese cues as substrings.
_CUES: dict[Intent, re.Pattern[str]] = {
    "temporal": re.compile(
        r"\b(?:when|since when|how long ago|what (?:time|date|day|year|month)|which (?:day|date|year|month|week)"
        r"|what year|yesterday|last (?:week|month|year)|dated?)\b"
        r"|什么时候|何时|哪天|哪一天|几号|几月|哪年|哪一年|多久以前|多久前|昨天|上周|上个月|去年|日期",
        re.IGNORECASE),
    "preference": re.compile(
        r"\b(?:prefers?|preferred|preferences?|favou?rites?|likes?|loves?|enjoys?|hates?|dislikes?)\b"
        r"|喜欢|偏好|爱好|最爱|讨厌|喜爱|口味",
        re.IGNORECASE),
    "decision": re.compile(
        r"\b(?:decide[ds]?|deciding|decisions?|chose|chosen|choose|agreed|settled on)\b"
        r"|决定|决策|选择|选定|定下",
        re.IGNORECASE),
    "person": re.compile(
        r"\b(?:who|whom|whose|which person|what person)\b|谁|哪位|什么人",
        re.IGNORECASE),
    "howto": re.compile(
        r"\b(?:how (?:do|does|can|could|should|to)|steps? to|instructions?|guide)\b"
        r"|怎么做|怎样|如何|步骤|教程|方法",
        re.IGNORECASE),
}

# Where each intent's answers live: a heading or file path naming the kind.
_ISO_DATE = r"(?:19|20)\d\d[-/.]\d{1,2}[-/.]\d{1,2}"
_TEXT_DATE = (r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2}|\b\d{1,2}\s+"
              r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*|\d{1,2}\s*月\s*\d{1,2}\s*[日号]")
_TARGETS: dict[Intent, re.Pattern[str]] = {
    "temporal": re.compile(rf"{_ISO_DATE}|{_TEXT_DATE}|\b(?:timeline|journal|log|diary)\b|日记|时间线|日志",
                           re.IGNORECASE),
    "preference": re.compile(r"preference|\blikes\b|favou?rite|偏好|喜好|爱好", re.IGNORECASE),
    "decision": re.compile(r"decision|\bdecided\b|\badr\b|决定|决策", re.IGNORECASE),
    "person": re.compile(r"\b(?:people|persons?|contacts?|team|family|friends)\b|人物|联系人|家人|朋友|团队",
                         re.IGNORECASE),
    "howto": re.compile(r"how[-_ ]?to|\bguides?\b|\bsteps\b|\bsetup\b|\brunbooks?\b|\bplaybooks?\b"
                        r"|步骤|教程|指南|操作", re.IGNORECASE),
}


_HEADING = re.compile(r"^#{1,6}[ \t]+(.+)$", re.MULTILINE)


def classify(query: str) -> tuple[Intent, ...]:
    """The intents ``query``'s wording shows, in :data:`INTENTS` order (empty: none)."""
    tail = query[-MAX_QUERY_CHARS:]
    return tuple(name for name in INTENTS if _CUES[name].search(tail))


def targets(intent: Intent, heading: str | None, path: str, text: str = "") -> bool:
    """Whether a chunk under ``heading`` in file ``path`` is where ``intent``'s answers live.

    The Markdown headings inside the chunk's ``text`` count too: a chunk is labelled with the
    heading it starts under, and a short section often begins in the middle of one.
    """
    pattern = _TARGETS[intent]
    if pattern.search(path) or (heading and pattern.search(heading)):
        return True
    return any(pattern.search(h) for h in _HEADING.findall(text)) if "#" in text else False


def intent_boost(
    fused: Mapping[int, float], places: Mapping[int, tuple[str | None, str, str]], intents: tuple[Intent, ...],
    strength: float,
) -> dict[int, float]:
    """``fused`` with candidates in a place of one of ``intents`` raised by ``strength`` standard deviations.

    ``places`` maps a chunk id to its (heading, path, text). Per intent, unchanged
    when no candidate or every candidate is a target (then the kind cannot
    tell them apart); a chunk targeted by two intents gains twice.
    """
    out = dict(fused)
    if strength <= 0 or len(fused) < 2 or not intents:
        return out
    values = list(fused.values())
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    for name in intents:
        hit = [i for i in fused if targets(name, *places[i])]
        if hit and len(hit) < len(fused):
            for i in hit:
                out[i] += strength * sd
    return out
