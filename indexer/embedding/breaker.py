"""A circuit breaker for a remote embedding server: after a failure, calls fail at once for a while.

A server that never answers made every search wait the whole timeout. After a failed call the
breaker is open for a cool-down — :data:`COOLDOWN_S`, doubling with each failure in a row up to
:data:`COOLDOWN_MAX_S` — and every call fails at once (a search goes keyword-only and says so,
the backlog waits). When it has passed, one call tries the server again (half-open): while it is
out, queries still fail at once rather than queue behind it (passages, the background's, may go).
A success closes it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

COOLDOWN_S = 5.0  # after the first failure in a row
COOLDOWN_MAX_S = 60.0  # a server down for long is tried at most this often (by searches; the backlog has its own pause)


class Breaker:
    """Thread-safe; ``clock`` is injectable for tests."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._failures = 0
        self._down_until = 0.0
        self._probing = False

    def admit(self, query: bool) -> float | None:
        """None: the call may go to the server; else the seconds the breaker stays open (fail at once)."""
        with self._lock:
            now = self._clock()
            if now < self._down_until:
                return self._down_until - now
            if self._failures and self._probing and query:
                return 0.0  # a call is trying the server: a search does not wait behind it
            if self._failures:
                self._probing = True
            return None

    def succeeded(self) -> None:
        with self._lock:
            self._failures, self._down_until, self._probing = 0, 0.0, False

    def failed(self) -> float:
        """Open the breaker; returns its cool-down in seconds."""
        with self._lock:
            self._failures += 1
            cooldown = min(COOLDOWN_MAX_S, COOLDOWN_S * 2.0 ** min(self._failures - 1, 16))
            self._down_until, self._probing = self._clock() + cooldown, False
            return cooldown

    def abandoned(self) -> None:
        """A call ended without a verdict (an unexpected exception): the next one may try the server."""
        with self._lock:
            self._probing = False

    def reset(self) -> None:
        """Close it now (an operator's retry, a test that does not wait the cool-down out)."""
        self.succeeded()
