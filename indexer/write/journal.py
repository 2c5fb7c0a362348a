"""Write-ahead records for file edits: the old bytes are on disk before a memory file changes.

Every edit of a memory file (:class:`~memoryd.indexer.write.writer.MemoryWriter`)
runs in three steps:

1. :meth:`EditJournal.begin` writes ``journal/<id>.json`` in the data dir —
   the file's exact text before and after the edit, their sha256, and the
   history records the edit will add — through a 0600 temp file, fsync and an
   atomic rename (then the folder is fsynced);
2. the memory file is replaced atomically (:mod:`memoryd.indexer.atomic`);
3. the history records are appended (fsynced) and the journal file removed
   (:meth:`EditJournal.finish`).

A kill at any instant therefore leaves, for every edit under way, either the
journal file or the history records, and the memory file either old or new.
:func:`memoryd.indexer.write.recovery.recover` (run at start, under the data-dir lock, before
anything is indexed) settles each journal file left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from memoryd.indexer.atomic import (
    DATA_TEMP_SUFFIX,
    ConcurrentEditError,
    atomic_write_bytes,
    current_sha256,
    fsync_dir,
)
from memoryd.indexer.errors import BadTarget, DiskFullError, is_disk_full
from memoryd.indexer.markdown.patch import sha256_text

log = structlog.get_logger(__name__)

JOURNAL_DIR = "journal"
_MODE = 0o600


@dataclass(frozen=True)
class FileEdit:
    """One memory file's text before (None: it did not exist) and after an edit; ``rel`` is root-relative."""

    rel: str
    before: str | None
    after: str

    def to_json(self) -> dict[str, Any]:
        return {"rel": self.rel, "before": self.before, "after": self.after,
                "before_sha": None if self.before is None else sha256_text(self.before),
                "after_sha": sha256_text(self.after)}


@dataclass(frozen=True)
class Intent:
    """What one edit is about to do: its files, and the history records it adds once done."""

    id: str
    root: str
    files: tuple[FileEdit, ...]
    records: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    @staticmethod
    def new(root: Path, files: list[FileEdit], records: list[dict[str, Any]]) -> Intent:
        return Intent("j-" + secrets.token_hex(8), str(root), tuple(files), tuple(records))

    def to_bytes(self) -> bytes:
        body = {"id": self.id, "root": self.root, "files": [f.to_json() for f in self.files],
                "records": list(self.records)}
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> Intent:
        """Parse a journal file, checking every type; raises :class:`DamagedJournal` saying what is wrong."""
        try:
            raw = json.loads(data)
        except RecursionError:
            raise DamagedJournal("nested too deep") from None
        except ValueError as exc:
            raise DamagedJournal(f"not JSON ({exc})") from None
        if not isinstance(raw, dict):
            raise DamagedJournal(f"not an object but {type(raw).__name__}")
        iid, root, files, recs = raw.get("id"), raw.get("root"), raw.get("files"), raw.get("records") or []
        if not isinstance(iid, str) or not _INTENT_ID.fullmatch(iid):
            raise DamagedJournal("no valid intent id")
        if not _text(root) or not isinstance(files, list) or not files or not isinstance(recs, list):
            raise DamagedJournal("root, files or records missing or of the wrong type")
        out = []
        for f in files:
            if not isinstance(f, dict) or not _text(f.get("rel")) or not _text(f.get("after"), empty=True) \
                    or not (f.get("before") is None or _text(f.get("before"), empty=True)):
                raise DamagedJournal("a file edit is not {rel, before, after} strings")
            out.append(FileEdit(f["rel"], f["before"], f["after"]))
        if not all(isinstance(r, dict) and isinstance(r.get("id"), str) and _depth(r) <= _MAX_DEPTH for r in recs):
            raise DamagedJournal("a history record is not an object with an id (or is nested too deep)")
        return cls(iid, str(root), tuple(out), tuple(recs))


class DamagedJournal(ValueError):
    """A journal file that is not an intent memoryd wrote; the message says what is wrong with it."""


_INTENT_ID = re.compile(r"j-[0-9a-f]{16}")
_MAX_DEPTH = 32  # a record memoryd writes is 4 deep (patch → hunks → hunk → lines)


def _text(value: Any, *, empty: bool = False) -> bool:
    """A string fit for a path or a file's text: no NUL (no memory file holds one), non-empty unless allowed."""
    return isinstance(value, str) and "\x00" not in value and (empty or bool(value))


def _depth(value: Any) -> int:
    """How deep ``value`` nests (iterative: a hostile file cannot exhaust the stack here)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        deepest = max(deepest, d)
        if d > _MAX_DEPTH:
            break
        if isinstance(v, dict):
            todo += [(x, d + 1) for x in v.values()]
        elif isinstance(v, list):
            todo += [(x, d + 1) for x in v]
    return deepest


@dataclass(frozen=True)
class Pending:
    """A journal file left behind: its intent (None: damaged, ``reason`` says why), and whether its write was
    refused (``<id>.rollback``: put the file back, record nothing)."""

    path: Path
    intent: Intent | None
    reason: str = ""
    refused: bool = False


@dataclass(frozen=True)
class EditJournal:
    """The ``journal/`` folder of a data dir (0700; its files 0600, never indexed, never logged)."""

    folder: Path

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> EditJournal:
        return cls(data_dir / JOURNAL_DIR)

    def begin(self, intent: Intent) -> None:
        """Make ``intent`` durable before any file it names is touched; raises
        :class:`~memoryd.indexer.errors.DiskFullError` (nothing changed) or OSError."""
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            atomic_write_bytes(self._path(intent.id), intent.to_bytes(), keep_mode=False, new_mode=_MODE,
                               temp_suffix=DATA_TEMP_SUFFIX)
        except OSError as exc:
            if is_disk_full(exc):
                raise DiskFullError.of(exc, self.folder, "the edit's journal file") from exc
            raise

    def finish(self, intent_id: str) -> None:
        """The edit and its history records are on disk: the journal file is no longer needed."""
        with contextlib.suppress(FileNotFoundError):
            self._path(intent_id).unlink()

    def abandon(self, intent_id: str) -> None:
        """The edit did not happen (a concurrent change was found before the rename): forget the intent."""
        self.finish(intent_id)

    def refuse(self, intent_id: str) -> bool:
        """The write was refused after its file was replaced, and the file could not be put back yet: mark
        the intent ``<id>.rollback`` so that :func:`recover` puts the file back (a rename: it needs no
        room on a full disk). False when even that failed (then recover completes the edit instead)."""
        try:
            os.replace(self._path(intent_id), self.folder / f"{intent_id}{_ROLLBACK}")
        except OSError as exc:
            log.error("write.rollback_unmarked", intent=intent_id, error=str(exc),
                      action="the next start completes this edit instead of rolling it back")
            return False
        fsync_dir(self.folder)
        return True

    def roll_back(self, intent: Intent, resolve: Callable[[str], Path]) -> bool:
        """The write of ``intent`` is refused after its file(s) were replaced (the history could not be
        made durable): put the text before back wherever the file still holds what the edit wrote. True:
        all is back and the intent is dropped; False: the intent is marked (:meth:`refuse`) and the next
        start puts the rest back."""
        back = True
        for f in reversed(intent.files):
            try:
                back = bool(put_text(resolve(f.rel), f.before, f.after)) and back
            except BadTarget:
                back = False
        if back:
            self.abandon(intent.id)
        else:
            self.refuse(intent.id)
        log.warning("write.rolled_back", intent=intent.id, files=[f.rel for f in intent.files], complete=back)
        return back

    def pending(self) -> Iterator[Pending]:
        """Every journal file left behind, oldest first, with its intent (None: damaged)."""
        if not self.folder.is_dir():
            return
        found = [*self.folder.glob("j-*.json"), *self.folder.glob(f"j-*{_ROLLBACK}")]
        for p in sorted(found, key=lambda p: (_mtime(p), p.name)):
            refused = p.name.endswith(_ROLLBACK)
            try:
                intent = Intent.from_bytes(p.read_bytes())
            except DamagedJournal as exc:
                yield Pending(p, None, str(exc), refused)
                continue
            except OSError as exc:
                yield Pending(p, None, f"cannot be read ({exc.strerror})", refused)
                continue
            if p.name != f"{intent.id}{_ROLLBACK if refused else '.json'}":
                yield Pending(p, None, f"its id {intent.id} is not its name", refused)
                continue
            yield Pending(p, intent, refused=refused)

    def remove_temps(self) -> list[Path]:
        """Delete the temp files killed :meth:`begin` calls left (each a full copy of a memory file); only at
        start, under the data-dir lock (no begin is under way)."""
        gone = []
        with contextlib.suppress(OSError):
            for tmp in self.folder.glob(f".j-*{DATA_TEMP_SUFFIX}"):
                with contextlib.suppress(OSError):
                    tmp.unlink()
                    gone.append(tmp)
                    log.info("journal.temp_removed", path=str(tmp), why="left by a write killed while journaling")
        return gone

    def _path(self, intent_id: str) -> Path:
        return self.folder / f"{intent_id}.json"


_ROLLBACK = ".rollback"


def _mtime(p: Path) -> int:
    try:
        return p.stat().st_mtime_ns
    except OSError:
        return 0


def put_text(target: Path, text: str | None, expected: str | None) -> bool:
    """Make ``target`` hold ``text`` (None: absent) where it holds ``expected`` now; False when it could not
    (logged; the file is left as it is)."""
    try:
        now = current_sha256(target)
        if now == (None if text is None else sha256_text(text)):
            return True
        if now != (None if expected is None else sha256_text(expected)):
            return False
        if text is None:
            target.unlink()
            return True
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, text.encode("utf-8"), now, check=True)
        return True
    except (OSError, ConcurrentEditError) as exc:
        log.warning("journal.recovery_write_failed", path=str(target), error=str(exc), action="left as it is")
        return False
