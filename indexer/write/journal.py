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
:func:`recover` (run at start, under the data-dir lock, before anything is
indexed) settles each journal file left behind:

===================  ===========================================================
the file is now      what recover does
===================  ===========================================================
what the edit wrote  the edit happened: its history records are appended (once:
                     ids already in the history are skipped)
what it was before   the edit never reached the file: nothing to keep (a
                     multi-file edit whose other files were written is finished:
                     this file gets the text the edit meant for it)
anything else        someone edited it since (the daemon was down): the records
                     are kept, so the old bytes stay restorable; the file is not
                     touched
gone                 as "anything else"
===================  ===========================================================

Then the journal file is removed. A journal file that cannot be read (torn by
a disk full, say) is moved aside as ``*.bad``, never deleted, and named in the log.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from memoryd.indexer.atomic import DATA_TEMP_SUFFIX, ConcurrentEditError, atomic_write_bytes, fsync_dir
from memoryd.indexer.write.patch import sha256_text

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
        raw = json.loads(data)
        files = tuple(FileEdit(str(f["rel"]), f["before"], str(f["after"])) for f in raw["files"])
        return cls(str(raw["id"]), str(raw["root"]), files, tuple(raw.get("records") or ()))


@dataclass(frozen=True)
class EditJournal:
    """The ``journal/`` folder of a data dir (0700; its files 0600, never indexed, never logged)."""

    folder: Path

    @classmethod
    def in_data_dir(cls, data_dir: Path) -> EditJournal:
        return cls(data_dir / JOURNAL_DIR)

    def begin(self, intent: Intent) -> None:
        """Make ``intent`` durable before any file it names is touched (raises OSError, disk full included)."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write_bytes(self._path(intent.id), intent.to_bytes(), keep_mode=False, new_mode=_MODE,
                           temp_suffix=DATA_TEMP_SUFFIX)

    def finish(self, intent_id: str) -> None:
        """The edit and its history records are on disk: the journal file is no longer needed."""
        with contextlib.suppress(FileNotFoundError):
            self._path(intent_id).unlink()

    def abandon(self, intent_id: str) -> None:
        """The edit did not happen (a concurrent change was found before the rename): forget the intent."""
        self.finish(intent_id)

    def pending(self) -> Iterator[tuple[Path, Intent | None]]:
        """Every journal file left behind, oldest first, with its intent (None: unreadable)."""
        if not self.folder.is_dir():
            return
        paths = sorted(self.folder.glob("j-*.json"), key=lambda p: (p.stat().st_mtime_ns, p.name))
        for p in paths:
            try:
                yield p, Intent.from_bytes(p.read_bytes())
            except (OSError, ValueError, KeyError, TypeError):
                yield p, None

    def _path(self, intent_id: str) -> Path:
        return self.folder / f"{intent_id}.json"


Resolve = Callable[[str, str], Path | None]  # (root, rel) -> the file, or None when that root is not served
AppendRecords = Callable[[list[dict[str, Any]]], None]  # appends records whose ids are not yet in the history


def recover(journal: EditJournal, resolve: Resolve, append: AppendRecords) -> dict[str, int]:
    """Settle every edit a kill interrupted (see the module docstring); counts per outcome."""
    counts = {"completed": 0, "finished": 0, "not_started": 0, "kept": 0, "unreadable": 0}
    for path, intent in journal.pending():
        if intent is None:
            _set_aside(path)
            counts["unreadable"] += 1
            continue
        outcome = _settle(intent, resolve)
        if outcome != "not_started":
            append(list(intent.records))
        log.info("write.recovered", intent=intent.id, outcome=outcome, files=[f.rel for f in intent.files],
                 records=len(intent.records))
        counts[outcome] += 1
        journal.finish(intent.id)
    return counts


def _settle(intent: Intent, resolve: Resolve) -> str:
    states = [_state(resolve(intent.root, f.rel), f) for f in intent.files]
    if all(s == "after" for s in states):
        return "completed"
    if all(s == "before" for s in states):
        return "not_started"
    if "after" in states:  # a multi-file edit cut half-way: finish it where the file is still as it was
        for f, s in zip(intent.files, states, strict=True):
            target = resolve(intent.root, f.rel)
            if s == "before" and target is not None:
                with contextlib.suppress(OSError, ConcurrentEditError):
                    target.parent.mkdir(parents=True, exist_ok=True)
                    atomic_write_bytes(target, f.after.encode("utf-8"),
                                       None if f.before is None else sha256_text(f.before), check=True)
        return "finished"
    return "kept"


def _state(path: Path | None, f: FileEdit) -> str:
    """``after`` | ``before`` | ``other`` for one file of an intent."""
    if path is None:
        return "other"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return "before" if f.before is None else "other"
    except OSError:
        return "other"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return "other"
    if text == f.after:
        return "after"
    return "before" if text == f.before else "other"


def _set_aside(path: Path) -> None:
    bad = path.with_suffix(".bad")
    with contextlib.suppress(OSError):
        os.replace(path, bad)
        fsync_dir(path.parent)
    log.warning("write.journal_unreadable", path=str(bad), action="kept aside; the memory files were not touched")
