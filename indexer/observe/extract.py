"""With ``[llm]``: one combined call that reads new turns and proposes what to keep (seed 001).

The model gets the turns (already redacted by the capture) and answers one JSON object:

* ``memories``: ``{type: preference|knowledge|experience, content, keywords, importance 1-10}``;
* ``experiences``: ``{pain, solution, outcome}`` — a problem met, what solved it, how it ended;
* ``profile``: ``{role, topics, tools, pain_points}`` — signals about the user.

The model only *proposes*: :func:`proposals` turns the answer into plain write requests, and
every one goes through the write path as the agent's session (gate, secret filter, router,
dedup, limits). The answer is checked against :data:`SCHEMA` by the client; what is left here
is choosing: memories below :data:`MIN_IMPORTANCE` are dropped, the rest best first, at most
``observe.max_memories``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MIN_IMPORTANCE = 3
MEMORY_TYPES = {"preference": "preference", "knowledge": None, "experience": "pattern"}  # -> remember's type
PROFILE_SECTIONS = {"role": "Role", "topics": "Topics", "tools": "Preferred tools", "pain_points": "Pain points"}
PROFILE_LABELS = {"role": "Role", "topics": "Topic", "tools": "Preferred tool", "pain_points": "Pain point"}
_STR = {"type": "string", "maxLength": 400}
_LIST = {"type": "array", "maxItems": 8, "items": {"type": "string", "maxLength": 120}}
SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["memories"],
    "properties": {
        "memories": {"type": "array", "maxItems": 10, "items": {
            "type": "object", "required": ["content"],
            "properties": {"type": {"type": "string", "enum": list(MEMORY_TYPES)},
                           "content": {"type": "string", "minLength": 1, "maxLength": 600},
                           "keywords": _LIST, "importance": {"type": "integer", "minimum": 1, "maximum": 10}}}},
        "experiences": {"type": "array", "maxItems": 5, "items": {
            "type": "object", "required": ["pain", "solution"],
            "properties": {"pain": _STR, "solution": _STR, "outcome": _STR}}},
        "profile": {"type": "object", "properties": {
            "role": {"type": ["string", "null"], "maxLength": 120},
            "topics": _LIST, "tools": _LIST, "pain_points": _LIST}},
    },
}
PROMPT = """You extract long-term memories from a conversation between a user and an AI assistant.
Answer with ONE JSON object and nothing else:
{"memories": [{"type": "preference|knowledge|experience", "content": "...", "keywords": ["..."], "importance": 1-10}],
 "experiences": [{"pain": "...", "solution": "...", "outcome": "..."}],
 "profile": {"role": "... or null", "topics": ["..."], "tools": ["..."], "pain_points": ["..."]}}
Rules:
- A memory is one self-contained sentence that will still be true and useful in a later conversation:
  the user's preferences, facts about the user, their projects and decisions, lessons learned.
- Do not keep small talk, one-off requests, what the assistant said about itself, or anything secret.
- Write memories in the language the user wrote in. importance: 10 = must never be forgotten.
- An experience is a problem the user met, the solution, and the outcome; only when all are in the text.
- Empty lists when there is nothing worth keeping. Never invent anything."""


@dataclass(frozen=True)
class Proposal:
    """One write the model proposed: ``kind`` memory | experience | profile."""

    kind: str
    content: str
    memory_type: str | None = None  # remember's type (memories)
    section: str = ""  # experiences.md / profile.md section
    importance: int = 5
    keywords: tuple[str, ...] = ()


def messages(turns: Sequence[tuple[str, str]], max_chars: int) -> list[dict[str, str]]:
    """The call's messages: the instructions, then the newest turns that fit ``max_chars`` (oldest cut)."""
    picked: list[str] = []
    used = 0
    for role, text in reversed(turns):
        line = f"{role}: {text}"
        if used + len(line) > max_chars:
            if not picked:
                picked.append(line[-max_chars:])
            break
        picked.append(line)
        used += len(line) + 2
    convo = "\n\n".join(reversed(picked))
    return [{"role": "system", "content": PROMPT},
            {"role": "user", "content": f"Conversation:\n\n{convo}\n\nAnswer with the JSON object."}]


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def proposals(answer: dict[str, Any], max_memories: int) -> list[Proposal]:
    """What to write, from a schema-checked answer: memories best first (at most ``max_memories``),
    then experiences, then profile signals."""
    mems = []
    for m in answer.get("memories", []):
        importance = int(m.get("importance", 5))
        content = _one_line(m["content"])
        if importance < MIN_IMPORTANCE or not content:
            continue
        mtype = MEMORY_TYPES.get(str(m.get("type", "knowledge")))
        mems.append(Proposal("memory", content, mtype, importance=importance,
                             keywords=tuple(_one_line(k) for k in m.get("keywords", []) if _one_line(k))))
    mems.sort(key=lambda p: -p.importance)
    out = mems[:max_memories]
    for e in answer.get("experiences", []):
        pain, solution, outcome = (_one_line(e.get(k, "")) for k in ("pain", "solution", "outcome"))
        if pain and solution:
            text = f"{pain} → {solution}" + (f" → {outcome}" if outcome else "")
            out.append(Proposal("experience", text, "pattern", "Experiences"))
    profile = answer.get("profile") or {}
    role = profile.get("role")
    if isinstance(role, str) and _one_line(role):
        out.append(Proposal("profile", f"Role: {_one_line(role)}", None, PROFILE_SECTIONS["role"]))
    for key in ("topics", "tools", "pain_points"):
        for value in profile.get(key, []) or []:
            if _one_line(value):  # labelled: the entry reads on its own in a search hit
                out.append(Proposal("profile", f"{PROFILE_LABELS[key]}: {_one_line(value)}", None,
                                    PROFILE_SECTIONS[key]))
    return out
