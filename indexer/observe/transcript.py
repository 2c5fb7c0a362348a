"""Conversation transcripts in, the turns worth keeping out: four formats, one :class:`Turn` list.

``observe`` takes what an agent host has on disk or in memory:

* **Claude Code** transcript JSONL (``~/.claude/projects/*/<session>.jsonl``): one entry a line,
  ``{"type": "user"|"assistant", "message": {"role", "content": str | [blocks]}, ...}`` (OpenClaw's
  session files, ``{"type": "message", "message": {...}}``, read the same);
* **Codex** session JSONL (``~/.codex/sessions/.../rollout-*.jsonl``): ``{"type": "response_item",
  "payload": {"type": "message", "role", "content": [{"type": "input_text"|"output_text", "text"}]}}``
  (and the older lines without ``payload``);
* an **OpenAI** ``messages`` array (``[{"role", "content"}]`` or ``{"messages": [...]}``);
* **plain** ``role: text`` lines (continuation lines belong to the turn above).

What is not conversation is dropped, so it never becomes a session note or a memory: system and
developer prompts, tool calls and their results, reasoning blocks, Claude Code's meta entries and
``<system-reminder>`` / hook blocks, Codex's ``<environment_context>`` / ``<user_instructions>``,
and memoryd's own context blocks (:data:`CONTEXT_HEADER`: what the context hook injected must not
be captured back as if the user had said it). Pure functions: no I/O, no secrets filter (that is
the capture's job, line by line).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Format = Literal["auto", "claude-code", "codex", "openai", "plain"]
FORMATS: tuple[str, ...] = ("auto", "claude-code", "codex", "openai", "plain")
ROLES = {"user": "user", "human": "user", "assistant": "assistant", "ai": "assistant", "model": "assistant",
         "agent": "assistant"}
CONTEXT_HEADER = "## Relevant memories\n\nRetrieved by memoryd for:"  # indexer/search/context.py's HEADER
MAX_TURN_CHARS = 20_000  # a turn longer than this is cut (a pasted log is not a conversation)
_TAGS = ("system-reminder", "user-prompt-submit-hook", "environment_context", "user_instructions",
         "command-name", "command-message", "command-args", "local-command-stdout", "local-command-stderr")
_TAG_NAMES = "|".join(map(re.escape, _TAGS))
_TAG_BLOCK = re.compile(rf"<({_TAG_NAMES})\b[^>]*>.*?</\1>", re.S)
_PLAIN = re.compile(r"^\s*(user|human|assistant|ai|model|agent|system|developer|tool)\s*:\s?(.*)$", re.I)


class TranscriptError(ValueError):
    """The text is not a transcript of the named format (the message says which line)."""


@dataclass(frozen=True)
class Turn:
    """One message worth keeping: ``role`` is "user" or "assistant"; ``id`` is stable across re-sends."""

    role: str
    text: str
    id: str


def parse(text: str, fmt: str = "auto") -> list[Turn]:
    """The conversation turns of ``text``; raises :class:`TranscriptError` for a format it does not fit."""
    if fmt not in FORMATS:
        raise TranscriptError(f"format must be one of {', '.join(FORMATS)}, got {fmt[:40]!r}")
    kind = detect(text) if fmt == "auto" else fmt
    raw = {"claude-code": _claude, "codex": _codex, "openai": _openai, "plain": _plain}[kind](text)
    return with_ids(raw)


def detect(text: str) -> str:
    """Which format ``text`` is in, from its first JSON value or line."""
    head = text.lstrip()
    if head.startswith("["):
        return "openai"
    if head.startswith("{"):
        try:
            whole = json.loads(head)
        except ValueError:
            whole = None
        if isinstance(whole, dict) and isinstance(whole.get("messages"), list):
            return "openai"
        for line in head.splitlines()[:50]:
            obj = _json_line(line)
            if obj is None:
                continue
            if "payload" in obj or obj.get("type") in ("session_meta", "response_item", "event_msg"):
                return "codex"
            if isinstance(obj.get("message"), dict) or obj.get("type") in ("summary", "user", "assistant"):
                return "claude-code"
            if "role" in obj:
                return "openai"
        return "codex"  # an old Codex file opens with {"id", "timestamp", "instructions"}
    return "plain"


def with_ids(pairs: Iterable[tuple[str, str]]) -> list[Turn]:
    """Turns with content ids: the same role and text, the n-th time in a transcript, has the same id in
    every re-send and every format (so a transcript sent again, or its tail, adds nothing)."""
    seen: Counter[tuple[str, str]] = Counter()
    out = []
    for role, text in pairs:
        text = clean(text)
        if role not in ("user", "assistant") or not text:
            continue
        seen[(role, text)] += 1
        digest = hashlib.sha256(f"{role}\0{text}".encode("utf-8", "surrogatepass")).hexdigest()[:20]
        out.append(Turn(role, text, f"{digest}.{seen[(role, text)]}"))
    return out


def clean(text: str) -> str:
    """``text`` without injected blocks (hook output, reminders, memoryd's context), trimmed and capped."""
    text = _TAG_BLOCK.sub("", text.replace("\r\n", "\n"))
    at = text.find(CONTEXT_HEADER)
    if at >= 0:
        text = text[:at]  # memoryd's block runs to the end of what the hook added
    text = "\n".join(line.rstrip() for line in text.strip().splitlines())
    return text[:MAX_TURN_CHARS]


def _json_line(line: str) -> dict[str, Any] | None:
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _lines(text: str, what: str) -> list[dict[str, Any]]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        obj = _json_line(line)
        if obj is None:
            raise TranscriptError(f"{what} transcript, line {n}: not a JSON object")
        out.append(obj)
    return out


def _text_of(content: Any, kinds: tuple[str, ...] = ("text", "input_text", "output_text")) -> str:
    """The text blocks of a message's content (tool calls, tool results, images, reasoning dropped)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") in kinds]
    return "\n\n".join(p for p in parts if isinstance(p, str))


def _claude(text: str) -> list[tuple[str, str]]:
    out = []
    for obj in _lines(text, "Claude Code"):
        if obj.get("type") not in ("user", "assistant", "message") or obj.get("isMeta") or obj.get("isSidechain"):
            continue  # "message": OpenClaw's session files, the same shape under another type
        if obj.get("isCompactSummary") or obj.get("isVisibleInTranscriptOnly"):
            continue  # the summary Claude Code writes after a compaction: its own words, not the user's
        msg = obj.get("message")
        if not isinstance(msg, dict):
            continue
        out.append((ROLES.get(str(msg.get("role", obj["type"])), ""), _text_of(msg.get("content"))))
    return out


def _codex(text: str) -> list[tuple[str, str]]:
    items, events = [], []
    for obj in _lines(text, "Codex"):
        inner = obj.get("payload")
        payload: dict[str, Any] = inner if isinstance(inner, dict) else obj
        kind = obj.get("type")
        if kind == "event_msg" and payload.get("type") in ("user_message", "agent_message"):
            role = "user" if payload["type"] == "user_message" else "assistant"
            events.append((role, str(payload.get("message", ""))))
        elif payload.get("type") == "message" and kind in (None, "response_item", "message"):
            items.append((ROLES.get(str(payload.get("role")), ""), _text_of(payload.get("content"))))
    return items or events  # the response items are the record; events only in files that lack them


def _openai(text: str) -> list[tuple[str, str]]:
    try:
        data = json.loads(text)
    except RecursionError:
        raise TranscriptError("messages: nested too deep") from None
    except ValueError:
        data = _lines(text, "OpenAI messages")  # one message a line
    if isinstance(data, dict):
        data = data.get("messages")
    if not isinstance(data, list):
        raise TranscriptError("messages: expected a JSON array of {role, content} (or {\"messages\": [...]})")
    out = []
    for i, m in enumerate(data):
        if not isinstance(m, dict):
            raise TranscriptError(f"messages[{i}]: not an object")
        out.append((ROLES.get(str(m.get("role")), ""), _text_of(m.get("content"))))
    return out


def _plain(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        m = _PLAIN.match(line)
        if m:
            out.append((ROLES.get(m.group(1).lower(), ""), [m.group(2)]))
        elif out:
            out[-1][1].append(line)
        elif line.strip():
            raise TranscriptError(f"plain transcript: the first line must start with a role ('user: ...'), "
                                  f"got {line.strip()[:40]!r}")
    return [(role, "\n".join(lines)) for role, lines in out]
