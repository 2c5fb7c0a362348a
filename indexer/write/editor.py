"""The writes that manage memories rather than add one: ``clear``, ``update_section``, ``promote``, ``import``.

:class:`MemoryEditor` is a :class:`~memoryd.indexer.write.writer.MemoryWriter`
(same thread rule: the index worker only; same conditional writes, history and
re-index), with these on top:

* :meth:`MemoryEditor.clear` removes every entry of a namespace's files, one
  conditional write per file (bottom-up, so the lines recorded stay right), one
  ``forget`` history record per entry and one ``clear`` record listing them:
  ``undo`` of the ``clear`` record puts every entry back (each ``forget`` can also
  be undone alone);
* :meth:`MemoryEditor.update_section` replaces a section's body
  (:mod:`memoryd.indexer.write.sections`), recorded as ``section`` with both
  bodies; its undo puts the old body back only while the section still holds
  what the update wrote;
* :meth:`MemoryEditor.promote` copies an entry of a peer or group namespace into
  an owner namespace through dedup; what is written carries a back-reference
  ``(from PATH)`` to where it came from, so promoting it again reinforces the copy;
* :meth:`MemoryEditor.import_plans` runs accepted import lines through the
  writer (or, for a dry run, only through dedup).
"""

from __future__ import annotations

import dataclasses
from datetime import date
from typing import Any

import structlog

from memoryd.indexer.write import history as hist
from memoryd.indexer.write import mdedit
from memoryd.indexer.write.access import Namespace, namespace_of, resolve_target
from memoryd.indexer.write.candidates import gather
from memoryd.indexer.write.dedup import APPEND, REINFORCE, REPLACE, Verdict, decide
from memoryd.indexer.write.intake import Accepted, Rejected, prepare
from memoryd.indexer.write.mdlines import MdLines
from memoryd.indexer.write.refusals import BadTarget, EntryNotFound, WriteConflict
from memoryd.indexer.write.sections import replace_body, restore_body
from memoryd.indexer.write.writer import MemoryWriter, Outcome

log = structlog.get_logger(__name__)

_STRENGTH = {APPEND: 0, REPLACE: 1, REINFORCE: 2}
#: What a dry-run import reports for each dedup action.
WOULD = {"append": "would_append", "reinforce": "would_reinforce", "replace": "would_replace"}


class MemoryEditor(MemoryWriter):
    """A :class:`MemoryWriter` that can also clear, update sections, promote and import."""

    # -- clear --------------------------------------------------------------------

    def clear(self, namespace: Namespace, rels: list[str], session: dict[str, str] | None = None) -> dict[str, Any]:
        """Remove every entry of the files ``rels`` (all in ``namespace``); the files and their other
        lines (headings, prose, USER blocks) stay. A file memoryd may not write (a link, broken block
        markers) is skipped and named. Returns counts, the skipped files and the ``clear`` record's id."""
        ids: list[str] = []
        skipped: list[dict[str, str]] = []
        files = total = 0
        for rel in rels:
            try:
                removed = self._strip(rel)
            except (BadTarget, WriteConflict) as exc:  # a link, broken markers, a file that kept changing
                skipped.append({"path": rel, "reason": str(exc)})
                continue
            if not removed:
                continue
            files, total = files + 1, total + len(removed)
            for e in removed:
                hid = self._record(hist.FORGET, rel, e.line, old=e.previous, block=list(e.block), session=session,
                                   namespace=str(namespace), reason="clear")
                if hid is not None:
                    ids.append(hid)
            self._reindex(rel)
        hid = self._record(hist.CLEAR, namespace.folder, 0, old=f"{total} entries", session=session,
                           namespace=str(namespace), entries=ids) if total else None
        log.info("write.cleared", namespace=str(namespace), files=files, entries=total, history_id=hid)
        return {"decision": "cleared", "namespace": str(namespace), "files": files, "removed": total,
                "history_id": hid, "skipped": skipped}

    def _strip(self, rel: str) -> list[mdedit.Edit]:
        """Remove the entries of ``rel`` last to first in one conditional write; the removals, in order."""
        removed: list[mdedit.Edit] = []
        now = self._clock()

        def strip(text: str | None) -> mdedit.Edit | None:
            removed.clear()  # a re-applied attempt starts again from the new text
            if text is None:
                return None
            current = text
            for _ in range(len(MdLines(text).entries)):  # each pass removes one entry
                found = MdLines(current).entries
                if not found:
                    break
                edit = mdedit.remove(current, found[-1].index + 1, None, now, rel)
                assert edit is not None  # the entry was just found on that line
                removed.append(edit)
                current = edit.text
            return mdedit.Edit(current, 1, "") if removed else None

        self._write(rel, strip)
        return list(removed)

    # -- update_section -------------------------------------------------------------

    def update_section(self, rel: str, title: str, content: str, session: dict[str, str] | None = None) -> Outcome:
        """Replace the body of section ``title`` of ``rel`` with ``content``. Raises EntryNotFound (no
        file or section), SectionRefused (a USER block in it, an unsafe body), BadTarget, WriteConflict."""
        if not resolve_target(self.root, rel).is_file():
            raise EntryNotFound(f"{rel}: no such memory file")
        done: list[Any] = []

        def edit(text: str | None) -> mdedit.Edit:
            if text is None:
                raise EntryNotFound(f"{rel}: no such memory file")
            se = replace_body(text, title, content, rel)
            done[:] = [se]
            return mdedit.Edit(se.text, se.line, title)

        self._write(rel, edit)
        se = done[0]
        ns = str(namespace_of(rel))
        if se.old == se.new:
            return Outcome("unchanged", f"section {title!r} already holds this text", rel, se.line, ns)
        hid = self._record(hist.SECTION, rel, se.line, old="\n".join(se.old), new=content, block=list(se.old),
                           session=session, namespace=ns, section=title, new_block=list(se.new))
        self._reindex(rel)
        log.info("write.section_updated", path=rel, section=title, line=se.line, history_id=hid)
        return Outcome("updated", f"section {title!r} replaced", rel, se.line, ns, previous="\n".join(se.old),
                       history_id=hid)

    # -- promote --------------------------------------------------------------------

    def promote(self, rel: str, line: int, to: Namespace, today: date, session: dict[str, str] | None = None,
                memory_type: str | None = None) -> tuple[Outcome | Rejected, Accepted | None]:
        """Copy the entry on 1-based ``line`` of ``rel`` into namespace ``to`` through the gate, the privacy
        filter and dedup; what is written ends with ``(from REL)``. Raises EntryNotFound, BadTarget."""
        text, _sha = self._read(resolve_target(self.root, rel), rel)
        entry = next((e for e in MdLines(text).entries if e.index == line - 1), None) if text is not None else None
        if entry is None:
            raise EntryNotFound(f"{rel}:{line}: no memory entry on that line (list items outside USER blocks)")
        bare = prepare(entry.text, to, today, memory_type)
        if isinstance(bare, Rejected):
            return bare, None
        plan = dataclasses.replace(bare, content=f"{bare.content} (from {rel})")
        # Judged twice: the bare text finds the same fact stored without a back-reference, the text with it
        # finds an earlier promotion of this very entry; the stronger verdict wins.
        verdict = max((decide(p.content, gather(self.index, self.root, p, self.cfg), self.thresholds)
                       for p in (bare, plan)), key=lambda v: _STRENGTH[v.action])
        outcome = self._execute(plan, verdict, session)
        self._reindex(outcome.path)
        log.info("write.promoted", source=rel, line=line, decision=outcome.decision, path=outcome.path,
                 line_now=outcome.line, history_id=outcome.history_id)
        return outcome, plan

    # -- import ---------------------------------------------------------------------

    def import_plans(self, plans: list[tuple[int, Accepted]], dry_run: bool,
                     session: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Write each accepted import line (``remember``'s whole back half), or for ``dry_run`` only say what
        dedup would decide against what is stored now (lines of one import are not compared together)."""
        out = []
        for n, plan in plans:
            if dry_run:
                v = decide(plan.content, gather(self.index, self.root, plan, self.cfg), self.thresholds)
                out.append(_would(n, plan, v))
            else:
                out.append({"input_line": n, **self.remember(plan, session).to_dict()})
        return out

    # -- undo -----------------------------------------------------------------------

    def undo(self, rid: str, session: dict[str, str] | None = None) -> Outcome:
        """:meth:`MemoryWriter.undo`, plus the undo of a ``clear`` (every entry it removed that can still
        be restored) and of a ``section`` update."""
        rec = self.history.find(rid) if self.history is not None else None
        if rec is None or rec.get("action") not in (hist.CLEAR, hist.SECTION):
            return super().undo(rid, session)
        if rec.get("undone_by"):
            raise WriteConflict(f"{rid} was already undone by {rec['undone_by']}; nothing changed")
        if rec.get("root") != str(self.root):
            raise BadTarget(f"{rid}: recorded for root {rec.get('root')!r}, not the first memory root")
        if rec["action"] == hist.CLEAR:
            return self._undo_clear(rid, rec, session)
        return self._undo_section(rid, rec, session)

    def _undo_clear(self, rid: str, rec: dict[str, Any], session: dict[str, str] | None) -> Outcome:
        assert self.history is not None
        restored, skipped = 0, 0
        for cid in reversed([str(c) for c in rec.get("entries") or []]):
            child = self.history.find(cid)
            if child is None or child.get("undone_by") or not isinstance(child.get("block"), list):
                skipped += 1  # trimmed from the history, undone alone already, or held a secret
                continue
            super().undo(cid, session)
            restored += 1
        ns, path = str(rec.get("namespace", "default")), str(rec.get("path", ""))
        reason = f"undid clear {rid}: {restored} entries restored" + (f", {skipped} not restorable" if skipped else "")
        hid = self._record(hist.UNDO, path, 0, session=session, namespace=ns, undoes=rid, undone_action=hist.CLEAR,
                           reason=reason)
        log.info("write.undone", history_id=rid, action=hist.CLEAR, restored=restored, skipped=skipped, undo_id=hid)
        return Outcome("restored", reason, path, 0, ns, history_id=hid)

    def _undo_section(self, rid: str, rec: dict[str, Any], session: dict[str, str] | None) -> Outcome:
        old, new = rec.get("block"), rec.get("new_block")
        if rec.get("redacted") or not isinstance(old, list) or not isinstance(new, list):
            raise WriteConflict(f"{rid}: the old section body was not kept (too long, or it held a secret); "
                                "nothing to restore")
        rel, title = str(rec.get("path", "")), str(rec.get("section", ""))

        def edit(text: str | None) -> mdedit.Edit:
            if text is None:
                raise EntryNotFound(f"{rel}: no such memory file")
            se = restore_body(text, title, new, old, rel)
            return mdedit.Edit(se.text, se.line, title)

        done = self._write(rel, edit)
        assert done is not None
        ns = str(namespace_of(rel))
        hid = self._record(hist.UNDO, rel, done.line, old="\n".join(new), new="\n".join(old), session=session,
                           namespace=ns, undoes=rid, undone_action=hist.SECTION, section=title)
        self._reindex(rel)
        log.info("write.undone", history_id=rid, action=hist.SECTION, path=rel, undo_id=hid)
        return Outcome("restored", f"undid section update {rid}", rel, done.line, ns, history_id=hid)


def _would(n: int, plan: Accepted, v: Verdict) -> dict[str, Any]:
    """A dry-run line's report: the decision dedup would take, and where."""
    c = v.candidate
    where = {"path": c.path, "line": c.line} if c is not None and v.action != APPEND else {"path": plan.target}
    return {"input_line": n, "decision": WOULD[v.action], "reason": v.reason, "namespace": str(plan.namespace), **where,
            **plan.describe()}
