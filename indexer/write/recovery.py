"""Settling the journal at start: each edit a kill (or a refused write) left behind is finished, never
started, rolled back or kept as the user left it — and recorded only when the file shows it.

:func:`recover` runs at start, under the data-dir lock, before anything is
indexed, and settles each journal file left behind. It records an edit only when
it can see it in the file — a record of an edit that did not happen would
make ``history`` offer an undo that writes a second copy, and an undo's record
without the undo would mark the entry restored while it is in no file:

=====================  =========================================================
the file is now        what recover does
=====================  =========================================================
what the edit wrote    the edit happened: its history records are appended (once:
                       ids already in the history are skipped)
what it was before     the edit never reached the file: nothing to keep (a
                       multi-file edit whose other files were written is finished:
                       this file gets the text the edit meant for it)
edited by hand, the    the edit happened and the user edited the file since (the
edit's lines in place  daemon was down): its records are appended, the file is
                       not touched (:meth:`~memoryd.indexer.markdown.patch.Patch.written_in`)
anything else, gone,   neither can be told: the file stays as the user left it,
outside every root     no record is appended, and the journal file is set aside
                       as ``<id>.kept`` (it holds the text before and after) and
                       named in the log (``journal.recovery_kept``)
=====================  =========================================================

A write that was *refused* after its file was replaced (the history could not
be made durable: a full disk) and whose file could not be put back at once is
marked ``<id>.rollback``: recover puts the text before back where the file is
still what the edit wrote, and appends no record — a refused write never takes
effect later.

Paths are resolved like every write (the caller's ``resolve``: the served roots
and :func:`~memoryd.indexer.access.resolve_target`); a journal file that
names anything else, or that cannot be parsed as an intent (torn by a disk full,
not an object, a NUL in a path, nested too deep, an id that is not its name) is
moved aside as ``*.bad``, never deleted, named in the log with the reason
(``write.journal_unreadable``), and never stops the start. Temp files a killed
:meth:`~memoryd.indexer.write.journal.EditJournal.begin` left (a full copy of a memory file) are removed.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import structlog

from memoryd.indexer.atomic import fsync_dir
from memoryd.indexer.errors import BadTarget
from memoryd.indexer.markdown.patch import Patch
from memoryd.indexer.write.journal import EditJournal, FileEdit, Intent, put_text

log = structlog.get_logger(__name__)

Resolve = Callable[[str, str], Path | None]
"""(root, rel) -> the file, or None when that root is not served; raises
:class:`~memoryd.indexer.errors.BadTarget` for a path no write may take (as the writer's)."""
AppendRecords = Callable[[list[dict[str, Any]]], None]  # appends records whose ids are not yet in the history
OUTCOMES = ("completed", "finished", "edited", "not_started", "rolled_back", "kept", "unreadable")
_RECORDED = frozenset({"completed", "finished", "edited"})


def recover(journal: EditJournal, resolve: Resolve, append: AppendRecords) -> dict[str, int]:
    """Settle every edit a kill interrupted (see the module docstring); counts per outcome (:data:`OUTCOMES`).

    A damaged journal file, or one naming a path no write may take, is set aside and counted
    ``unreadable``; nothing in a journal file stops the start (a full disk appending records does:
    the journal file stays, and the next start settles it again)."""
    counts = dict.fromkeys(OUTCOMES, 0)
    journal.remove_temps()
    for p in journal.pending():
        if p.intent is None:
            _set_aside(p.path, ".bad", p.reason)
            counts["unreadable"] += 1
            continue
        intent = p.intent
        try:
            targets = [resolve(intent.root, f.rel) for f in intent.files]
            outcome = _settle(intent, targets, p.refused)
        except BadTarget as exc:
            _set_aside(p.path, ".bad", f"names a path no write may take: {exc}")
            counts["unreadable"] += 1
            continue
        except (ValueError, OSError) as exc:  # whatever else a hostile file finds: set aside, start anyway
            _set_aside(p.path, ".bad", f"cannot be settled: {type(exc).__name__}: {exc}")
            counts["unreadable"] += 1
            continue
        if outcome in _RECORDED:
            append(list(intent.records))
        log.info("write.recovered", intent=intent.id, outcome=outcome, files=[f.rel for f in intent.files],
                 records=len(intent.records) if outcome in _RECORDED else 0)
        counts[outcome] += 1
        if outcome == "kept":
            kept = _set_aside(p.path, ".kept", "")
            log.warning("journal.recovery_kept", intent=intent.id, files=[str(t) for t in targets],
                        rels=[f.rel for f in intent.files], kept_as=str(kept), records_dropped=len(intent.records),
                        action="the files were changed by hand (or are gone) since the edit was journaled: "
                               "left as they are, no history record added; the text before and after is in kept_as")
        else:
            with contextlib.suppress(FileNotFoundError):
                p.path.unlink()
    return counts


def _settle(intent: Intent, targets: list[Path | None], refused: bool) -> str:
    states = [_state(t, f) for t, f in zip(targets, intent.files, strict=True)]
    if refused:  # the client was told nothing changed: put back what the edit wrote
        for t, f, s in zip(targets, intent.files, states, strict=True):
            if s == "after" and t is not None:
                put_text(t, f.before, f.after)
        return "kept" if "other" in states else "rolled_back"
    if all(s == "after" for s in states):
        return "completed"
    if all(s == "before" for s in states):
        return "not_started"
    if "other" not in states:  # a multi-file edit cut half-way: finish it where the file is still as it was
        for t, f, s in zip(targets, intent.files, states, strict=True):
            if s == "before" and t is not None:
                put_text(t, f.after, f.before)
        return "finished"
    if all(s == "after" or (s == "other" and _seen(t, f)) for t, f, s in zip(targets, intent.files, states,
                                                                             strict=True)):
        return "edited"
    return "kept"


def _seen(path: Path | None, f: FileEdit) -> bool:
    """Whether the file, edited since, still shows the edit (its lines in place, the old ones gone)."""
    if path is None:
        return False
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return Patch.between(f.before or "", f.after).written_in(text)


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


def _set_aside(path: Path, suffix: str, reason: str) -> Path:
    """Rename a journal file ``<id>.<suffix>`` (never deleted: it holds the texts); the unreadable are logged."""
    aside = path.with_name(path.name.split(".", 1)[0] + suffix)
    try:
        os.replace(path, aside)
        fsync_dir(path.parent)
    except OSError as exc:
        log.error("write.journal_set_aside_failed", path=str(path), error=str(exc))
        return path
    if suffix == ".bad":
        log.warning("write.journal_unreadable", path=str(aside), reason=reason,
                    action="kept aside; the memory files were not touched")
    return aside
