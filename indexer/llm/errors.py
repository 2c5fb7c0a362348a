"""The errors of the ``[llm]`` provider: what a caller may do next depends on which one it got.

Every message names the server (never the request: it holds the user's conversation, and never
the key). A caller that only extracts *more* from what it already stored (``observe``) treats
all of them the same: nothing is written but the capture, the turns are tried again later.
"""

from __future__ import annotations

from memoryd.indexer.errors import MemorydError


class LLMError(MemorydError):
    """Base of every ``[llm]`` failure."""


class LLMOff(LLMError):
    """``llm.provider`` is "off": the feature has a default that needs no model."""


class LLMUnavailable(LLMError):
    """The server did not answer usably: connection, deadline, size cap, 429, 5xx, a refused request.
    ``retry_after`` is the server's hint in seconds (0: none)."""

    def __init__(self, message: str, retry_after: float = 0.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class LLMBadAnswer(LLMError):
    """The server answered, but not one JSON object that fits the schema (the message says where it fails)."""


class LLMBudgetExhausted(LLMError):
    """``llm.daily_tokens`` is spent for today (UTC); calls resume tomorrow."""
