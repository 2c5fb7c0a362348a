"""The write audit log: one JSON line per write request, allowed or denied (seed 003).

``<data_dir>/audit.jsonl``, mode 0600, append-only: a record is one
``O_APPEND`` write, so lines never interleave. When the file would grow past
``max_bytes`` it is rotated (``audit.jsonl`` → ``.1`` → … → ``.backups``, the
oldest dropped). Records name who (uid, session), what (action, namespace,
path, line, bytes) and the outcome (decision, reason, rule, error code) —
never the content: a rejected secret must not reach the disk here either.

A failure to write the log is logged and does not fail the request (the
write itself already happened or was refused).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog

from daemon.jsonrpc import RpcError

log = structlog.get_logger(__name__)

FIELDS = ("time", "uid", "pid", "session", "action", "namespace", "path", "line", "bytes", "decision", "reason",
          "rule", "code")


class AuditLog:
    def __init__(self, path: Path, max_bytes: int, backups: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock = threading.Lock()

    def record(self, **fields: Any) -> None:
        """Append one record (``time`` is added; unknown field names are refused: nothing slips in)."""
        unknown = set(fields) - set(FIELDS)
        if unknown:
            raise ValueError(f"audit: unknown field(s) {sorted(unknown)}")
        entry = {"time": datetime.now(UTC).isoformat(timespec="milliseconds"), **fields}
        line = (json.dumps({k: entry[k] for k in FIELDS if entry.get(k) is not None}, ensure_ascii=False,
                           separators=(",", ":")) + "\n").encode("utf-8", "replace")
        with self._lock:
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
