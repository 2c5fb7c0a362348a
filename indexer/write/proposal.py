"""Memory Bank write proposals (seed 002): the 💾 text an agent shows, and the user's answer to it.

The loop: at the end of a turn the agent asks whether to write what it found (a "💾" block
naming the target file and the points); the user answers with a short word; only when the
*previous* assistant turn held a proposal is that word an answer (otherwise "ok" is just "ok");
an answer that is neither confirm nor reject is the user moving on, and the proposal is skipped.

* :func:`propose_by_rules` — no model: the statements of the last turns the router files under a
  Memory Bank type by keyword (decision, requirement, learning, design, focus, instruction), through
  ``remember``'s own front half (quality gate, secret filter, router: ``intake.prepare``), the target
  being the file ``remember`` would write;
* :func:`propose_by_model` — a model picks and phrases the points (``complete_json``); every point
  still passes the gate and the filter, and any failure falls back to the rules;
* :func:`render` / :func:`parse` — the proposal text and back (the seed's ``→ 内容：a；b`` form too);
* :func:`answer_of` — ``confirm``, ``reject`` or None for the user's message.

Pure: the caller writes the points, through ``remember`` as the session (the normal write path).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from memoryd.indexer.access import Namespace
from memoryd.indexer.bank.turns import Turn
from memoryd.indexer.errors import MemorydError
from memoryd.indexer.llm.port import JsonModel
from memoryd.indexer.write.intake import Accepted, prepare

MARK = "💾"
MAX_POINTS = 3
MAX_POINT_CHARS = 240
RECENT_TURNS = 6  # the turn just finished and a little before: older ones were proposed (or not) back then
#: The types worth a Memory Bank write (seed 002's ✅ rows), in the order a tie between targets is broken.
BANK_TYPES = ("decision", "requirement", "pattern", "design", "focus", "instruction")
CONFIRM = ("好", "写", "确认", "可以", "行", "yes", "ok", "okay", "sure", "mb:write")
REJECT = ("不用", "不要", "跳过", "算了", "no", "skip", "nope", "mb:no")
_SUFFIX = r"(?:吧|啊|呀|的|了|please|thanks|thank you)?"
_END = r"(?:[\s,，.。!！;；:：~]+|$)"
_SENTENCES = re.compile(r"(?<=[.!?。！？；;])\s+|\n+")
_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])\s+")
_TARGET = re.compile(r"→\s*(?:(?:target|目标|file|文件)\s*[:：]\s*)?`?([^\s`]+\.md)`?(?:\s*\((\w+)\))?")
_POINTS_LINE = re.compile(r"→\s*(?:内容|points?|content)\s*[:：]\s*(.+)", re.IGNORECASE)
_ABOUT_BANK = re.compile(r"memory[ -]?bank|💾", re.IGNORECASE)


@dataclass(frozen=True)
class Proposal:
    """A write proposal: the file the points go to (relative to the first root), their type, the points."""

    target: str
    memory_type: str
    points: tuple[str, ...]
    by: str = "rules"  # "rules" | "model"

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "type": self.memory_type, "points": list(self.points), "by": self.by,
                "text": render(self)}


def render(p: Proposal) -> str:
    """The 💾 block (seed 002's shape, one point a line so a point may hold a ``;``)."""
    points = "\n".join(f"   - {point}" for point in p.points)
    return (f"---\n{MARK} Write this to the Memory Bank?\n   → {p.target} ({p.memory_type})\n{points}\n\n"
            "Reply \"yes\" (好 / 写) to write it, \"no\" (不用 / 跳过) to skip; if you ignore it, it is skipped.\n---")


def parse(text: str) -> Proposal | None:
    """The proposal a message holds (None: no 💾 block, or no target in it).

    Reads :func:`render`'s form and the seed's (``→ {target_file}`` then ``→ 内容：{a}；{b}``).
    """
    at = text.rfind(MARK)
    if at < 0:
        return None
    block = text[at:]
    end = block.find("\n---")
    block = block if end < 0 else block[:end]
    target = _TARGET.search(block)
    if target is None:
        return None
    points: list[str] = []
    for line in block.splitlines()[1:]:
        listed = _POINTS_LINE.search(line)
        if listed:
            points += [p.strip() for p in re.split(r"[；;]", listed.group(1)) if p.strip()]
        elif _BULLET.match(line):
            points.append(_BULLET.sub("", line).strip())
    return Proposal(target.group(1), target.group(2) or "", tuple(dict.fromkeys(points)))


def answer_of(message: str) -> str | None:
    """``confirm`` / ``reject`` when ``message`` starts with one of the seed's words (alone, or followed by
    punctuation and more: "写吧，顺便问一下…" confirms, then the rest is a question); None otherwise."""
    probe = unicodedata.normalize("NFKC", message).strip().lower()
    for kind, words in (("reject", REJECT), ("confirm", CONFIRM)):  # "不要" before "要"-like overlaps
        for word in sorted(words, key=len, reverse=True):
            if re.match(rf"{re.escape(word)}\s*{_SUFFIX}{_END}", probe):
                return kind
    return None


def propose_by_rules(turns: Sequence[Turn], namespace: Namespace, today: date, bank: bool) -> Proposal | None:
    """A proposal from the last turns, or None when nothing in them is worth a Memory Bank write.

    None too when the seed says not to propose: the user's last message answers a proposal, or the
    last assistant turn already holds one.
    """
    if _not_now(turns):
        return None
    found: list[tuple[str, Accepted]] = []
    for statement in _statements(turns[-RECENT_TURNS:]):
        accepted = _accepted(statement, namespace, today, bank, None)
        if accepted is not None and accepted.route.memory_type in BANK_TYPES and accepted.route.matched != "default":
            found.append((statement, accepted))
    if not found:
        return None
    by_target = Counter(a.target for _, a in found)
    rank = {t: min(BANK_TYPES.index(a.route.memory_type) for _, a in found if a.target == t) for t in by_target}
    target = min(by_target, key=lambda t: (-by_target[t], rank[t]))
    chosen = [(s, a) for s, a in found if a.target == target]
    points = tuple(dict.fromkeys(a.content for _, a in chosen))[:MAX_POINTS]
    return Proposal(target, chosen[0][1].route.memory_type, points)


SCHEMA: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["write", "type", "points"],
    "properties": {
        "write": {"type": "boolean"},
        "type": {"type": "string", "enum": list(BANK_TYPES)},
        "points": {"type": "array", "maxItems": 5, "items": {"type": "string", "maxLength": 600}},
    },
}
PROMPT = (
    "You maintain a project's Memory Bank. Read the conversation and decide whether it settled something "
    "worth keeping: a requirement, a technical decision, a lesson learned (bug cause, pitfall), a design "
    "note, the current focus, or a standing instruction. Not worth keeping: greetings, questions, "
    "speculation, anything already obvious, secrets (never copy keys, passwords or tokens). Answer JSON "
    '{"write": bool, "type": one of ' + ", ".join(BANK_TYPES) + ', "points": [at most 3 short, '
    "self-contained factual sentences in the conversation's language]}."
)


def propose_by_model(turns: Sequence[Turn], namespace: Namespace, today: date, bank: bool,
                     model: JsonModel, fallback: Callable[[], Proposal | None] | None = None) -> Proposal | None:
    """The model's proposal; the rules' (``fallback``) when the model fails or none of its points pass.

    Raises nothing: a model that is down, over budget or answers garbage costs the user only the
    better phrasing. ``write: false`` is the model's judgement and is kept (no proposal).
    """
    rules = fallback or (lambda: propose_by_rules(turns, namespace, today, bank))
    if _not_now(turns):
        return None
    convo = "\n".join(f"{t.role}: {t.text}" for t in turns[-RECENT_TURNS:])[-12_000:]
    try:
        answer = model.complete_json([{"role": "system", "content": PROMPT}, {"role": "user", "content": convo}],
                                     SCHEMA, name="bank_proposal")
    except (MemorydError, OSError, ValueError):  # down, over budget, a bad answer (LLMError): the rules'
        return rules()
    if not answer.get("write"):
        return None
    kind = str(answer.get("type"))
    accepted = [a for a in (_accepted(str(p), namespace, today, bank, kind) for p in answer.get("points", []))
                if a is not None]
    if not accepted:
        return rules()
    points = tuple(dict.fromkeys(a.content for a in accepted))[:MAX_POINTS]
    return Proposal(accepted[0].target, kind, points, by="model")


def _not_now(turns: Sequence[Turn]) -> bool:
    users = [t for t in turns if t.role == "user"]
    assistants = [t for t in turns if t.role == "assistant"]
    if assistants and parse(assistants[-1].text) is not None:
        return True
    return bool(users) and answer_of(users[-1].text) is not None


def _statements(turns: Sequence[Turn]) -> list[str]:
    out: list[str] = []
    for t in turns:
        if _ABOUT_BANK.search(t.text):  # a conversation about the Memory Bank itself is not proposed
            continue
        for piece in _SENTENCES.split(t.text):
            s = _BULLET.sub("", piece).strip()
            if s and not s.endswith(("?", "？")) and len(s) <= MAX_POINT_CHARS:
                out.append(s)
    return out


def _accepted(statement: str, namespace: Namespace, today: date, bank: bool, kind: str | None) -> Accepted | None:
    if len(statement) > MAX_POINT_CHARS:
        return None
    plan = prepare(statement, namespace, today, kind, bank=bank)
    return plan if isinstance(plan, Accepted) else None
