"""The write audit log: one JSON line per write request, allowed or denied (README, "Writing memories").

``<data_dir>/audit.jsonl``, mode 0600, append-only: a record is one
``O_APPEND`` write, so lines never interleave. When the file would grow past
``max_bytes`` it is rotated (``audit.jsonl`` → ``.1`` → … → ``.backups``, the
oldest dropped). Records name who (uid, session), what (action, namespace,
path, line, bytes) and the outcome (decision, reason, rule, error code) —
never the content: a rejected secret must not reach the disk here either.

A failure to write the log is logged and does not fail the request (the
write itself already happened or was refused).

Refusals are aggregated, so that a flood of refused requests cannot rotate
the history of real writes away: within one window (``DENIAL_WINDOW_S``) the
first refusal (``denied`` or ``rejected``) of each (session, action, decision,
code, rule) is written in full and the repeats are only counted; when the
window ends (at the next record, ``tail`` or ``flush``) one summary record per
key says how many there were (``count``) and since when (``since``). At most
``MAX_DENIAL_KEYS`` keys are written in full per window; refusals beyond them
are counted in one overflow summary (session ``*``). A sustained flood thus
writes at most ``2 * MAX_DENIAL_KEYS + 1`` records per window, whatever its
rate or the number of session keys it uses; the aggregation state is bounded
the same way.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from memoryd.daemon.rpc.errors import RpcError

log = structlog.get_logger(__name__)

FIELDS = ("time", "uid", "pid", "session", "action", "namespace", "path", "line", "bytes", "decision", "reason",
          "rule", "code", "count", "since")
AGGREGATED = frozenset({"denied", "rejected"})  # refusals: repeats are counted, not written one by one
DENIAL_WINDOW_S = 60.0
MAX_DENIAL_KEYS = 32
_OVERFLOW: tuple[str, ...] = ("*",)


@dataclass
class _Repeats:
    """A refusal key's first record in this window and how many repeats followed it."""

    rec: dict[str, Any]
    since: str
    last: str
    count: int = 0


class AuditLog:
    def __init__(self, path: Path, max_bytes: int, backups: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._clock = clock
        self._lock = threading.Lock()
        self._window_end = 0.0
        self._repeats: dict[tuple[str, ...], _Repeats] = {}

    def record(self, **fields: Any) -> None:
        """Append one record (``time`` is added; unknown field names are refused: nothing slips in).

        A refusal repeated within the window is counted instead (see the module docstring).
        """
        unknown = set(fields) - set(FIELDS)
        if unknown:
            raise ValueError(f"audit: unknown field(s) {sorted(unknown)}")
        now = _now()
        entry = {"time": now, **fields}
        with self._lock:
            self._roll_window()
            if fields.get("decision") in AGGREGATED and self._counted(entry, now):
                return
            self._append(entry)

    def flush(self) -> None:
        """Write the summaries of the refusals counted so far (at shutdown; ``tail`` does it too)."""
        with self._lock:
            self._write_summaries()

    def _counted(self, entry: dict[str, Any], now: str) -> bool:
        """True if this refusal is a repeat (or over the key budget) and was only counted."""
        key = _key(entry)
        seen = self._repeats.get(key)
        if seen is None and len(self._repeats) < MAX_DENIAL_KEYS:
            self._repeats[key] = _Repeats(entry, since=now, last=now)
            return False  # the first of its kind in this window: written in full
        if seen is None:
            key = _OVERFLOW
            seen = self._repeats.setdefault(key, _Repeats(
                {"session": "*", "action": "*", "decision": "denied",
                 "reason": f"refusals beyond the first {MAX_DENIAL_KEYS} kinds in this window"},
                since=now, last=now))
        seen.count += 1
        seen.last = now
        return True

    def _roll_window(self) -> None:
        now = self._clock()
        if now >= self._window_end:
            self._write_summaries()
            self._window_end = now + DENIAL_WINDOW_S

    def _write_summaries(self) -> None:
        for rep in self._repeats.values():
            if rep.count:
                summary = {k: v for k, v in rep.rec.items() if k in ("uid", "session", "action", "namespace",
                                                                      "decision", "reason", "rule", "code")}
                self._append({**summary, "time": rep.last, "count": rep.count, "since": rep.since})
        self._repeats.clear()

    def _append(self, entry: dict[str, Any]) -> None:
        """Write one line (lock held)."""
        line = (json.dumps({k: entry[k] for k in FIELDS if entry.get(k) is not None}, ensure_ascii=False,
                           separators=(",", ":")) + "\n").encode("utf-8", "replace")
        try:
            self._rotate_if_needed(len(line))
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError as exc:
            log.error("audit.write_failed", path=str(self.path), error=exc.strerror or str(exc))

    def _rotate_if_needed(self, incoming: int) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size + incoming <= self.max_bytes:
            return
        if self.backups == 0:
            self.path.unlink()
            return
        with contextlib.suppress(FileNotFoundError):
            self._backup(self.backups).unlink()
        for i in range(self.backups - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                os.replace(self._backup(i), self._backup(i + 1))
        os.replace(self.path, self._backup(1))
        log.info("audit.rotated", path=str(self.path), size=size)

    def _backup(self, i: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{i}")

    def tail(self, n: int) -> list[dict[str, Any]]:
        """The last ``n`` records, oldest first (across rotated files; unreadable lines skipped)."""
        out: list[dict[str, Any]] = []
        with self._lock:
            self._write_summaries()  # counts so far become visible (a new window starts with the next one)
            files = [self.path, *(self._backup(i) for i in range(1, self.backups + 1))]
            for f in files:
                try:
                    lines = f.read_text(encoding="utf-8", errors="replace").splitlines()
                except FileNotFoundError:
                    continue
                for raw in reversed(lines):
                    with contextlib.suppress(ValueError):
                        out.append(json.loads(raw))
                    if len(out) >= n:
                        return out[::-1]
        return out[::-1]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _key(entry: dict[str, Any]) -> tuple[str, ...]:
    """What makes two refusals "the same": who, what, the outcome and its code/rule (not the free text)."""
    session = json.dumps(entry.get("session"), sort_keys=True, default=str)
    return (session, str(entry.get("action")), str(entry.get("decision")), str(entry.get("code")),
            str(entry.get("rule")), str(entry.get("uid")))


class Audited:
    """Writes ``rec`` to ``audit_log`` when the block ends, whatever happened.

    An ``RpcError`` leaving the block is recorded as ``denied`` (or ``error`` for
    ``error_codes``) with its message and code; any other exception as ``error``.
    The caller fills ``rec`` as the request goes (session, namespace, decision …).
    """

    def __init__(self, audit_log: AuditLog, rec: dict[str, Any], error_codes: frozenset[int] = frozenset()) -> None:
        self.log = audit_log
        self.rec = rec
        self.error_codes = error_codes

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if isinstance(exc, RpcError):
            decision = "error" if exc.code in self.error_codes else "denied"
            self.rec.update(decision=decision, reason=exc.message, code=exc.code)
        elif exc is not None:
            self.rec.update(decision="error", reason=type(exc).__name__)
        self.log.record(**self.rec)
