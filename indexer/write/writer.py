"""The back half of ``remember``, ``forget`` and ``undo``: embed → dedup → edit the file → re-index it.

:class:`MemoryWriter` must run on the index's one writer thread (the daemon's
``IndexWorker``), so a write never races indexing; the edited file is
re-indexed before the call returns, so the next search sees it.

This module decides what an edit is (the dedup verdict, the entry put back by an
undo, the history records); :mod:`memoryd.indexer.write.ahead` carries it out —
conditional, write-ahead, whole or not at all. Edits find entries again by their
text, so one re-applied after a concurrent save still edits the right entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import structlog

from memoryd.indexer.access import namespace_of, resolve_target
from memoryd.indexer.bank import highlights
from memoryd.indexer.config import WriteConfig
from memoryd.indexer.errors import BadTarget, EntryNotFound, ModelError, StoreError, WriteConflict
from memoryd.indexer.markdown import mdedit
from memoryd.indexer.markdown.memblocks import assert_user_blocks_unchanged
from memoryd.indexer.markdown.patch import Patch
from memoryd.indexer.write import history as hist
from memoryd.indexer.write.ahead import MAX_ATTEMPTS, STEPS, RecordsFn, WriteAheadFiles
from memoryd.indexer.write.candidates import gather
from memoryd.indexer.write.dedup import APPEND, REINFORCE, REPLACE, Thresholds, Verdict, decide, explain_verdict
from memoryd.indexer.write.intake import Accepted

if TYPE_CHECKING:
    from memoryd.indexer.engine import MemoryIndex

log = structlog.get_logger(__name__)

EMBEDDED_LATER = "embedded later: embedding server unavailable"
Clock = Callable[[], datetime]
__all__ = ["MAX_ATTEMPTS", "STEPS", "MemoryWriter", "Outcome", "RecordsFn"]


@dataclass(frozen=True)
class Outcome:
    """What a write did. ``decision``: appended | reinforced | replaced | removed."""

    decision: str
    reason: str
    path: str  # relative to the first root
    line: int  # 1-based line of the entry now (removed: where it was)
    namespace: str
    score: float | None = None
    previous: str | None = None  # the entry before: replaced, removed, or (reinforced) the one that absorbed it
    reinforcement: int | None = None  # the entry's count after a reinforcement (kept in its marker)
    related: dict[str, Any] | None = None  # appended, but it may update or restate this entry (flag, path, line, text)
    history_id: str | None = None  # the record of a replace, reinforce, removal or restore (`memoryd undo ID`)
    also: list[dict[str, Any]] | None = None  # other files this edit changed ({path, line}): a decision's patterns.md
    indexed: bool | None = None  # False: the file is written but not searchable yet (index_note says why)
    index_note: str | None = None
    explain: dict[str, Any] | None = None  # asked for: why this decision (dedup.explain)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


class MemoryWriter(WriteAheadFiles):
    """Executes plans against the files of ``root`` (the first memory root) and ``index``: decides what a
    ``remember``, ``forget`` or ``undo`` changes; :class:`~memoryd.indexer.write.ahead.WriteAheadFiles`
    writes it."""

    def __init__(self, index: MemoryIndex, root: Path, cfg: WriteConfig, *, clock: Clock | None = None,
                 before_write: Callable[[Path], None] | None = None, history: hist.History | None = None,
                 at_step: Callable[[str], None] | None = None) -> None:
        super().__init__(root, history, before_write=before_write, at_step=at_step)
        self.index = index
        self.cfg = cfg
        self.thresholds = Thresholds.from_config(cfg)
        self._clock = clock or (lambda: datetime.now(UTC))
        self.not_indexed: dict[str, str] = {}  # files written but not (re-)indexed, and why

    def remember(self, plan: Accepted, session: dict[str, str] | None = None, *, explain: bool = False) -> Outcome:
        verdict = decide(plan.content, gather(self.index, self.root, plan, self.cfg), self.thresholds)
        outcome = self._noted(self._execute(plan, verdict, session))
        if explain:
            outcome = replace(outcome, explain=explain_verdict(plan.content, verdict))
        log.info("write.remembered", decision=outcome.decision, path=outcome.path, line=outcome.line,
                 namespace=outcome.namespace, score=outcome.score, history_id=outcome.history_id,
                 flag=outcome.related["flag"] if outcome.related else None)
        return outcome

    def forget(self, rel: str, line: int, expect: str | None = None, session: dict[str, str] | None = None) -> Outcome:
        """Remove the entry on 1-based ``line`` of ``rel``. Raises EntryNotFound, BadTarget, WriteConflict."""
        path = resolve_target(self.root, rel)
        if not path.is_file():
            raise EntryNotFound(f"{rel}: no such memory file")
        ns = str(namespace_of(rel))
        edit, recs = self._write(rel, lambda text: mdedit.remove(text, line, expect, self._clock(), rel),
                                 lambda e, before: [self._rec(hist.FORGET, rel, e.line, before, e, old=e.previous,
                                                              block=list(e.block), session=session, namespace=ns)])
        if edit is None:
            what = "with that text " if expect is not None else ""
            raise EntryNotFound(f"{rel}:{line}: no memory entry {what}on that line (list items outside USER blocks)")
        hid = _id(recs)
        log.info("write.forgotten", path=rel, line=line, history_id=hid)
        return self._noted(Outcome("removed", "entry removed", rel, edit.line, ns, previous=edit.previous,
                                   history_id=hid))

    def undo(self, rid: str, session: dict[str, str] | None = None) -> Outcome:
        """Revert history record ``rid``: a replace puts the old entry back in place of the new one (the new
        text stays in the history), a forget puts the removed entry back, a reinforce writes the memory that
        was absorbed. Recorded as an ``undo``; a record is undone at most once, and an undo is not undoable.

        A record with a patch is reverted byte for byte while the file is as the edit left it; after a later
        edit, by the content and neighbours of what changed (:mod:`memoryd.indexer.markdown.patch`), and when
        that cannot be placed safely nothing changes and the record stays undoable.
        Raises EntryNotFound (no such id), WriteConflict (already undone, cannot be placed), BadTarget."""
        rec = self._undoable(rid)
        action, rel = rec.get("action"), str(rec.get("path", ""))
        ns = str(namespace_of(rel))
        exact: list[bool] = [False]

        def record(e: mdedit.Edit, before: str | None) -> list[dict[str, Any]]:
            return [self._rec(hist.UNDO, rel, e.line, before, None, old=e.previous, new=e.entry or None,
                              block=list(e.block) or None, session=session, namespace=ns, undoes=rid,
                              undone_action=action, exact=exact[0])]

        patch = Patch.from_json(rec.get("patch"))
        back = rec.get("old") if action in (hist.REPLACE, hist.FORGET) else rec.get("new")  # what it writes back
        entry = back if isinstance(back, str) else None
        if action in (hist.REPLACE, hist.FORGET) and patch is not None:
            previous = str(rec["new"]) if action == hist.REPLACE and rec.get("new") is not None else None
            edit, recs = self._revert(rel, patch, rid, exact, record, previous, entry)
        else:
            edit, recs = self._undo_by_entry(rec, rid, record, entry)
        hid = _id(recs)
        log.info("write.undone", history_id=rid, action=action, path=rel, line=edit.line, exact=exact[0], undo_id=hid)
        return self._noted(Outcome("restored", f"undid {action} {rid}", rel, edit.line, ns, previous=edit.previous,
                                   history_id=hid))

    # -- internals ----------------------------------------------------------------

    def _undoable(self, rid: str) -> dict[str, Any]:
        """The record ``rid``, checked: it exists, is not an undo, was not undone, belongs to this root."""
        if self.history is None:
            raise EntryNotFound(f"{rid[:40]!r}: no write history is kept")
        rec = self.history.find(rid)
        if rec is None:
            raise EntryNotFound(f"{rid[:40]!r}: no such history entry")
        if rec.get("undone_by"):
            raise WriteConflict(f"{rid} was already undone by {rec['undone_by']}; nothing changed")
        if rec.get("action") == hist.UNDO:
            raise WriteConflict(f"{rid} is an undo; an undo cannot be undone (nothing changed)")
        if rec.get("root") != str(self.root):
            raise BadTarget(f"{rid}: recorded for root {rec.get('root')!r}, not the first memory root")
        if rec.get("redacted"):  # written by an older memoryd, which kept secrets out of the history
            raise WriteConflict(f"{rid}: the entry held a secret, so the history kept it redacted; nothing to restore")
        return rec

    def _revert(self, rel: str, patch: Patch, rid: str, exact: list[bool], records: RecordsFn,
                previous: str | None = None, entry: str | None = None) -> tuple[mdedit.Edit, list[dict[str, Any]]]:
        """Undo ``patch`` on ``rel`` (exactly, or placed by content; ``exact[0]`` says which); raises
        WriteConflict when it cannot be placed safely. The edit's line is where ``entry`` is in the text
        written (:func:`_located`); its lines are the body's (a reverted ``updated:`` stamp is not the entry)."""

        def edit(text: str | None) -> mdedit.Edit:
            back = patch.revert(text) if text is not None else None
            if back is None:
                raise WriteConflict(f"{rid}: {rel} was edited since and the old lines cannot be placed safely "
                                    "(their neighbours are gone or appear twice); nothing changed, the record is kept")
            assert text is not None
            assert_user_blocks_unchanged(text, back[0], rel)
            exact[0] = back[1]
            old = [x.rstrip("\r\n") for h in patch.hunks if not h.meta for x in h.old]
            return mdedit.Edit(back[0], 1, old[0] if old else "", previous=previous, block=tuple(old))

        done, recs = self._write(rel, _located(edit, entry), records)
        if done is None:
            raise WriteConflict(f"{rid}: nothing to put back in {rel}")
        return done, recs

    def _undo_by_entry(self, rec: dict[str, Any], rid: str, records: RecordsFn,
                       entry: str | None) -> tuple[mdedit.Edit, list[dict[str, Any]]]:
        """The undo of a record without a patch (a reinforce, or one an older memoryd wrote), by the entry's
        text; the edit's line is where ``entry`` is in the text written (:func:`_located`)."""
        action, rel, line = rec.get("action"), str(rec.get("path", "")), int(rec.get("line", 1))
        block = rec.get("block")
        if action in (hist.REPLACE, hist.FORGET) and not isinstance(block, list):
            raise WriteConflict(f"{rid}: the old entry was too long to keep; it is in the history, restore it by hand")
        now = self._clock()
        old, new = str(rec.get("old", "")), str(rec.get("new", ""))

        def put_back(t: str | None) -> mdedit.Edit | None:
            if action not in (hist.REPLACE, hist.FORGET):  # a reinforce: write the memory it absorbed
                return mdedit.insert_after(t, old, line, new, now, rel)
            assert isinstance(block, list)
            if action == hist.REPLACE and t is not None:
                found = mdedit.revert(t, new, line, block, now, rel)
                if found is not None:
                    return found
            return mdedit.restore(t, line, block, now, rel)

        edit, recs = self._write(rel, _located(put_back, entry), records)
        assert edit is not None
        return edit, recs

    def _rec(self, action: str, rel: str, line: int, before: str | None, edit: mdedit.Edit | None,
             **fields: Any) -> dict[str, Any]:
        """A history record of an edit of ``rel`` from ``before``; with the patch that undoes it exactly when
        ``edit`` is given. The record keeps the exact bytes (the file is 0600 and never indexed or logged);
        redaction applies to what leaves the daemon (:mod:`memoryd.daemon.api.history`)."""
        if edit is not None:
            fields["patch"] = Patch.between(before or "", edit.text).to_json()
        return hist.entry(action, self.root, rel, line, now=self._clock(), **fields)

    def _execute(self, plan: Accepted, v: Verdict, session: dict[str, str] | None = None) -> Outcome:
        """Carry out ``v`` (:func:`memoryd.indexer.write.dedup.decide`): a reinforce or a replace edits an
        entry of the route's own file and section; anything similar elsewhere is only named in ``related``."""
        ns = str(plan.namespace)
        c = v.candidate
        score = None if c is None else round(c.score, 4)
        related = _related(v)
        if v.action in (REINFORCE, REPLACE) and c is not None:
            now = self._clock()
            if v.action == REINFORCE:
                repeat = self.history.same_reinforcement(self.root, c.path, c.text, plan.content) \
                    if self.history is not None else None
                edit, recs = self._write(
                    c.path, lambda t: mdedit.reinforce(t, c.text, c.line, now, c.path),
                    None if repeat else lambda e, before: [self._rec(
                        hist.REINFORCE, c.path, e.line, before, None, old=e.entry, new=plan.content,
                        session=session, namespace=ns, reason=v.reason, score=score)])
                if edit is not None:
                    return Outcome("reinforced", v.reason, c.path, edit.line, ns, score, edit.entry,
                                   edit.reinforcement, related=related, history_id=repeat or _id(recs))
            else:
                edit, recs = self._write(
                    c.path, lambda t: mdedit.replace(t, c.text, c.line, plan.content, now, c.path),
                    lambda e, before: [self._rec(hist.REPLACE, c.path, e.line, before, e, old=e.previous,
                                                 new=plan.content, block=list(e.block), session=session,
                                                 namespace=ns, reason=v.reason, score=score)])
                if edit is not None:
                    return Outcome("replaced", v.reason, c.path, edit.line, ns, score, edit.previous,
                                   related=related, history_id=_id(recs))
            v = Verdict(APPEND, "the similar entry was edited away meanwhile; appended as new", c,
                        elsewhere=v.elsewhere)
            related = _related(v)
        if plan.route.highlights:
            return replace(self._highlight(plan, score), related=related)
        edit, _ = self._write(plan.target, lambda t: self._append(t, plan))
        assert edit is not None
        return Outcome("appended", v.reason, plan.target, edit.line, ns, score, related=related)

    def _highlight(self, plan: Accepted, score: float | None) -> Outcome:
        """A decision into a Memory Bank (seed 002: "技术决策 → MEMORY.md → Decision Highlights +
        details/patterns.md"): a row of Decision Highlights and a row of ``details/patterns.md``'s
        Technical Decisions, in one write-ahead edit of both files (:meth:`_write_all`); rows past the
        table's cap leave it in the same edit (they are in ``patterns.md`` already, or added there)."""
        rel, ns, now = plan.target, str(plan.namespace), self._clock()
        prel = str(PurePosixPath(rel).parent / "details" / "patterns.md")
        current, _ = self._read(resolve_target(self.root, rel), rel)
        same = highlights.has_decision(current, plan.content) if current is not None else None
        if same is not None and current is not None:  # nothing is written, so there is nothing to undo
            kept = next((highlights.first_cell(r) for i, r in highlights.rows(current) if i + 1 == same), None)
            return Outcome("reinforced", "the same decision is already in Decision Highlights", rel, same, ns, score,
                           kept)
        moved: list[str] = []

        def both(texts: list[str | None]) -> list[mdedit.Edit | None]:
            added = highlights.add_row(texts[1] or "", plan.content, now, rel)
            moved[:] = highlights.overflow(added.text)
            kept = highlights.drop_rows(added.text, moved, rel) if moved else added
            line = highlights.has_decision(kept.text, plan.content) or added.line
            mine = next(r for i, r in highlights.rows(kept.text) if i + 1 == line)
            history = highlights.add_history(texts[0], [*moved, mine], now, prel)
            return [history, mdedit.Edit(kept.text, line, plan.content)]

        history, memory = self._write_all([prel, rel], both)  # patterns.md first: see _write_all
        assert memory is not None
        self._reindex(prel)
        if moved:
            log.info("write.highlights_moved", path=rel, to=prel, rows=len(moved))
        also = [{"path": prel, "line": highlights.history_line(history.text, plan.content) or history.line}] \
            if history is not None else None
        why = f"added to Decision Highlights and {prel}" + \
            (f"; {len(moved)} older row(s) left the table (kept in {prel})" if moved else "")
        return Outcome("appended", why, rel, memory.line, ns, score, also=also)

    def _append(self, text: str | None, plan: Accepted) -> mdedit.Edit:
        now = self._clock()
        base = text if text is not None else mdedit.new_file(now)
        r = plan.route
        return mdedit.append(base, r.section, r.section_level, plan.content, now, plan.target, r.importance)

    def _reindex(self, rel: str) -> str | None:
        """Index the file just written; why it is not searchable yet, or None when it is.

        The file is the truth: once it is written, an index failure (the store or the database out of
        reach, the model failing, the file skipped) never turns the write into an error. It is logged,
        kept in :attr:`not_indexed` for the reply, and the watcher or the next reconcile indexes it.
        """
        try:
            stats = self.index.index_files([(self.root, rel)])
            reason = next(iter(stats.skipped.values()), None)
        except (StoreError, ModelError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
        if reason is None:
            self.not_indexed.pop(rel, None)
            return None
        self.not_indexed[rel] = reason
        log.warning("write.not_indexed", path=rel, reason=reason, action="written; indexed at the next change or sweep")
        return reason

    def _noted(self, outcome: Outcome) -> Outcome:
        """``outcome`` once its file is re-indexed, saying so when it could not be, or when its vectors wait
        (the embedder was down: keyword-searchable now, the vector backlog embeds it later)."""
        reason = self._reindex(outcome.path)
        if reason is None and self._vectors_pending(outcome.path):
            # an embedder that knows why it has no model says so (a first start's build: daemon/model_build.py)
            why = getattr(self.index.embedder, "unavailable", None)
            return replace(outcome, index_note=f"embedded later: {why}" if why else EMBEDDED_LATER)
        return outcome if reason is None else replace(outcome, indexed=False, index_note=reason)

    def _vectors_pending(self, rel: str) -> bool:
        store = self.index.store
        return any(i in self.index.backlog for i in store.chunk_ids_of(store.root_id(self.root), rel))


def _related(v: Verdict) -> dict[str, Any] | None:
    """The entry an answer names beside what was written: the verdict's own flagged candidate, or a
    similar entry outside the route's file and section (never edited)."""
    flagged = v if v.flag else v.elsewhere
    c = flagged.candidate if flagged is not None else None
    if flagged is None or flagged.flag is None or c is None:
        return None
    return {"flag": flagged.flag, "path": c.path, "line": c.line, "text": c.text, "score": round(c.score, 4)}


def _id(recs: list[dict[str, Any]]) -> str | None:
    return str(recs[0]["id"]) if recs else None


def _located(fn: Callable[[str | None], mdedit.Edit | None],
             entry: str | None) -> Callable[[str | None], mdedit.Edit | None]:
    """``fn`` (an undo's edit), its line taken from the text it wrote: the line of ``entry`` among the lines
    the edit changed outside front matter, nearest the line ``fn`` meant
    (:func:`memoryd.indexer.markdown.mdedit.edited_line`), at each attempt. The reply, the log and the
    history all read this line, so none can name the ``updated:`` stamp an exact revert also put back,
    nor a line that lines added above have moved."""

    def run(text: str | None) -> mdedit.Edit | None:
        e = fn(text)
        return e if e is None else replace(e, line=mdedit.edited_line(text or "", e.text, entry, e.line))

    return run
