"""The write history: every replace, forget, reinforce and undo, with the text it touched.

A replace used to leave the replaced text only in that one response; a
reinforcement of a file without front matter left no trace at all. Each of
those now appends one JSON line to ``history.jsonl`` in the data dir — never
under a memory root, so it is never indexed or searched — with what is needed
to put things back (``memoryd undo ID``):

======  =====================================================================
field   meaning
======  =====================================================================
id      ``h-`` + 16 hex characters, random (not guessable from the time)
time    ISO 8601 UTC seconds
action  ``replace`` | ``forget`` | ``reinforce`` | ``undo`` | ``clear`` | ``section``
root    the memory root the path is relative to
path    the file, relative to ``root``
line    1-based line of the entry after the action (forget: where it was)
lines   how many lines the old entry spanned (item plus continuation lines)
old     the entry's text before (replace, forget, reinforce: the entry kept)
new     the text after (replace: the new entry; reinforce: the memory *not* written)
block   the old entry's exact lines, to restore them byte for byte
session who asked (``{"kind": "owner"}`` …), namespace, reason, score
undoes  (``undo`` only) the id it reverted
entries (``clear`` only) the ids of its ``forget`` records, one per entry removed
section (``section`` only) the section's title; ``new_block`` the body written
======  =====================================================================

The file is created 0600 whatever the umask (``os.open`` with mode 0o600, then
``fchmod``) and kept under :data:`MAX_BYTES`: when an append passes it, the
oldest entries are dropped until half is left (rewritten through a 0600
temporary file and an atomic rename). One writer appends (the index worker);
readers skip a torn last line. No threads here: the daemon serialises writes.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memoryd.indexer.atomic import DATA_TEMP_SUFFIX, atomic_write_bytes

HISTORY_NAME = "history.jsonl"
MAX_BYTES = 4 * 1024 * 1024
MAX_BLOCK_CHARS = 64 * 1024  # an entry longer than this is recorded, but not restorable
REPLACE, FORGET, REINFORCE, UNDO = "replace", "forget", "reinforce", "undo"
CLEAR, SECTION = "clear", "section"  # memoryd.indexer.write.editor: a namespace emptied, a section body replaced
ACTIONS = (REPLACE, FORGET, REINFORCE, UNDO, CLEAR, SECTION)
_FILE_MODE = 0o600


def new_id() -> str:
    return "h-" + secrets.token_hex(8)


def entry(action: str, root: Path, path: str, line: int, *, old: str | None = None, new: str | None = None,
          block: list[str] | None = None, session: dict[str, str] | None = None, now: datetime | None = None,
          **extra: Any) -> dict[str, Any]:
    """A history record (see the module docstring); ``extra`` adds namespace, reason, score, undoes."""
    if action not in ACTIONS:
        raise ValueError(f"history action must be one of {ACTIONS}, got {action!r}")
    rec: dict[str, Any] = {"id": new_id(), "time": (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                           "action": action, "root": str(root), "path": path, "line": line}
    if block is not None:
        rec["lines"] = len(block)
        if sum(len(b) for b in block) <= MAX_BLOCK_CHARS:
            rec["block"] = block
    rec.update({k: v for k, v in (("old", old), ("new", new), ("session", session)) if v is not None})
    rec.update({k: v for k, v in extra.items() if v is not None})
    return rec


@dataclass(frozen=True)
class History:
    """The history file at ``path``, bounded to ``max_bytes``."""

    path: Path
    max_bytes: int = MAX_BYTES

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> History:
        return cls(data_dir / HISTORY_NAME)

    def append(self, rec: dict[str, Any]) -> dict[str, Any]:
        """Append one record (a line of JSON); trims the oldest records past ``max_bytes``. Returns ``rec``."""
        line = (json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, _FILE_MODE)
        try:
            os.fchmod(fd, _FILE_MODE)
            _write_all(fd, line)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > self.max_bytes:
            self._trim()
        return rec

    def records(self) -> Iterator[dict[str, Any]]:
        """Every readable record, oldest first (a torn or foreign line is skipped)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        for raw in data.splitlines():
            with contextlib.suppress(ValueError):
                rec = json.loads(raw)
                if isinstance(rec, dict) and isinstance(rec.get("id"), str):
                    yield rec

    def recent(self, path: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """The newest ``limit`` records, newest first, for ``path`` (a file, or a folder and what is under it).

        Each record that was undone carries ``undone_by`` (the undo's id).
        """
        recs = list(self.records())
        undone = {r["undoes"]: r["id"] for r in recs if r.get("action") == UNDO and r.get("undoes")}
        out = []
        for r in reversed(recs):
            if path is not None and not _under(str(r.get("path", "")), path):
                continue
            out.append({**r, "undone_by": undone[r["id"]]} if r["id"] in undone else r)
            if len(out) >= limit:
                break
        return out

    def find(self, rid: str) -> dict[str, Any] | None:
        """The record with id ``rid`` (with ``undone_by`` if an undo reverted it), or None."""
        found, undone_by = None, None
        for r in self.records():
            if r["id"] == rid:
                found = r
            elif r.get("action") == UNDO and r.get("undoes") == rid:
                undone_by = r["id"]
        if found is not None and undone_by is not None:
            return {**found, "undone_by": undone_by}
        return found

    def _trim(self) -> None:
        """Keep the newest records that fit in half of ``max_bytes`` (0600 temp file, atomic rename)."""
        lines = self.path.read_bytes().splitlines(keepends=True)
        keep: list[bytes] = []
        total = 0
        for raw in reversed(lines):
            if total + len(raw) > self.max_bytes // 2:
                break
            keep.append(raw)
            total += len(raw)
        atomic_write_bytes(self.path, b"".join(reversed(keep)), keep_mode=False, new_mode=_FILE_MODE,
                           temp_suffix=DATA_TEMP_SUFFIX)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _under(path: str, want: str) -> bool:
    want = want.strip("/")
    return not want or path == want or path.startswith(want + "/")
