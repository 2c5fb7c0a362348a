"""The pause after a failed idle step (a disk full, a database away): shared by the worker's idle jobs."""

from __future__ import annotations

import time


class RetryPause:
    """When the next idle step may run: ``seconds`` after a failure, or at once once a task went through
    (a task that could write says the cause may be gone)."""

    def __init__(self) -> None:
        self._until = 0.0

    def start(self, seconds: float) -> None:
        self._until = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left (zero or negative: the step may run)."""
        return self._until - time.monotonic()

    def clear(self) -> None:
        self._until = 0.0
