"""A per-day (UTC) token budget for ``[llm]`` calls, kept across restarts.

A conversation hook fires on every turn of every agent: a loop, a chatty agent or a bad prompt
could spend a hosted API's money all night. Each call reserves its worst case (the prompt's
estimated tokens plus ``max_tokens``) before it is sent and settles on what the server reports
it used (``usage.total_tokens``; the estimate when it reports nothing), so concurrent calls
cannot overshoot together. With a ``path`` the day's use survives a restart (a small JSON file,
written atomically); the budget is memoryd's own bookkeeping, so a damaged file counts as a
fresh day rather than stopping the feature.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from memoryd.indexer.atomic import atomic_write_text
from memoryd.indexer.llm.errors import LLMBudgetExhausted

CHARS_PER_TOKEN = 4  # an estimate for English text; CJK is denser, so the estimate errs high there, never low


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` takes, roughly (ASCII 4 characters a token, anything else 1)."""
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return ascii_chars // CHARS_PER_TOKEN + (len(text) - ascii_chars) + 1


class TokenBudget:
    """Thread-safe. ``daily`` 0 means no cap (use is still counted, for ``status``)."""

    def __init__(self, daily: int, path: Path | None = None, clock: Callable[[], float] = time.time) -> None:
        self.daily = daily
        self._path = path
        self._clock = clock
        self._lock = threading.Lock()
        self._day, self._used, self._reserved = self._today(), 0, 0
        if path is not None:
            self._load(path)

    def _today(self) -> str:
        return time.strftime("%Y-%m-%d", time.gmtime(self._clock()))

    def _load(self, path: Path) -> None:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if raw.get("day") == self._day and isinstance(raw.get("used"), int) and raw["used"] >= 0:
                self._used = raw["used"]
        except (OSError, ValueError, AttributeError):
            pass

    def _roll(self) -> None:
        day = self._today()
        if day != self._day:
            self._day, self._used = day, 0

    def reserve(self, tokens: int) -> None:
        """Hold ``tokens`` for one call, or raise :class:`LLMBudgetExhausted`."""
        with self._lock:
            self._roll()
            if self.daily and self._used + self._reserved + tokens > self.daily:
                raise LLMBudgetExhausted(f"llm.daily_tokens = {self.daily} is spent for {self._day} (UTC): "
                                         f"{self._used} used, this call could take {tokens} more")
            self._reserved += tokens

    def settle(self, reserved: int, used: int) -> None:
        """A call that held ``reserved`` is over and took ``used`` (0 when it failed before an answer)."""
        with self._lock:
            self._reserved = max(0, self._reserved - reserved)
            self._roll()
            self._used += max(0, used)
            day, total = self._day, self._used
        if self._path is not None and used:
            # bookkeeping only: a full disk must not make the call fail after the server answered
            with contextlib.suppress(OSError):
                atomic_write_text(self._path, json.dumps({"day": day, "used": total}) + "\n")

    def snapshot(self) -> dict[str, int | str]:
        """For ``status``: the day, tokens used, the cap (0 = none)."""
        with self._lock:
            self._roll()
            return {"day": self._day, "used": self._used, "daily": self.daily}
