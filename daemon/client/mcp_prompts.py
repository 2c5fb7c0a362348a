"""The MCP prompts of ``memoryd mcp``: ready-made messages a user picks in the host (a slash command).

Pure data and small pure functions, no SDK import (as :mod:`memoryd.daemon.client.mcp_tools`).
One prompt, ``recall``: the memories about a topic, fetched with the daemon's ``context``
method, as a user message to start a conversation from. A host lists it as e.g.
``/mcp__memoryd__recall`` in Claude Code.
"""

from __future__ import annotations

from dataclasses import dataclass

from memoryd.daemon.client.mcp_tools import DEFAULT_CONTEXT_TOKENS, MAX_QUERY_CHARS


@dataclass(frozen=True)
class PromptSpec:
    name: str
    title: str
    description: str
    arguments: tuple[tuple[str, str, bool], ...]  # (name, description, required)


RECALL = PromptSpec(
    "recall", "Recall memories",
    "Load what memory holds about a topic (decisions, preferences, people, notes) into the conversation, "
    f"as one Markdown block of at most {DEFAULT_CONTEXT_TOKENS} tokens with a `path:start-end` source per section.",
    (("topic", "What to recall: a question or keywords, in any language.", True),),
)
PROMPTS: tuple[PromptSpec, ...] = (RECALL,)


def recall_params(arguments: dict[str, str] | None) -> dict[str, object]:
    """The ``context`` params for a ``recall`` request; ``ValueError`` naming the argument when it is unusable."""
    topic = (arguments or {}).get("topic", "")
    if not isinstance(topic, str) or not topic.strip():
        raise ValueError("recall: argument 'topic' is required (what to recall)")
    if len(topic) > MAX_QUERY_CHARS:
        raise ValueError(f"recall: argument 'topic' is {len(topic)} characters; the limit is {MAX_QUERY_CHARS}")
    return {"query": topic.strip(), "max_tokens": DEFAULT_CONTEXT_TOKENS}


def recall_message(topic: str, block: str) -> str:
    """The user message: the memories, or a plain statement that none are stored."""
    if not block.strip():
        return f"memoryd has no stored memory relevant to: {topic.strip()}"
    return f"Here is what my memory (memoryd) holds about: {topic.strip()}\n\n{block.strip()}\n"
