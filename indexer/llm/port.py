"""What a feature needs of a model: ``complete_json`` (the ``[llm]`` client, or a test's fake).

Features that can use a model (Memory Bank proposals, context summaries, file abstracts) take
this protocol, not :class:`~memoryd.indexer.llm.client.LLMClient`: they are tested with a scripted
fake, and each has a default that works without any model (docs/agents.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class JsonModel(Protocol):
    """``complete_json(messages, schema) -> dict``: the answer checked against ``schema``, or an error
    (``LLMError`` and its children: down, over budget, a bad answer)."""

    def complete_json(self, messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any],
                      name: str = ...) -> dict[str, Any]: ...


def model_id(model: object) -> str:
    """The model's name for cache keys (``health()["model"]`` of the client; the class name otherwise)."""
    health = getattr(model, "health", None)
    if callable(health):
        try:
            name = health().get("model")
        except (AttributeError, TypeError):
            name = None
        if isinstance(name, str) and name:
            return name
    return type(model).__name__
