"""Write-ahead file edits: read, edit, journal, replace, record — the half of a write that touches disk.

:class:`MemoryWriter` (and :class:`~memoryd.indexer.write.editor.MemoryEditor`, the import) decide
*what* an edit is; this class carries it out so that a kill, a concurrent save or a full disk at any
moment leaves every file whole:

* every file write is conditional (:func:`memoryd.indexer.atomic.atomic_write_text` with ``check=True``):
  if the user saved the file between our read and our write, the file is read again and the edit
  re-applied to the new text, up to :data:`MAX_ATTEMPTS` times; the user's edit is never overwritten;
* the file's text before and after and the history records are durable in the journal
  (:mod:`memoryd.indexer.write.journal`) before the file is replaced, and the records are appended to
  the history after it (:data:`STEPS`); a start settles whatever a kill interrupted
  (:mod:`memoryd.indexer.write.recovery`);
* records that cannot be made durable (a full disk) refuse the write: the file is put back.

Files that are not valid UTF-8 are never written. Runs on the index's one writer thread.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from memoryd.indexer.access import resolve_target
from memoryd.indexer.atomic import ConcurrentEditError, atomic_write_text
from memoryd.indexer.errors import BadTarget, DiskFullError, WriteConflict, is_disk_full
from memoryd.indexer.markdown import mdedit
from memoryd.indexer.markdown.memblocks import BlockError
from memoryd.indexer.write import history as hist
from memoryd.indexer.write.journal import JOURNAL_DIR, EditJournal, FileEdit, Intent

log = structlog.get_logger("memoryd.indexer.write.writer")  # the event names' home since before the split

MAX_ATTEMPTS = 5
STEPS = ("journaled", "written", "recorded")
"""The points of a write-ahead edit: intent durable / file replaced / history appended (journal not yet removed)."""
RecordsFn = Callable[[mdedit.Edit, str | None], list[dict[str, Any]]]
"""The history records of one edit, built from the edit and the file's text before it (written ahead)."""


class WriteAheadFiles:
    """Write-ahead edits of the files of ``root``, journaled beside ``history`` (None: no journal, no
    history — a bare writer for tests and tools)."""

    def __init__(self, root: Path, history: hist.History | None, *,
                 before_write: Callable[[Path], None] | None = None,
                 at_step: Callable[[str], None] | None = None) -> None:
        self.root = root
        self.history = history
        self.journal = EditJournal(history.path.parent / JOURNAL_DIR) if history is not None else None
        self._before_write = before_write  # test seam: runs between our read and our write
        self._at_step = at_step or (lambda step: None)  # test seam: each write-ahead step (STEPS), for crash tests

    def _write(self, rel: str, edit_fn: Callable[[Any], mdedit.Edit | None],
               records: RecordsFn | None = None) -> tuple[mdedit.Edit | None, list[dict[str, Any]]]:
        """Read, edit, write conditionally; on a concurrent change, re-read and re-apply.

        Write-ahead (:mod:`memoryd.indexer.write.journal`): the file's text before and after, and the
        history records ``records`` builds, are durable before the file is replaced; the records are
        appended to the history after it. Returns the edit and its records.
        """
        path = resolve_target(self.root, rel)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            text, sha = self._read(path, rel)
            try:
                edit = edit_fn(text)
            except BlockError as exc:
                raise WriteConflict(str(exc)) from None
            if edit is None or edit.text == text:
                return edit, []
            recs = records(edit, text) if records is not None else []
            path.parent.mkdir(parents=True, exist_ok=True)
            intent = Intent.new(self.root, [FileEdit(rel, text, edit.text)], recs)
            if self.journal is not None:
                self.journal.begin(intent)
            self._at_step("journaled")
            if self._before_write is not None:
                self._before_write(path)
            try:
                atomic_write_text(path, edit.text, sha, check=True)
            except ConcurrentEditError:
                if self.journal is not None:
                    self.journal.abandon(intent.id)
                log.info("write.concurrent_edit", path=rel, attempt=attempt, action="re-reading and re-applying")
                continue
            except BaseException as exc:
                if self.journal is not None:  # the rename did not happen: the file is as it was
                    self.journal.abandon(intent.id)
                if isinstance(exc, OSError) and is_disk_full(exc):
                    raise DiskFullError.of(exc, path.parent, rel) from exc
                raise
            self._at_step("written")
            self._commit(intent)
            return edit, recs
        raise WriteConflict(f"{rel} changed during each of {MAX_ATTEMPTS} attempts; nothing was written")

    def _write_all(self, rels: list[str],
                   edit_fn: Callable[[list[str | None]], list[mdedit.Edit | None]]) -> list[mdedit.Edit | None]:
        """Edit several files as one write-ahead edit: ``edit_fn`` gets their texts (None: absent) and
        returns one edit per file (None: leave it). Every new text is in one journal intent before the
        first file is replaced, and the files are replaced in ``rels`` order; a kill between two files
        leaves an intent that :func:`memoryd.indexer.write.recovery.recover` finishes at the next start
        (the files not yet written get their new text), so the edit is all or nothing. Edits carry no
        history records (what is added is undone by ``forget``).

        Conditional like :meth:`_write`: a concurrent change before the first file is replaced re-reads
        all and re-applies; one after it (the first file is written) re-applies the remaining files
        one by one with :meth:`_write`.
        """
        paths = [resolve_target(self.root, r) for r in rels]
        for attempt in range(1, MAX_ATTEMPTS + 1):
            reads = [self._read(p, r) for p, r in zip(paths, rels, strict=True)]
            try:
                edits = edit_fn([t for t, _ in reads])
            except BlockError as exc:
                raise WriteConflict(str(exc)) from None
            todo = [(i, e) for i, e in enumerate(edits) if e is not None and e.text != reads[i][0]]
            if not todo:
                return edits
            intent = Intent.new(self.root, [FileEdit(rels[i], reads[i][0], e.text) for i, e in todo], [])
            if self.journal is not None:
                self.journal.begin(intent)
            self._at_step("journaled")
            done = 0
            try:
                for i, e in todo:
                    paths[i].parent.mkdir(parents=True, exist_ok=True)
                    if self._before_write is not None:
                        self._before_write(paths[i])
                    atomic_write_text(paths[i], e.text, reads[i][1], check=True)
                    done += 1
                    self._at_step("written")
            except ConcurrentEditError:
                if done == 0:
                    if self.journal is not None:
                        self.journal.abandon(intent.id)
                    log.info("write.concurrent_edit", path=rels[todo[0][0]], attempt=attempt,
                             action="re-reading and re-applying")
                    continue
                self._finish_rest(rels, edit_fn, todo[done:])
            except BaseException as exc:
                typed = self._failed_all(exc, intent, done, rels[todo[done][0]])
                if typed is None:
                    raise  # a kill after the first file: the intent stays, the next start finishes the edit
                raise typed from exc
            self._commit(intent)
            return edits
        raise WriteConflict(f"{', '.join(rels)} changed during each of {MAX_ATTEMPTS} attempts; nothing was written")

    def _failed_all(self, exc: BaseException, intent: Intent, done: int, rel: str) -> DiskFullError | None:
        """After a multi-file write failed on ``rel`` with ``done`` files replaced: drop the intent when none
        was; a full disk refuses the whole edit (what was written goes back); the typed error, if any."""
        if done == 0 and self.journal is not None:  # nothing was replaced: the files are as they were
            self.journal.abandon(intent.id)
        if not isinstance(exc, OSError) or not is_disk_full(exc):
            return None
        if done and self.journal is not None:
            return _refused(exc, self.journal.roll_back(intent, self._target), self._target(rel).parent, rel)
        return DiskFullError.of(exc, self._target(rel).parent, rel)

    def _finish_rest(self, rels: list[str], edit_fn: Callable[[list[str | None]], list[mdedit.Edit | None]],
                     rest: list[tuple[int, mdedit.Edit]]) -> None:
        """After a multi-file edit wrote its first file(s), someone changed one of the others: re-apply
        each remaining file's part of the edit to its new text (one journaled edit each)."""
        for i, _ in rest:
            log.info("write.concurrent_edit", path=rels[i], attempt=1, action="re-applying this file's part")

            def part(text: str | None, i: int = i) -> mdedit.Edit | None:
                texts = [self._read(resolve_target(self.root, r), r)[0] for r in rels]
                texts[i] = text
                return edit_fn(texts)[i]

            self._write(rels[i], part)

    def _commit(self, intent: Intent) -> None:
        """The file is written: its records go into the history, then the journal file goes.

        Records that cannot be made durable (a full disk) refuse the write: the file is put back
        (:meth:`EditJournal.roll_back`), so a write answered with an error never changed a file."""
        if self.history is not None:
            try:
                self.history.extend(list(intent.records))
            except (OSError, DiskFullError) as exc:
                if self.journal is None:
                    raise
                where = Path(exc.directory or ".") if isinstance(exc, DiskFullError) else self.history.path.parent
                refused = _refused(exc, self.journal.roll_back(intent, self._target), where, "the write history")
                if refused is None:
                    raise
                raise refused from exc
        self._at_step("recorded")
        if self.journal is not None:
            self.journal.finish(intent.id)

    def _target(self, rel: str) -> Path:
        return resolve_target(self.root, rel)

    @staticmethod
    def _read(path: Path, rel: str) -> tuple[str | None, str | None]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None, None
        try:
            return data.decode("utf-8"), hashlib.sha256(data).hexdigest()
        except UnicodeDecodeError:
            raise BadTarget(f"{rel}: not valid UTF-8; memoryd will not rewrite it") from None


def _refused(exc: BaseException, rolled_back: bool, where: Path, what: str) -> DiskFullError | None:
    """The error a write answers when ``what`` (in ``where``) could not be made durable after a file was
    replaced (``rolled_back``: the files are back as they were, else the next start puts them back);
    None when ``exc`` is not a full disk (then it is raised as it is)."""
    cause = exc.__cause__ if isinstance(exc, DiskFullError) else exc
    if not isinstance(cause, OSError) or not is_disk_full(cause):
        return None
    return DiskFullError.of(cause, where, what, "the edit was rolled back, nothing was changed" if rolled_back
                            else "the edit could not be rolled back yet: the next start puts the file back")
