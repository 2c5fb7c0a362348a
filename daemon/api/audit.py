"""The write audit log: one JSON line per write request, allowed or denied (README, "Writing memories").

``<data_dir>/audit.jsonl``, mode 0600, append-only: a record is one
``O_APPEND`` write, so lines never interleave. When the file would grow past
``max_bytes`` it is rotated (``audit.jsonl`` → ``.1`` → … → ``.backups``, the
oldest dropped). Records name who (uid, session), what (action, namespace,
path, line, bytes) and the outcome (decision, reason, rule, error code) —
never the content: a rejected secret must not reach the disk here either. The
fields themselves come from the client (a namespace, a path, a section title, a
peer id) or quote it (a refusal's message), so every value is passed through the
secret detector before it is written (:func:`scrub`).

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

The counts not yet summarised survive a crash: whenever a repeat is counted,
the pending summaries are saved to ``audit.jsonl.pending`` (atomically, at
most once every ``PENDING_SAVE_S``: a flood costs one small fsynced write a
second, and a kill loses at most that last second's counts). The file goes
away once its summaries are in the log; :meth:`AuditLog.recover`, at start,
appends what a killed run left there — skipping a summary already in the log,
for a kill between the append and the removal — so no count is written twice.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from memoryd.daemon.rpc.errors import RpcError
from memoryd.indexer.atomic import DATA_TEMP_SUFFIX, atomic_write_bytes, remove_stale_temps
from memoryd.indexer.redaction import privacy

log = structlog.get_logger(__name__)

FIELDS = ("time", "uid", "pid", "session", "action", "namespace", "path", "line", "bytes", "decision", "reason",
          "rule", "code", "count", "since", "hits", "paths")  # hits, paths: the read audit (read_audit.py)
AGGREGATED = frozenset({"denied", "rejected"})  # refusals: repeats are counted, not written one by one
DENIAL_WINDOW_S = 60.0
MAX_DENIAL_KEYS = 32
_OVERFLOW: tuple[str, ...] = ("*",)
PENDING_SAVE_S = 1.0
"""The most often the pending counts are saved: bounds the write rate, and what a kill can lose."""
PENDING_SUFFIX = ".pending"
_RECOVER_TAIL_BYTES = 256 * 1024  # where recover() looks for summaries already written (a window's are ~20 KB)
_SUMMARY_FIELDS = ("uid", "session", "action", "namespace", "decision", "reason", "rule", "code")


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
        self.pending_path = path.with_name(path.name + PENDING_SUFFIX)
        self._next_save = float("-inf")
        self._pending_saved = False

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
        self._save_pending()
        return True

    def _save_pending(self) -> None:
        """Save the summaries owed so far (lock held), unless saved less than ``PENDING_SAVE_S`` ago."""
        now = self._clock()
        if now < self._next_save:
            return
        self._next_save = now + PENDING_SAVE_S
        owed = [scrub(_summary(rep)) for rep in self._repeats.values() if rep.count]
        data = json.dumps(owed, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace")
        try:
            atomic_write_bytes(self.pending_path, data, keep_mode=False, temp_suffix=DATA_TEMP_SUFFIX)
            self._pending_saved = True
        except OSError as exc:
            log.error("audit.pending_save_failed", path=str(self.pending_path), error=exc.strerror or str(exc))

    def _drop_pending(self) -> None:
        """The saved counts are in the log now (lock held): remove their file."""
        if not self._pending_saved:
            return
        self._pending_saved = False
        self._next_save = float("-inf")  # the next window's first repeat is saved at once
        try:
            self.pending_path.unlink(missing_ok=True)
        except OSError as exc:
            log.error("audit.pending_remove_failed", path=str(self.pending_path), error=exc.strerror or str(exc))

    def recover(self) -> int:
        """Append the summaries a killed run left pending; returns how many were written.

        Only for the data directory's lock holder, at start. A summary already in the
        log's tail (the run was killed after appending it, before removing the file)
        is skipped; an unreadable file is reported and removed.
        """
        remove_stale_temps(self.pending_path)
        try:
            owed = _read_pending(self.pending_path)
        except FileNotFoundError:
            return 0
        except (OSError, ValueError) as exc:
            log.error("audit.pending_unreadable", path=str(self.pending_path), error=str(exc))
            owed = []
        with self._lock:
            done = _written_summaries(self.path)
            todo = [rec for rec in owed if _summary_id(rec) not in done]
            for rec in todo:
                self._append(rec)
            self._pending_saved = True
            self._drop_pending()
        log.info("audit.recovered", path=str(self.pending_path), summaries=len(todo), skipped=len(owed) - len(todo))
        return len(todo)

    def _roll_window(self) -> None:
        now = self._clock()
        if now >= self._window_end:
            self._write_summaries()
            self._window_end = now + DENIAL_WINDOW_S

    def _write_summaries(self) -> None:
        for rep in self._repeats.values():
            if rep.count:
                self._append(_summary(rep))
        self._repeats.clear()
        self._drop_pending()

    def _append(self, entry: dict[str, Any]) -> None:
        """Write one line (lock held), every value through the secret detector (:func:`scrub`)."""
        fields = {k: _scrub_field(k, entry[k]) for k in FIELDS if entry.get(k) is not None}
        line = (json.dumps(fields, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8", "replace")
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


_OWN_FIELDS = frozenset({"time", "since"})
"""Fields this module writes itself (:func:`_now`'s ISO time): never client text, and never the same twice,
so memoising them would only push the recurring strings out of :func:`_scrubbed`."""


_OWN_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00")  # what _now() writes, and only that


def _scrub_field(name: str, value: Any) -> Any:
    """One record field as written: :func:`scrub`, except a time of :func:`_now`'s exact shape."""
    own = name in _OWN_FIELDS and isinstance(value, str) and _OWN_TIME.fullmatch(value) is not None
    return value if own else scrub(value)


def scrub(value: Any) -> Any:
    """``value`` with every secret in its strings redacted (``[REDACTED:rule]``), as log lines are.

    Records hold what the client sent — a namespace, a path, a section title, a peer id —
    and refusal messages that quote it; any of them may hold a secret, and the audit log is
    kept for months. Numbers and the rest of each string are kept, so the record still says
    who did what.
    """
    if isinstance(value, str):
        return _scrubbed(value) if len(value) <= SCRUB_MEMO_CHARS else privacy.redact(value, "all")
    if isinstance(value, dict):
        return {k: scrub(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v) for v in value]
    return value


SCRUB_MEMO_CHARS = 512
"""Strings up to this long are scrubbed once per process (:func:`_scrubbed`)."""


@functools.lru_cache(maxsize=4096)
def _scrubbed(text: str) -> str:
    """:func:`privacy.redact` of one short string, memoised: the detector costs ~40-70 µs a string, a read
    record holds ~10 of them (the session, the action, the decision, each hit's path) and nearly all of
    them recur from one search to the next, so every search paid ~0.5 ms for answers it already had.
    The detector is a pure function of the text; the memo is bounded (entries and length)."""
    return privacy.redact(text, "all")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _summary(rep: _Repeats) -> dict[str, Any]:
    """The record that says how many refusals of one key a window counted, and since when."""
    fields = {k: v for k, v in rep.rec.items() if k in _SUMMARY_FIELDS}
    return {**fields, "time": rep.last, "count": rep.count, "since": rep.since}


def _summary_id(rec: dict[str, Any]) -> tuple[tuple[str, ...], str]:
    """A summary's key and the start of its window: one key has one summary per window."""
    return _key(rec), str(rec.get("since"))


def _read_pending(path: Path) -> list[dict[str, Any]]:
    """The summaries in a pending file; ValueError when it is not the list of records we write."""
    owed = json.loads(path.read_bytes())
    if not isinstance(owed, list) or not all(isinstance(r, dict) and "count" in r for r in owed):
        raise ValueError("not a list of audit summaries")
    return [{k: v for k, v in r.items() if k in FIELDS} for r in owed]


def _written_summaries(path: Path) -> set[tuple[tuple[str, ...], str]]:
    """The ids of the summaries near the end of the log (where a killed run's last ones would be)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - _RECOVER_TAIL_BYTES))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except FileNotFoundError:
        return set()
    done = set()
    for raw in lines:
        with contextlib.suppress(ValueError):
            rec = json.loads(raw)
            if isinstance(rec, dict) and "count" in rec:
                done.add(_summary_id(rec))
    return done


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
