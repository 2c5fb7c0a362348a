"""``[observe]``: how conversations are kept (docs/conversations.md)."""

from __future__ import annotations

from dataclasses import dataclass

from memoryd.indexer.errors import ConfigError


@dataclass(frozen=True)
class ObserveConfig:
    enabled: bool = True
    folder: str = "sessions"  # the session notes' folder inside the agent's namespace
    keep_days: int = 30  # notes of sessions started longer ago are deleted whole; 0 = kept forever
    max_bytes: int = 5_000_000  # the notes of one namespace together; the oldest go whole past it; 0 = no cap
    extract: bool = True  # with [llm] configured: extract memories, experiences and profile signals
    throttle_s: float = 30.0  # at most one extraction call per agent namespace this often
    max_memories: int = 3  # memories one extraction may write (each through remember, its limits too)
    max_prompt_chars: int = 12_000  # the conversation text one extraction call may send
    max_pending_turns: int = 50  # turns kept waiting for extraction per session (older ones: capture only)


def validate_observe(c: ObserveConfig) -> None:
    """Raise :class:`ConfigError` naming the ``observe.*`` key at fault."""
    def bad(key: str, value: object, why: str) -> ConfigError:
        return ConfigError(f"config 'observe.{key}' = {value!r}: {why}")

    if not c.folder or not all(ch.isalnum() or ch in "._-" for ch in c.folder) or c.folder.startswith("."):
        raise bad("folder", c.folder, "must be one folder name (letters, digits, . _ -), not hidden")
    if c.keep_days < 0:
        raise bad("keep_days", c.keep_days, "must be >= 0 (0 = kept forever)")
    if c.max_bytes != 0 and c.max_bytes < 10_000:
        raise bad("max_bytes", c.max_bytes, "must be 0 (no cap) or >= 10000")
    if not 0 <= c.throttle_s <= 3600:
        raise bad("throttle_s", c.throttle_s, "must be in 0..3600")
    if not 0 <= c.max_memories <= 10:
        raise bad("max_memories", c.max_memories, "must be in 0..10")
    if not 1000 <= c.max_prompt_chars <= 200_000:
        raise bad("max_prompt_chars", c.max_prompt_chars, "must be in 1000..200000")
    if not 1 <= c.max_pending_turns <= 1000:
        raise bad("max_pending_turns", c.max_pending_turns, "must be in 1..1000")
