"""Write rate limits per session: at most N writes per turn and M per minute.

Counted per session key (``owner``, ``direct:ID``, ``group:ID``). Every
*attempt* that reaches the limiter counts — including those later refused by
the size limit, the permission matrix, the quality gate or the privacy filter
(README, "Writing memories"), so probing costs the same as writing. A request
refused by the limiter itself is not counted: a client that backs off for a
minute is always let in again. Requests without a ``turn`` id are bounded by
the per-minute limit only.

Bounded memory: a session's per-minute window is forgotten once its last
attempt is older than the window (it no longer limits anything), and at most
``MAX_SESSIONS_KEPT`` windows are kept (least recently used dropped first), so
a flood of distinct session keys costs a fixed amount of memory. Turn ids are
kept the same way (``MAX_TURNS_KEPT``).

Thread-safe (one lock); the clock is injectable so tests never sleep.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from memoryd.indexer.errors import MemorydError

WINDOW_S = 60.0
MAX_TURNS_KEPT = 4096  # turn ids remembered (oldest forgotten first)
MAX_SESSIONS_KEPT = 10_000  # per-minute windows remembered (least recently used forgotten first)


class RateLimited(MemorydError):
    """A write limit is reached; ``limit`` names the config key, ``maximum`` its value."""

    def __init__(self, limit: str, maximum: int, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.limit = limit
        self.maximum = maximum
        self.retry_after_s = retry_after_s


class WriteLimiter:
    def __init__(self, per_turn: int, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_turn = per_turn
        self.per_minute = per_minute
        self._clock = clock
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, deque[float]] = OrderedDict()  # least recently used first
        self._turns: OrderedDict[tuple[str, str], int] = OrderedDict()

    def admit(self, session_key: str, turn: str | None) -> None:
        """Count one attempt, or raise :class:`RateLimited` (and count nothing)."""
        with self._lock:
            now = self._clock()
            self._forget_expired(now)
            recent = self._recent.setdefault(session_key, deque())
            self._recent.move_to_end(session_key)
            while recent and recent[0] <= now - WINDOW_S:
                recent.popleft()
            used = self._turns.get((session_key, turn), 0) if turn is not None else 0
            if turn is not None and used >= self.per_turn:
                raise RateLimited("write.max_per_turn", self.per_turn,
                                  f"rate limit: at most {self.per_turn} writes per turn (write.max_per_turn); "
                                  f"turn {turn!r} has used them")
            if len(recent) >= self.per_minute:
                wait = round(recent[0] + WINDOW_S - now, 1)
                raise RateLimited("write.max_per_minute", self.per_minute,
                                  f"rate limit: at most {self.per_minute} writes per minute "
                                  f"(write.max_per_minute); retry in {wait} s", retry_after_s=wait)
            recent.append(now)
            if turn is not None:
                self._turns[(session_key, turn)] = used + 1
                self._turns.move_to_end((session_key, turn))
                while len(self._turns) > MAX_TURNS_KEPT:
                    self._turns.popitem(last=False)

    @property
    def sessions_kept(self) -> int:
        """How many per-minute windows are held (for tests and status)."""
        with self._lock:
            return len(self._recent)

    def _forget_expired(self, now: float) -> None:
        """Drop windows whose newest attempt left the window, then the least recently used over the cap."""
        while self._recent:
            key, oldest = next(iter(self._recent.items()))
            if oldest and oldest[-1] > now - WINDOW_S:
                break
            del self._recent[key]
        while len(self._recent) >= MAX_SESSIONS_KEPT:
            self._recent.popitem(last=False)
