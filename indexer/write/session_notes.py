"""The capture's writes: append turns to a session note, expire old notes, undo an expiry.

Every append is a write-ahead edit (:class:`~memoryd.indexer.write.ahead.WriteAheadFiles`): a kill
or a concurrent save never leaves a torn note. Retention (``observe.keep_days``, ``observe.max_bytes``)
deletes whole old notes only — never one being written — and records each deletion in the write
history as ``expire`` with the note's text first, so ``memoryd undo ID`` puts it back. Runs on the
index worker (daemon/api/observe.py).
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

import structlog

from memoryd.indexer.access import Namespace, namespace_of, resolve_target
from memoryd.indexer.errors import EntryNotFound, WriteConflict
from memoryd.indexer.markdown import mdedit
from memoryd.indexer.observe.notes import NOTE_NAME, header
from memoryd.indexer.write import history as hist
from memoryd.indexer.write.writer import MemoryWriter, Outcome

log = structlog.get_logger("memoryd.observe")
MAX_EXPIRE_KEPT = 1_000_000  # a note longer than this is deleted with its size recorded, not its text


class SessionNotes(MemoryWriter):
    """The capture's writes: append to a note, expire old notes, undo an expiry. On the index worker."""

    def append_turns(self, rel: str, started: str, session: str, block: str) -> int:
        """Append ``block`` to the note ``rel`` (created with its heading); the 1-based line it starts at."""
        first = [0]

        def edit(text: str | None) -> mdedit.Edit:
            base = text if text is not None else header(started, session)
            if not base.endswith("\n"):
                base += "\n"
            first[0] = base.count("\n") + 2
            return mdedit.Edit(base + block, first[0], "")

        self._write(rel, edit)
        self._reindex(rel)
        return first[0]

    def expired(self, ns: Namespace, folder: str, today: date, keep_days: int, max_bytes: int,
                keep: set[str]) -> list[str]:
        """The notes of ``ns`` retention deletes now: older than ``keep_days``, then the oldest while the
        rest pass ``max_bytes``; never one in ``keep`` (the notes being written)."""
        base = f"{ns.folder}/{folder}" if ns.folder else folder
        where = self.root / base
        notes: list[tuple[str, str, int]] = []
        if not where.is_dir() or where.is_symlink():
            return []
        for p in where.iterdir():
            m = NOTE_NAME.match(p.name)
            if m and not p.is_symlink() and p.is_file():
                notes.append((m.group(1), f"{base}/{p.name}", p.stat().st_size))
        notes.sort()
        out: list[str] = []
        if keep_days:
            cut = (today - timedelta(days=keep_days)).isoformat()
            out = [rel for day, rel, _ in notes if day < cut and rel not in keep]
        if max_bytes:
            total = sum(size for _, rel, size in notes if rel not in out)
            for _, rel, size in notes:
                if total <= max_bytes:
                    break
                if rel in out or rel in keep:
                    continue
                out.append(rel)
                total -= size
        return out

    def expire(self, rel: str, session: dict[str, str] | None, reason: str) -> str | None:
        """Delete the note ``rel`` whole, recorded first (action ``expire``, its text kept for undo);
        the record's id, None when the note was gone already."""
        path = resolve_target(self.root, rel)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        text = data.decode("utf-8", "replace")
        rec = self._rec(hist.EXPIRE, rel, 0, None, None, old=text if len(text) <= MAX_EXPIRE_KEPT else None,
                        session=session, namespace=str(namespace_of(rel)), reason=reason, bytes=len(data))
        if self.history is not None:
            self.history.append(rec)  # durable before the file goes: a kill never loses a note unrecorded
        path.unlink(missing_ok=True)
        self._reindex(rel)
        log.info("observe.note_expired", path=rel, bytes=len(data), reason=reason, history_id=rec["id"])
        return str(rec["id"])


def undo_expire(writer: MemoryWriter, rid: str, rec: dict[str, Any], session: dict[str, str] | None) -> Outcome:
    """Put an expired note back (``memoryd undo ID`` of an ``expire`` record), when its name is free."""
    rel = str(rec.get("path", ""))
    old = rec.get("old")
    if not isinstance(old, str):
        raise WriteConflict(f"{rid}: the note was too long to keep in the history; nothing to restore")

    def edit(text: str | None) -> mdedit.Edit:
        if text is not None:
            raise WriteConflict(f"{rid}: {rel} exists again; nothing changed, the record is kept")
        return mdedit.Edit(old, 1, "")

    ns = str(namespace_of(rel))
    done, recs = writer._write(rel, edit, lambda e, before: [writer._rec(
        hist.UNDO, rel, 1, before, None, session=session, namespace=ns, undoes=rid, undone_action=hist.EXPIRE)])
    if done is None:
        raise EntryNotFound(f"{rid}: nothing to restore")
    hid = str(recs[0]["id"]) if recs else None
    log.info("write.undone", history_id=rid, action=hist.EXPIRE, path=rel, undo_id=hid)
    return Outcome("restored", f"undid expire {rid}", rel, 1, ns, history_id=hid)
