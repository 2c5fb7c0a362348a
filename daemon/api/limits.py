"""Write rate limits for agents: at most N writes per turn and M per minute, per session.

Counted per session key (``owner``, ``direct:ID``, ``group:ID``). Only writes
that *changed something* count. A write first :meth:`WriteLimiter.reserve`\\ s a
place (refused with :class:`RateLimited` when the session has none left), runs,
and then either keeps it (:meth:`Ticket.charge`: the file changed) or gives it
back (:meth:`Ticket.release`: refused by the size limit, the permission matrix,
the quality gate or the privacy filter; a conflict, an error, a dry run, an
``unchanged`` section). Reserving before running, rather than checking before
and counting after, keeps the limit exact under concurrent requests: ten
parallel writes from one session cannot all pass a check that none has yet
counted. A request refused by the limiter itself holds nothing: a client that
backs off is always let in again. Requests without a ``turn`` id are bounded by
the per-minute limit only.

Who is held to these limits is decided by the caller
(:func:`memoryd.daemon.api.session.held_to_limits`): agents are, a person at
the command line is not.

Bounded memory: a session's per-minute window is forgotten once its last
place is older than the window (it no longer limits anything), and at most
``MAX_SESSIONS_KEPT`` windows are kept (least recently used dropped first), so
a flood of distinct session keys costs a fixed amount of memory. Turn ids are
kept the same way (``MAX_TURNS_KEPT``).

Thread-safe (one lock); the clock is injectable so tests never sleep.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from memoryd.indexer.errors import MemorydError

WINDOW_S = 60.0
MAX_TURNS_KEPT = 4096  # turn ids remembered (oldest forgotten first)
MAX_SESSIONS_KEPT = 10_000  # per-minute windows remembered (least recently used forgotten first)
TURN_LIMIT_KEY = "write.max_per_turn"
MINUTE_LIMIT_KEY = "write.max_per_minute"


class RateLimited(MemorydError):
    """A write limit is reached; ``limit`` names the config key, ``maximum`` its value.

    ``retry_after_s``: seconds until a write is let in again (the per-minute limit); None for the
    per-turn limit, which lifts when the client starts a new turn, something only it knows.
    """

    def __init__(self, limit: str, maximum: int, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.limit = limit
        self.maximum = maximum
        self.retry_after_s = retry_after_s


@dataclass
class Ticket:
    """One reserved place in a session's windows; settle it once with :meth:`charge` or :meth:`release`."""

    limiter: WriteLimiter
    key: str
    turn: str | None
    at: float
    settled: bool = field(default=False)

    def charge(self) -> None:
        """The write changed something: the place stays taken."""
        self.settled = True

    def release(self) -> None:
        """Nothing changed: give the place back (a second call does nothing)."""
        if not self.settled:
            self.settled = True
            self.limiter._give_back(self)


class WriteLimiter:
    def __init__(self, per_turn: int, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_turn = per_turn
        self.per_minute = per_minute
        self._clock = clock
        self._lock = threading.Lock()
        self._recent: OrderedDict[str, deque[float]] = OrderedDict()  # least recently used first
        self._turns: OrderedDict[tuple[str, str], int] = OrderedDict()

    def reserve(self, session_key: str, turn: str | None) -> Ticket:
        """Take one place in the session's windows, or raise :class:`RateLimited` (and take nothing)."""
        with self._lock:
            now = self._clock()
            self._forget_expired(now)
            recent = self._recent.setdefault(session_key, deque())
            self._recent.move_to_end(session_key)
            while recent and recent[0] <= now - WINDOW_S:
                recent.popleft()
            used = self._turns.get((session_key, turn), 0) if turn is not None else 0
            if turn is not None and used >= self.per_turn:
                raise RateLimited(TURN_LIMIT_KEY, self.per_turn,
                                  f"rate limit: at most {self.per_turn} writes per turn ({TURN_LIMIT_KEY}); "
                                  f"turn {turn!r} has used them; retry in a new turn")
            if len(recent) >= self.per_minute:
                wait = retry_after(recent[0] + WINDOW_S - now)
                raise RateLimited(MINUTE_LIMIT_KEY, self.per_minute,
                                  f"rate limit: at most {self.per_minute} writes per minute "
                                  f"({MINUTE_LIMIT_KEY}); retry in {wait:g} s", retry_after_s=wait)
            recent.append(now)
            if turn is not None:
                self._turns[(session_key, turn)] = used + 1
                self._turns.move_to_end((session_key, turn))
                while len(self._turns) > MAX_TURNS_KEPT:
                    self._turns.popitem(last=False)
            return Ticket(self, session_key, turn, now)

    def admit(self, session_key: str, turn: str | None) -> None:
        """Count one write at once (:meth:`reserve` and keep it), or raise :class:`RateLimited`."""
        self.reserve(session_key, turn).charge()

    def user_prompt(self) -> int:
        """The host says a person sent a new prompt: every agent turn ends, so each gets its per-turn
        allowance back at its next write (whatever its turn id). Returns how many turns were open.

        Why every turn, not one agent's: the prompt hook and the MCP server are separate processes
        the host starts, with nothing shared that names one session; a person in the loop is what
        the per-turn limit waits for, and any prompt is one.
        """
        with self._lock:
            ended = len(self._turns)
            self._turns.clear()
            return ended

    def _give_back(self, ticket: Ticket) -> None:
        """Undo :meth:`reserve`'s counting; a window or turn forgotten meanwhile has nothing to give back."""
        with self._lock:
            recent = self._recent.get(ticket.key)
            if recent is not None:
                with contextlib.suppress(ValueError):  # ValueError: it left the window already
                    recent.remove(ticket.at)  # places of one session at the same instant are interchangeable
            if ticket.turn is not None:
                turn_key = (ticket.key, ticket.turn)
                used = self._turns.get(turn_key, 0)
                if used > 1:
                    self._turns[turn_key] = used - 1
                elif used == 1:
                    del self._turns[turn_key]

    def _forget_expired(self, now: float) -> None:
        """Drop windows whose newest place left the window, then the least recently used over the cap."""
        while self._recent:
            key, oldest = next(iter(self._recent.items()))
            if oldest and oldest[-1] > now - WINDOW_S:
                break
            del self._recent[key]
        while len(self._recent) >= MAX_SESSIONS_KEPT:
            self._recent.popitem(last=False)


def retry_after(seconds: float) -> float:
    """``seconds`` rounded *up* to a tenth (at least 0.1): a client that waits that long is let in."""
    return max(0.1, math.ceil(round(seconds * 10, 6)) / 10)
