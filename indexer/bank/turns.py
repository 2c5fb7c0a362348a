"""A conversation's turns from the transcript forms agents write, for Memory Bank proposals.

Why here and so small: a proposal needs only who said what, in order — the last few turns. The
forms read are Claude Code's transcript JSONL (``{"type": "user"|"assistant", "message": {"role",
"content"}}`` per line), an OpenAI ``messages`` array (JSON), a JSON list of ``{role, text}`` and
plain ``role: text`` lines. Tool calls, tool results, system prompts and injected memoryd context
blocks are not turns: a proposal built from them would propose the tool output or our own block back.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

ROLES = ("user", "assistant")
CONTEXT_HEADER = "## Relevant memories"  # memoryd's own block (indexer/search/context.py): never a turn
MAX_TURN_CHARS = 20_000
_PLAIN = re.compile(r"^(user|assistant|human|ai)\s*:\s?(.*)$", re.IGNORECASE)
_ALIASES = {"human": "user", "ai": "assistant"}


@dataclass(frozen=True)
class Turn:
    role: str  # "user" | "assistant"
    text: str


def parse_turns(raw: str) -> list[Turn]:
    """The user and assistant turns of ``raw`` (any form above), in order; [] when none is readable."""
    text = raw.strip()
    if not text:
        return []
    if text[0] == "[":
        try:
            return _from_items(json.loads(text))
        except ValueError:
            pass
    if text[0] == "{":
        items: list[Any] = []
        for line in text.splitlines():
            try:
                items.append(json.loads(line))
            except ValueError:
                continue
        if items:
            return _from_items(items)
    return _from_plain(text)


def turns_of(items: object) -> list[Turn]:
    """Turns from a socket param: a list of ``{role, text}`` (or ``content``) objects."""
    return _from_items(items) if isinstance(items, list) else []


def _from_items(items: object) -> list[Turn]:
    out: list[Turn] = []
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        inner = item.get("message")
        message: dict[str, Any] = inner if isinstance(inner, dict) else item
        role = message.get("role") or item.get("type")
        body = message.get("text", message.get("content"))
        _add(out, role, _text_of(body))
    return out


def _from_plain(text: str) -> list[Turn]:
    out: list[Turn] = []
    role, lines = None, []
    for line in text.splitlines():
        m = _PLAIN.match(line)
        if m:
            if role is not None:
                _add(out, role, "\n".join(lines))
            role, lines = m.group(1).lower(), [m.group(2)]
        elif role is not None:
            lines.append(line)
    if role is not None:
        _add(out, role, "\n".join(lines))
    return out


def _text_of(body: object) -> str:
    """The prose of a message body: a string, or the ``text`` parts of a content list (tool parts dropped)."""
    if isinstance(body, str):
        return body
    if isinstance(body, list):
        return "\n".join(p["text"] for p in body
                         if isinstance(p, dict) and p.get("type") in (None, "text") and isinstance(p.get("text"), str))
    return ""


def _add(out: list[Turn], role: object, text: str) -> None:
    role = _ALIASES.get(str(role).lower(), str(role).lower()) if isinstance(role, str) else None
    if role not in ROLES:
        return
    text = _without_context(text).strip()[:MAX_TURN_CHARS]
    if text:
        out.append(Turn(role, text))


def _without_context(text: str) -> str:
    """``text`` without an injected memoryd context block (it runs to the end of the hook's output)."""
    at = text.find(CONTEXT_HEADER)
    return text if at < 0 else text[:at]
