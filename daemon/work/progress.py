"""The vector backlog in words: the systemd status line while keyword-first chunks wait for their vectors."""

from __future__ import annotations

from typing import Any


def backlog_line(progress: dict[str, Any]) -> str:
    """The backlog in words, for the systemd status line (``Status:`` in ``systemctl status``)."""
    rate, eta = progress.get("per_s"), progress.get("eta_s")
    speed = f", {rate:.1f}/s, about {format_eta(eta)} left" if rate and eta is not None else ""
    return f"embedding: {progress['pending']} chunks pending{speed} (ranking from keywords only for them meanwhile)"


def format_eta(seconds: float) -> str:
    """``42 s``, ``3 min``, ``1 h 05 min``: coarse, as an estimate should read."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"
