"""The smart router (README, "Writing memories"): which file and section a memory belongs in.

Keyword rules in priority order (first match wins); an explicit ``type`` skips
them. Targets are relative to the namespace's folder. Two layouts:

* ``files`` (the owner's default namespace and ``agent:…`` namespaces): one file
  per type, as in the seed — ``user/instructions.md``, ``agent/decisions.md``,
  …, and the journal in ``memory/YYYY-MM-DD.md`` (OpenClaw's daily notes);
* ``single`` (``peer:…`` and ``group:…``): everything in the namespace's
  ``MEMORY.md``, one section per type — the access rules let a peer or a group append
  to its own ``MEMORY.md`` and nothing else.

A third layout, ``bank``, is the owner's default namespace of a root that holds
a Memory Bank (``memory-bank/MEMORY.md``, docs/memory-bank.md), and every one
of its targets is inside ``memory-bank/`` (seed 002: never a file outside it):
focus goes to Current Focus and decisions to Decision Highlights (both inside
MEMORY.md's MACHINE block; a decision is also recorded in
``details/patterns.md`` by the writer), requirements, design notes and
learnings (the ``pattern`` type) to ``memory-bank/details/…``, instructions and
preferences to ``details/user.md``, entities to ``details/entities.md`` and the
journal to ``details/journal/YYYY-MM-DD.md``. Its keyword rules for focus,
requirements and design run before the standard ones; elsewhere those three
types are only chosen by an explicit ``type``.

English keywords match whole words (the seed's bare ``like`` is left out: it is
mostly a preposition — "looks like a bug"); Chinese ones match anywhere, except
``模式`` in its "mode" sense (深色模式, 夜间模式, 调试模式 …), which is not a pattern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from memoryd.indexer.errors import UnknownType

FILES, SINGLE, BANK = "files", "single", "bank"
BANK_DIR = "memory-bank"


@dataclass(frozen=True)
class RouteRule:
    memory_type: str
    pattern: re.Pattern[str] | None  # None: the default (journal)
    target: str  # in the "files" layout; {date} is the day
    scope: str
    importance: int
    section: str  # heading title ({date} is the day)


@dataclass(frozen=True)
class Route:
    memory_type: str
    target: str  # relative to the namespace folder, posix
    scope: str
    importance: int
    section: str  # heading title, without the #s
    section_level: int
    matched: str  # "type" (explicit), "keyword: <word>" or "default"
    highlights: bool = False  # a row of the Memory Bank's Decision Highlights table, not a list item


_EN_ENTITY_STOP = "This|That|It|There|Here|What|Which|Who|The|A|An|We|They|He|She|Our|My|Your|User|Everything|Nothing"

RULES: tuple[RouteRule, ...] = (
    RouteRule("instruction", re.compile(
        r"\b(?:always|never|must|do not|don't|rules?|make sure|remember to)\b"
        r"|必须|不要|务必|禁止|切勿|规则|一定要|千万别",
        re.IGNORECASE), "user/instructions.md", "global", 5, "Instructions"),
    RouteRule("decision", re.compile(
        r"\b(?:decided|decide|decision|chose|chosen|we will use|going with|agreed to|settled on|opted)\b"
        r"|决定|采用|选定|定下|拍板|选择.*方案", re.IGNORECASE), "agent/decisions.md", "project", 5, "Decisions"),
    RouteRule("pattern", re.compile(
        r"\b(?:patterns?|solutions?|solved|workaround|root cause|fixed by|the fix|turns out|lesson learned|gotcha)\b"
        r"|发现|(?<![色间行试发])模式|解决|原因是|踩坑|规律|经验", re.IGNORECASE),
        "agent/patterns.md", "project", 3, "Patterns"),
    RouteRule("preference", re.compile(
        r"\b(?:prefers?|preferred|preferences?|likes|liked|loves|enjoys|favou?rite|dislikes|hates|rather than)\b"
        r"|偏好|喜欢|偏爱|讨厌|习惯用|爱用", re.IGNORECASE), "user/preferences.md", "global", 4, "Preferences"),
    RouteRule("entity", re.compile(
        rf"(?<![\w'])(?!(?:{_EN_ENTITY_STOP})\b)[A-Z][a-z]+(?: [A-Z][a-z]+)?(?:'s)? "
        r"(?:is|was|works|role|leads|manages|joined)\b|[\u4e00-\u9fff]{2,4}(?:是|担任)"),
        "user/entities.md", "global", 3, "Entities"),
    RouteRule("journal", None, "memory/{date}.md", "project", 1, "{date}"),
)
#: Memory Bank types: keyword-routed only in the ``bank`` layout (they run first there).
BANK_RULES: tuple[RouteRule, ...] = (
    RouteRule("requirement", re.compile(
        r"\b(?:requirements?|must support|should support|acceptance criteria|user stor(?:y|ies))\b|需求|验收标准",
        re.IGNORECASE), "agent/requirements.md", "project", 4, "Requirements"),
    RouteRule("focus", re.compile(
        r"\b(?:currently (?:working on|focused on|on)|focus(?:ing)? on|current focus|next steps?|blocked by)\b"
        r"|当前重点|正在做|下一步|目前在", re.IGNORECASE), "agent/focus.md", "project", 4, "Current Focus"),
    RouteRule("design", re.compile(
        r"\b(?:architecture|design(?:ed)?|data model|schema)\b|架构|设计", re.IGNORECASE),
        "agent/design.md", "project", 3, "Design notes"),
)
TYPES = tuple(r.memory_type for r in (*RULES, *BANK_RULES))
_BY_TYPE = {r.memory_type: r for r in (*RULES, *BANK_RULES)}
#: In the ``bank`` layout: requirements before instructions ("must support"), decisions before
#: design ("decided on the design of …").
_BANK_ORDER = (BANK_RULES[0], RULES[0], _BY_TYPE["decision"], *BANK_RULES[1:], *RULES[2:])
_BANK_TARGETS = {  # type → (file under memory-bank/, section); {date} is the day
    "focus": ("MEMORY.md", "Current Focus"),
    "decision": ("MEMORY.md", "Decision Highlights (Still Binding)"),
    "requirement": ("details/requirements/notes.md", "Requirements"),
    "design": ("details/design/notes.md", "Design notes"),
    "pattern": ("details/learnings/notes.md", "Learnings"),
    "instruction": ("details/user.md", "Instructions"),
    "preference": ("details/user.md", "Preferences"),
    "entity": ("details/entities.md", "Entities"),
    "journal": ("details/journal/{date}.md", "{date}"),
}


def route(content: str, today: date, memory_type: str | None = None, layout: str = FILES) -> Route:
    """Where ``content`` goes. Raises :class:`UnknownType` for a ``memory_type`` not in :data:`TYPES`."""
    if memory_type is not None:
        if memory_type not in _BY_TYPE:
            raise UnknownType(f"unknown memory type {memory_type!r}; use one of {', '.join(TYPES)}")
        return _build(_BY_TYPE[memory_type], today, layout, "type")
    for rule in _BANK_ORDER if layout == BANK else RULES:
        if rule.pattern is None:
            return _build(rule, today, layout, "default")
        m = rule.pattern.search(content)
        if m:
            return _build(rule, today, layout, f"keyword: {m.group().strip()}")
    raise AssertionError("the last rule is the default")  # pragma: no cover


def _build(rule: RouteRule, today: date, layout: str, matched: str) -> Route:
    day = today.isoformat()
    if layout == BANK:
        target, section = _BANK_TARGETS[rule.memory_type]
        return Route(rule.memory_type, f"{BANK_DIR}/{target.format(date=day)}", rule.scope, rule.importance,
                     section.format(date=day), 1 if rule.memory_type == "journal" else 2, matched,
                     highlights=rule.memory_type == "decision")
    if layout == SINGLE:
        section = "Journal" if rule.memory_type == "journal" else rule.section
        return Route(rule.memory_type, "MEMORY.md", rule.scope, rule.importance, section, 2, matched)
    level = 1 if rule.memory_type == "journal" else 2
    return Route(rule.memory_type, rule.target.format(date=day), rule.scope, rule.importance,
                 rule.section.format(date=day), level, matched)
