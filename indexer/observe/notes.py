"""The capture: a conversation's turns, redacted, appended to a dated session note.

Where: ``<namespace folder>/<observe.folder>/YYYY-MM-DD-<session>.md`` under the first root
(``agents/claude-code/sessions/2026-12-02-4f1c….md``), dated by the session's first capture, so
one session is one note however long it runs. The note is an ordinary memory file: indexed,
searchable, readable by the session that owns the namespace. Format::

    # Conversation 2026-12-02 (session 4f1c…)

    **user** · 14:03 UTC
    the turn's text, line by line

    **assistant** · 14:03 UTC
    ...

Secrets are refused **line by line** by the write path's own filter
(:func:`memoryd.indexer.write.privacy.check`): a line it flags becomes ``[line withheld by
memoryd: <rule>]``; when the rest still fails as a whole (a secret split over lines), the turn is
withheld whole. Nothing a secret touched reaches the note, the index or the extraction prompt.

Every append is a write-ahead edit (:class:`~memoryd.indexer.write.ahead.WriteAheadFiles`): a kill
or a concurrent save never leaves a torn note. Retention (``observe.keep_days``, ``observe.max_bytes``)
deletes whole old notes only — never one being written — and records each deletion in the write
history as ``expire`` with the note's text, so ``memoryd undo ID`` puts it back.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import PurePosixPath
from typing import Any

import structlog

from memoryd.indexer.write import history as hist
from memoryd.indexer.write import mdedit, privacy
from memoryd.indexer.write.access import Namespace, namespace_of, resolve_target
from memoryd.indexer.write.refusals import EntryNotFound, WriteConflict
from memoryd.indexer.write.writer import MemoryWriter, Outcome

log = structlog.get_logger("memoryd.observe")

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,39}")
_NOTE = re.compile(r"^(\d{4}-\d{2}-\d{2})-[A-Za-z0-9._-]+\.md$")
WITHHELD_LINE = "[line withheld by memoryd: {rule}]"
WITHHELD_TURN = "[turn withheld by memoryd: {rule}]"
MAX_EXPIRE_KEPT = 1_000_000  # a note longer than this is deleted with its size recorded, not its text


def note_name(session: str) -> str:
    """The session id as a file-name part: itself when short and plain, else a hash of it."""
    if _SAFE_ID.fullmatch(session) and privacy.check(session).passed:
        return session
    return "s" + hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def note_rel(ns: Namespace, folder: str, started: str, session: str) -> str:
    base = f"{folder}/{started}-{note_name(session)}.md"
    return f"{ns.folder}/{base}" if ns.folder else base


def redact_turn(text: str) -> tuple[str, int]:
    """``text`` with every line the secret filter flags withheld; and how many were. A secret the
    lines hide only together (split over lines) withholds the whole turn (the count is then -1)."""
    out, withheld = [], 0
    for line in text.split("\n"):
        verdict = privacy.check(line)
        if verdict.passed:
            out.append(line)
        else:
            out.append(WITHHELD_LINE.format(rule=verdict.rule))
            withheld += 1
    kept = "\n".join(out)
    whole = privacy.check(kept)
    if not whole.passed:
        return WITHHELD_TURN.format(rule=whole.rule), -1
    return kept, withheld


def header(started: str, session: str) -> str:
    return f"# Conversation {started} (session {note_name(session)})\n"


def render(turns: Sequence[tuple[str, str]], now: datetime) -> str:
    """The Markdown appended for ``turns`` (role, redacted text); each turn a paragraph under its speaker."""
    stamp = now.astimezone(UTC).strftime("%H:%M UTC")
    parts = []
    for role, text in turns:
        body = "\n".join(_quoted(line) for line in text.split("\n"))
        parts.append(f"\n**{role}** · {stamp}\n{body}\n")
    return "".join(parts)


def _quoted(line: str) -> str:
    """A turn's line as note text: a line that would read as a heading, a list item the write path edits,
    or a fence opener is indented, so the note's structure stays the note's."""
    stripped = line.lstrip()
    if stripped.startswith(("#", "- ", "* ", "+ ", "```", "~~~", "<!--", "---")) or re.match(r"\d+[.)] ", stripped):
        return "    " + line
    return line


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
            m = _NOTE.match(p.name)
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


def now_utc() -> datetime:
    return datetime.now(UTC)


def folder_of(rel: str) -> str:
    return str(PurePosixPath(rel).parent)
