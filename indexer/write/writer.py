"""The back half of ``remember`` and ``forget``: embed → dedup → edit the file → re-index it.

:class:`MemoryWriter` must run on the index's one writer thread (the daemon's
``IndexWorker``), so a write never races indexing; the edited file is
re-indexed before the call returns, so the next search sees it.

Every file write is conditional (:func:`memoryd.indexer.atomic.atomic_write_text` with
``check=True``): if the user saved the file between our read and our write,
the file is read again and the edit re-applied to the new text — entries are
found again by their text — up to :data:`MAX_ATTEMPTS` times; the user's edit is
never overwritten. Files that are not valid UTF-8 are never written.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import structlog

from memoryd.indexer.atomic import ConcurrentEditError, atomic_write_text
from memoryd.indexer.bank import highlights
from memoryd.indexer.config import WriteConfig
from memoryd.indexer.memblocks import BlockError
from memoryd.indexer.write import history as hist
from memoryd.indexer.write import mdedit, privacy
from memoryd.indexer.write.access import namespace_of, resolve_target
from memoryd.indexer.write.candidates import gather
from memoryd.indexer.write.dedup import APPEND, POSSIBLE_UPDATE, REINFORCE, REPLACE, Thresholds, Verdict, decide
from memoryd.indexer.write.intake import Accepted
from memoryd.indexer.write.refusals import BadTarget, EntryNotFound, WriteConflict

if TYPE_CHECKING:
    from memoryd.indexer.engine import MemoryIndex

log = structlog.get_logger(__name__)

MAX_ATTEMPTS = 5
Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Outcome:
    """What a write did. ``decision``: appended | reinforced | replaced | removed."""

    decision: str
    reason: str
    path: str  # relative to the first root
    line: int  # 1-based line of the entry now (removed: where it was)
    namespace: str
    score: float | None = None
    previous: str | None = None  # the entry replaced or removed
    reinforcement: int | None = None  # the entry's count after a reinforcement (kept in its marker)
    related: dict[str, Any] | None = None  # appended, but it may update or restate this entry (flag, path, line, text)
    history_id: str | None = None  # the history record of a replace, reinforce, removal or restore (undo ID)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


class MemoryWriter:
    """Executes plans against the files of ``root`` (the first memory root) and ``index``."""

    def __init__(self, index: MemoryIndex, root: Path, cfg: WriteConfig, *, clock: Clock | None = None,
                 before_write: Callable[[Path], None] | None = None, history: hist.History | None = None) -> None:
        self.index = index
        self.root = root
        self.cfg = cfg
        self.history = history
        self.thresholds = Thresholds.from_config(cfg)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._before_write = before_write  # test seam: runs between our read and our write

    def remember(self, plan: Accepted, session: dict[str, str] | None = None) -> Outcome:
        verdict = decide(plan.content, gather(self.index, self.root, plan, self.cfg), self.thresholds)
        outcome = self._execute(plan, verdict, session)
        self._reindex(outcome.path)
        log.info("write.remembered", decision=outcome.decision, path=outcome.path, line=outcome.line,
                 namespace=outcome.namespace, score=outcome.score, history_id=outcome.history_id,
                 flag=outcome.related["flag"] if outcome.related else None)
        return outcome

    def forget(self, rel: str, line: int, expect: str | None = None, session: dict[str, str] | None = None) -> Outcome:
        """Remove the entry on 1-based ``line`` of ``rel``. Raises EntryNotFound, BadTarget, WriteConflict."""
        path = resolve_target(self.root, rel)
        if not path.is_file():
            raise EntryNotFound(f"{rel}: no such memory file")
        edit = self._write(rel, lambda text: mdedit.remove(text, line, expect, self._clock(), rel))
        if edit is None:
            what = "with that text " if expect is not None else ""
            raise EntryNotFound(f"{rel}:{line}: no memory entry {what}on that line (list items outside USER blocks)")
        hid = self._record(hist.FORGET, rel, edit.line, old=edit.previous, block=list(edit.block), session=session,
                           namespace=str(namespace_of(rel)))
        self._reindex(rel)
        log.info("write.forgotten", path=rel, line=line, history_id=hid)
        return Outcome("removed", "entry removed", rel, edit.line, str(namespace_of(rel)), previous=edit.previous,
                       history_id=hid)

    def undo(self, rid: str, session: dict[str, str] | None = None) -> Outcome:
        """Revert history record ``rid``: a replace puts the old entry back in place of the new one (the new
        text stays in the history), a forget puts the removed entry back, a reinforce writes the memory that
        was absorbed. Recorded as an ``undo``; a record is undone at most once, and an undo is not undoable.
        Raises EntryNotFound (no such id), WriteConflict (already undone, not restorable), BadTarget."""
        if self.history is None:
            raise EntryNotFound(f"{rid[:40]!r}: no write history is kept")
        rec = self.history.find(rid)
        if rec is None:
            raise EntryNotFound(f"{rid[:40]!r}: no such history entry")
        if rec.get("undone_by"):
            raise WriteConflict(f"{rid} was already undone by {rec['undone_by']}; nothing changed")
        action, rel, line = rec.get("action"), str(rec.get("path", "")), int(rec.get("line", 1))
        if action == hist.UNDO:
            raise WriteConflict(f"{rid} is an undo; an undo cannot be undone (nothing changed)")
        if rec.get("root") != str(self.root):
            raise BadTarget(f"{rid}: recorded for root {rec.get('root')!r}, not the first memory root")
        block = rec.get("block")
        if rec.get("redacted"):
            raise WriteConflict(f"{rid}: the entry held a secret, so the history kept it redacted; nothing to restore")
        if action in (hist.REPLACE, hist.FORGET) and not isinstance(block, list):
            raise WriteConflict(f"{rid}: the old entry was too long to keep; it is in the history, restore it by hand")
        now = self._clock()
        if action == hist.REPLACE:
            assert isinstance(block, list)
            new = str(rec.get("new", ""))
            edit = self._write(rel, lambda t: (mdedit.revert(t, new, line, block, now, rel) if t is not None
                                               else None) or mdedit.restore(t, line, block, now, rel))
        elif action == hist.FORGET:
            assert isinstance(block, list)
            edit = self._write(rel, lambda t: mdedit.restore(t, line, block, now, rel))
        else:
            old, new = str(rec.get("old", "")), str(rec.get("new", ""))
            edit = self._write(rel, lambda t: mdedit.insert_after(t, old, line, new, now, rel))
        assert edit is not None
        ns = str(namespace_of(rel))
        hid = self._record(hist.UNDO, rel, edit.line, old=edit.previous, new=edit.entry, block=list(edit.block) or None,
                           session=session, namespace=ns, undoes=rid, undone_action=action)
        self._reindex(rel)
        log.info("write.undone", history_id=rid, action=action, path=rel, line=edit.line, undo_id=hid)
        return Outcome("restored", f"undid {action} {rid}", rel, edit.line, ns, previous=edit.previous,
                       history_id=hid)

    # -- internals ----------------------------------------------------------------

    def _record(self, action: str, rel: str, line: int, **fields: Any) -> str | None:
        """Append a history record (when a history is kept); its id."""
        if self.history is None:
            return None
        texts = [fields.get("old"), fields.get("new"), *(fields.get("block") or [])]
        if any(t and not privacy.check(t).passed for t in texts):
            # Never keep a secret in a second place (a forget is often how one is removed): the
            # record says what happened, redacted, and cannot be undone.
            fields = {**fields, "block": None, "redacted": True,
                      **{k: privacy.redact_for_log(fields[k]) for k in ("old", "new") if fields.get(k)}}
        rec = hist.entry(action, self.root, rel, line, now=self._clock(), **fields)
        return str(self.history.append(rec)["id"])

    def _execute(self, plan: Accepted, v: Verdict, session: dict[str, str] | None = None) -> Outcome:
        ns = str(plan.namespace)
        c = v.candidate
        score = None if c is None else round(c.score, 4)
        if plan.route.highlights and v.action == REPLACE and c is not None and c.path != plan.target:
            # A new decision that updates one in the history still binds: it goes to the table, flagged.
            v = Verdict(APPEND, f"updates a decision in {c.path}; added to Decision Highlights", c, POSSIBLE_UPDATE)
        if v.action in (REINFORCE, REPLACE) and c is not None:
            now = self._clock()
            if v.action == REINFORCE:
                edit = self._write(c.path, lambda t: mdedit.reinforce(t, c.text, c.line, now, c.path))
            else:
                edit = self._write(c.path, lambda t: mdedit.replace(t, c.text, c.line, plan.content, now, c.path))
            if edit is not None:
                if v.action == REINFORCE:
                    hid = self._record(hist.REINFORCE, c.path, edit.line, old=edit.entry, new=plan.content,
                                       session=session, namespace=ns, reason=v.reason, score=score)
                    return Outcome("reinforced", v.reason, c.path, edit.line, ns, score, None, edit.reinforcement,
                                   history_id=hid)
                hid = self._record(hist.REPLACE, c.path, edit.line, old=edit.previous, new=plan.content,
                                   block=list(edit.block), session=session, namespace=ns, reason=v.reason, score=score)
                return Outcome("replaced", v.reason, c.path, edit.line, ns, score, edit.previous, history_id=hid)
            v = Verdict(APPEND, "the similar entry was edited away meanwhile; appended as new", c)
        if plan.route.highlights:
            out = self._highlight(plan, score)
            if v.flag and c is not None:
                out = replace(out, related={"flag": v.flag, "path": c.path, "line": c.line, "text": c.text,
                                            "score": score})
            return out
        edit = self._write(plan.target, lambda t: self._append(t, plan))
        assert edit is not None
        related = None
        if v.flag and c is not None:
            related = {"flag": v.flag, "path": c.path, "line": c.line, "text": c.text, "score": score}
        return Outcome("appended", v.reason, plan.target, edit.line, ns, score, related=related)

    def _highlight(self, plan: Accepted, score: float | None) -> Outcome:
        """A decision into a Memory Bank's Decision Highlights; rows past the cap move to details/patterns.md
        (written there first, then taken out of the table: a crash leaves a row twice, never lost)."""
        rel, ns, now = plan.target, str(plan.namespace), self._clock()
        current, _ = self._read(resolve_target(self.root, rel), rel)
        same = highlights.has_decision(current, plan.content) if current is not None else None
        if same is not None:
            return Outcome("reinforced", "the same decision is already in Decision Highlights", rel, same, ns, score)
        edit = self._write(rel, lambda t: highlights.add_row(t or "", plan.content, now, rel))
        assert edit is not None
        moved = highlights.overflow(edit.text)
        if not moved:
            return Outcome("appended", "added to Decision Highlights", rel, edit.line, ns, score)
        prel = str(PurePosixPath(rel).parent / "details" / "patterns.md")
        self._write(prel, lambda t: highlights.add_history(t, moved, now, prel))
        self._reindex(prel)
        final = self._write(rel, lambda t: highlights.drop_rows(t or "", moved, rel))
        line = highlights.has_decision(final.text, plan.content) if final is not None else None
        log.info("write.highlights_moved", path=rel, to=prel, rows=len(moved))
        return Outcome("appended", f"added to Decision Highlights; {len(moved)} older row(s) moved to {prel}", rel,
                       line or edit.line, ns, score)

    def _append(self, text: str | None, plan: Accepted) -> mdedit.Edit:
        now = self._clock()
        base = text if text is not None else mdedit.new_file(now)
        r = plan.route
        return mdedit.append(base, r.section, r.section_level, plan.content, now, plan.target, r.importance)

    def _write(self, rel: str, edit_fn: Callable[[Any], mdedit.Edit | None]) -> mdedit.Edit | None:
        """Read, edit, write conditionally; on a concurrent change, re-read and re-apply."""
        path = resolve_target(self.root, rel)
        for attempt in range(1, MAX_ATTEMPTS + 1):
            text, sha = self._read(path, rel)
            try:
                edit = edit_fn(text)
            except BlockError as exc:
                raise WriteConflict(str(exc)) from None
            if edit is None or edit.text == text:
                return edit
            path.parent.mkdir(parents=True, exist_ok=True)
            if self._before_write is not None:
                self._before_write(path)
            try:
                atomic_write_text(path, edit.text, sha, check=True)
                return edit
            except ConcurrentEditError:
                log.info("write.concurrent_edit", path=rel, attempt=attempt, action="re-reading and re-applying")
        raise WriteConflict(f"{rel} changed during each of {MAX_ATTEMPTS} attempts; nothing was written")

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

    def _reindex(self, rel: str) -> None:
        self.index.index_files([(self.root, rel)])
