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
  (:mod:`memoryd.indexer.markdown.sections`), recorded as ``section`` with both
  bodies; its undo puts the old body back only while the section still holds
  what the update wrote;
* :meth:`MemoryEditor.promote` copies an entry of a peer or group namespace into
  an owner namespace through dedup; what is written carries a back-reference
  ``(from PATH)`` to where it came from, so promoting it again reinforces the copy;
* :meth:`MemoryEditor.import_plans` decides and carries out import lines
  (:mod:`memoryd.indexer.write.importer`: one decision function for the dry run and
  the real run; restores by path, new memories through dedup).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import date
from typing import Any

import structlog

from memoryd.indexer.access import Namespace, namespace_of, resolve_target
from memoryd.indexer.errors import BadTarget, EntryNotFound, WriteConflict
from memoryd.indexer.markdown import mdedit
from memoryd.indexer.markdown.mdlines import MdLines
from memoryd.indexer.markdown.patch import CONTEXT, Hunk, Patch, split_lines
from memoryd.indexer.markdown.sections import replace_body, restore_body
from memoryd.indexer.write import history as hist
from memoryd.indexer.write import importer
from memoryd.indexer.write.candidates import gather
from memoryd.indexer.write.dedup import APPEND, REINFORCE, REPLACE, decide
from memoryd.indexer.write.intake import Accepted, Rejected, prepare
from memoryd.indexer.write.writer import MemoryWriter, Outcome

log = structlog.get_logger(__name__)

_STRENGTH = {APPEND: 0, REPLACE: 1, REINFORCE: 2}


class MemoryEditor(MemoryWriter):
    """A :class:`MemoryWriter` that can also clear, update sections, promote and import."""

    # -- clear --------------------------------------------------------------------

    def clear(self, namespace: Namespace, rels: list[str], session: dict[str, str] | None = None) -> dict[str, Any]:
        """Remove every entry of the files ``rels`` (all in ``namespace``); the files and their other
        lines (headings, prose, USER blocks) stay. A file memoryd may not write (a link, broken block
        markers) is skipped and named. Returns counts, the skipped files and the ``clear`` record's id.

        Each file is one write-ahead edit (:meth:`MemoryWriter._write`) whose records are a ``forget``
        per entry and one ``clear`` record with the file's patch; the files' ``clear`` records share a
        ``group``, the id of the first, which is what ``undo`` takes. A kill part-way leaves every file
        either cleared with its records or untouched."""
        gid = hist.new_id()
        skipped: list[dict[str, str]] = []
        files = total = 0
        for rel in rels:
            try:
                removed = self._strip(rel, namespace, session, gid, first=total == 0)
            except (BadTarget, WriteConflict) as exc:  # a link, broken markers, a file that kept changing
                skipped.append({"path": rel, "reason": str(exc)})
                continue
            if not removed:
                continue
            files, total = files + 1, total + removed
            self._reindex(rel)
        hid = gid if total else None
        log.info("write.cleared", namespace=str(namespace), files=files, entries=total, history_id=hid)
        out = {"decision": "cleared", "namespace": str(namespace), "files": files, "removed": total,
               "history_id": hid, "skipped": skipped}
        if self.not_indexed:
            out["not_indexed"] = dict(self.not_indexed)
        return out

    def _strip(self, rel: str, namespace: Namespace, session: dict[str, str] | None, gid: str, first: bool) -> int:
        """Remove every entry of ``rel`` in one conditional, journaled write; how many went."""
        now = self._clock()
        removed: list[mdedit.Removed] = []

        def strip(text: str | None) -> mdedit.Edit | None:
            out = mdedit.remove_all(text, now, rel) if text is not None else None
            removed[:] = out[1] if out is not None else []
            return out[0] if out is not None else None

        def records(edit: mdedit.Edit, before: str | None) -> list[dict[str, Any]]:
            lines = split_lines(before or "")
            ns = str(namespace)
            # No ``block``: the patch holds the entry's exact lines (a clear of 2,000 entries stays ~2 MB).
            forgets = [self._rec(hist.FORGET, rel, r.line, None, None, old=r.text, lines=len(r.block),
                                 session=session, namespace=ns, reason="clear", group=gid,
                                 patch=_entry_patch(lines, r).to_json()) for r in removed]
            part = self._rec(hist.CLEAR, rel, 0, before, edit, old=f"{len(removed)} entries", session=session,
                             namespace=ns, group=gid, entries=[f["id"] for f in forgets])
            if first:
                part["id"] = gid
            return [*forgets, part]

        self._write(rel, strip, records)
        return len(removed)

    # -- update_section -------------------------------------------------------------

    def update_section(self, rel: str, title: str, content: str, session: dict[str, str] | None = None) -> Outcome:
        """Replace the body of section ``title`` of ``rel`` with ``content``. Raises EntryNotFound (no
        file or section), SectionRefused (a USER block in it, an unsafe body), BadTarget, WriteConflict."""
        if not resolve_target(self.root, rel).is_file():
            raise EntryNotFound(f"{rel}: no such memory file")
        done: list[Any] = []
        ns = str(namespace_of(rel))

        def edit(text: str | None) -> mdedit.Edit:
            if text is None:
                raise EntryNotFound(f"{rel}: no such memory file")
            se = replace_body(text, title, content, rel)
            done[:] = [se]
            return mdedit.Edit(se.text, se.line, title)

        def records(e: mdedit.Edit, before: str | None) -> list[dict[str, Any]]:
            se = done[0]
            return [self._rec(hist.SECTION, rel, se.line, before, e, old="\n".join(se.old), new=content,
                              block=list(se.old), session=session, namespace=ns, section=title,
                              new_block=list(se.new))]

        _, recs = self._write(rel, edit, records)
        se = done[0]
        if se.old == se.new:
            return Outcome("unchanged", f"section {title!r} already holds this text", rel, se.line, ns)
        hid = str(recs[0]["id"]) if recs else None
        log.info("write.section_updated", path=rel, section=title, line=se.line, history_id=hid)
        return self._noted(Outcome("updated", f"section {title!r} replaced", rel, se.line, ns,
                                   previous="\n".join(se.old), history_id=hid))

    # -- promote --------------------------------------------------------------------

    def promote(self, rel: str, line: int, to: Namespace, today: date, session: dict[str, str] | None = None,
                memory_type: str | None = None, expect: str | None = None,
                ) -> tuple[Outcome | Rejected, Accepted | None]:
        """Copy the entry on 1-based ``line`` of ``rel`` into namespace ``to`` through the gate, the privacy
        filter and dedup; what is written ends with ``(from REL)``. ``expect``: only if that entry still has
        this text. Raises EntryNotFound, BadTarget."""
        text, _sha = self._read(resolve_target(self.root, rel), rel)
        entry = next((e for e in MdLines(text).entries if e.index == line - 1), None) if text is not None else None
        if entry is None:
            raise EntryNotFound(f"{rel}:{line}: no memory entry on that line (list items outside USER blocks)")
        if expect is not None and not mdedit.same_entry(expect, entry.text):
            raise EntryNotFound(f"{rel}:{line}: the entry on line {line} changed (it now reads "
                                f"{entry.text[:80]!r}); nothing was promoted: list the file again")
        bare = prepare(entry.text, to, today, memory_type)
        if isinstance(bare, Rejected):
            return bare, None
        plan = dataclasses.replace(bare, content=f"{bare.content} (from {rel})")
        # Judged twice: the bare text finds the same fact stored without a back-reference, the text with it
        # finds an earlier promotion of this very entry; the stronger verdict wins.
        verdict = max((decide(p.content, gather(self.index, self.root, p, self.cfg), self.thresholds)
                       for p in (bare, plan)), key=lambda v: _STRENGTH[v.action])
        outcome = self._noted(self._execute(plan, verdict, session))
        log.info("write.promoted", source=rel, line=line, decision=outcome.decision, path=outcome.path,
                 line_now=outcome.line, history_id=outcome.history_id)
        return outcome, plan

    # -- import ---------------------------------------------------------------------

    def import_plans(self, plans: Sequence[importer.Line], dry_run: bool,
                     session: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Decide every import line (:func:`memoryd.indexer.write.importer.plan`: against what is stored and
        the lines before it), then for ``dry_run`` report the decisions, else carry them all out."""
        steps = importer.plan(self, plans)
        if dry_run:
            return importer.dry_report(self, steps)
        return importer.execute(self, steps, 0, session, budget_s=float("inf"))[0]

    # -- undo -----------------------------------------------------------------------

    def undo(self, rid: str, session: dict[str, str] | None = None) -> Outcome:
        """:meth:`MemoryWriter.undo`, plus the undo of a ``clear`` (every file it emptied, byte for byte
        while untouched since) and of a ``section`` update."""
        rec = self.history.find(rid) if self.history is not None else None
        if rec is None or rec.get("action") not in (hist.CLEAR, hist.SECTION):
            return super().undo(rid, session)
        rec = self._undoable(rid)
        if rec["action"] == hist.SECTION:
            return self._undo_section(rid, rec, session)
        if not rec.get("group"):
            return self._undo_clear_legacy(rid, rec, session)
        return self._undo_clear(rid, rec, session)

    def _undo_clear(self, rid: str, rec: dict[str, Any], session: dict[str, str] | None) -> Outcome:
        """Revert each file of the clear whose part is not undone yet; say which could not be placed."""
        assert self.history is not None
        recs = list(self.history.records())
        undone = {str(u.get("undoes")) for u in recs if u.get("action") == hist.UNDO}
        undone |= {str(c) for u in recs if u.get("action") == hist.UNDO for c in u.get("covers") or ()}
        parts = [r for r in recs if r.get("group") == rec["group"] and r.get("action") == hist.CLEAR
                 and r["id"] not in undone]
        restored, files, failed = 0, 0, []
        for part in parts:
            rel, ns = str(part.get("path", "")), str(part.get("namespace", "default"))
            patch = Patch.from_json(part.get("patch"))
            children = [str(c) for c in part.get("entries") or []]
            if patch is None or any(c in undone for c in children):
                failed.append(f"{rel} (some entries were restored one by one; undo the others one by one)")
                continue
            exact: list[bool] = [False]
            pid = str(part["id"])

            def record(e: mdedit.Edit, before: str | None, pid: str = pid, rel: str = rel, ns: str = ns,
                       children: list[str] = children, exact: list[bool] = exact) -> list[dict[str, Any]]:
                return [self._rec(hist.UNDO, rel, e.line, before, None, session=session, namespace=ns, undoes=pid,
                                  covers=children, undone_action=hist.CLEAR, exact=exact[0],
                                  reason=f"undid clear {rid}: {len(children)} entries restored")]

            try:
                self._revert(rel, patch, pid, exact, record)
            except (WriteConflict, BadTarget, EntryNotFound) as exc:
                failed.append(f"{rel} ({exc})")
                continue
            restored, files = restored + len(children), files + 1
            self._reindex(rel)
        if not files and failed:
            raise WriteConflict(f"{rid}: nothing restored; " + "; ".join(failed))
        reason = f"undid clear {rid}: {restored} entries restored in {files} file(s)"
        if failed:
            reason += "; not restored: " + "; ".join(failed)
        log.info("write.undone", history_id=rid, action=hist.CLEAR, restored=restored, files=files,
                 failed=len(failed))
        return Outcome("restored", reason, str(rec.get("path", "")), 0, str(rec.get("namespace", "default")),
                       history_id=rid)

    def _undo_clear_legacy(self, rid: str, rec: dict[str, Any], session: dict[str, str] | None) -> Outcome:
        """The undo of a ``clear`` recorded by an older memoryd: its entries one by one."""
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
        hid = str(self.history.append(hist.entry(hist.UNDO, self.root, path, 0, now=self._clock(), session=session,
                                                 namespace=ns, undoes=rid, undone_action=hist.CLEAR,
                                                 reason=reason))["id"])
        log.info("write.undone", history_id=rid, action=hist.CLEAR, restored=restored, skipped=skipped, undo_id=hid)
        return Outcome("restored", reason, path, 0, ns, history_id=hid)

    def _undo_section(self, rid: str, rec: dict[str, Any], session: dict[str, str] | None) -> Outcome:
        old, new = rec.get("block"), rec.get("new_block")
        rel, title = str(rec.get("path", "")), str(rec.get("section", ""))
        ns = str(namespace_of(rel))
        exact: list[bool] = [False]

        def record(e: mdedit.Edit, before: str | None) -> list[dict[str, Any]]:
            return [self._rec(hist.UNDO, rel, e.line, before, None, old="\n".join(new or []),
                              new="\n".join(old or []), session=session, namespace=ns, undoes=rid,
                              undone_action=hist.SECTION, section=title, exact=exact[0])]

        patch = Patch.from_json(rec.get("patch"))
        if patch is not None:
            done, recs = self._revert(rel, patch, rid, exact, record)
        else:
            if not isinstance(old, list) or not isinstance(new, list):
                raise WriteConflict(f"{rid}: the old section body was not kept (too long, or it held a secret); "
                                    "nothing to restore")

            def edit(text: str | None) -> mdedit.Edit:
                if text is None:
                    raise EntryNotFound(f"{rel}: no such memory file")
                se = restore_body(text, title, new, old, rel)
                return mdedit.Edit(se.text, se.line, title)

            got, recs = self._write(rel, edit, record)
            assert got is not None
            done = got
        hid = str(recs[0]["id"]) if recs else None
        log.info("write.undone", history_id=rid, action=hist.SECTION, path=rel, undo_id=hid)
        return self._noted(Outcome("restored", f"undid section update {rid}", rel, done.line, ns, history_id=hid))


def _entry_patch(lines: list[str], r: mdedit.Removed) -> Patch:
    """A one-entry patch for the ``forget`` record of one entry of a clear: its exact lines and its
    neighbours before the clear (no exact sha: it is always placed by content)."""
    i, j = r.line - 1, r.line - 1 + len(r.block)
    return Patch((Hunk(i, tuple(lines[i:j]), (), tuple(lines[max(0, i - CONTEXT):i]), tuple(lines[j:j + CONTEXT])),),
                 post_sha="")
