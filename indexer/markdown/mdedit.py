"""The writer's Markdown edits: append, replace, reinforce, remove — never losing user text.

Every operation works on :class:`~memoryd.indexer.markdown.mdlines.MdLines`, touching only
the lines it means to: the entry line(s) and, when the file has YAML front
matter, the ``updated:`` line. Importance and reinforcement live in the entry's
own marker (:mod:`memoryd.indexer.markdown.entrymeta`), so they are recorded in files
without front matter too; a count an older memoryd kept in a front-matter
``reinforcement:`` mapping (entry id → count) is folded into the marker, and
its key dropped, the next time the entry is reinforced. A file without front
matter gets none added (it would shift every line of a user's file); a file
memoryd creates starts with one. Before returning, each operation proves that every USER block
is byte-identical (:func:`memoryd.indexer.markdown.memblocks.assert_user_blocks_unchanged`).

Entries are found again by their text, not trusted by line number: the line a
candidate was seen on is only a hint, so an edit re-applied after a concurrent
change lands on the right item or reports it gone (``None``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime

from memoryd.indexer.markdown.entrymeta import EntryMeta, strip
from memoryd.indexer.markdown.mdlines import ITEM, Entry, MdLines, fold
from memoryd.indexer.markdown.memblocks import assert_user_blocks_unchanged
from memoryd.indexer.markdown.patch import Patch

_UPDATED = re.compile(r"^updated[ \t]*:[ \t]*(.*)$")
_REINFORCEMENT = re.compile(r"^reinforcement[ \t]*:[ \t]*(.*?)[ \t]*$")
_CHILD = re.compile(r"^[ \t]+[\"']?([0-9a-f]{8})[\"']?[ \t]*:[ \t]*(\d+)[ \t]*$")
_DATE_ONLY = re.compile(r"^[\"']?\d{4}-\d{2}-\d{2}[\"']?$")


@dataclass(frozen=True)
class Edit:
    """The new file text, the 1-based line of the entry concerned, and what changed."""

    text: str
    line: int
    entry: str
    previous: str | None = None
    reinforcement: int | None = None
    block: tuple[str, ...] = ()  # replace/remove: the old entry's exact lines (no terminators), for undo


def entry_id(text: str) -> str:
    """Stable 8-hex id of an entry, insensitive to case, width and punctuation."""
    return hashlib.sha256(fold(text).encode()).hexdigest()[:8]


def entries(text: str) -> list[tuple[int, str]]:
    """(1-based line, text) of every editable entry (list items outside fences and USER blocks)."""
    return [(e.index + 1, e.text) for e in MdLines(text).entries]


def new_file(now: datetime) -> str:
    return f"---\nupdated: {_stamp(now, None)}\n---\n"


def append(text: str, title: str, level: int, entry: str, now: datetime, where: str,
           importance: int | None = None) -> Edit:
    """Add ``- entry`` at the end of section ``title`` (created at the end of the region if missing),
    with a marker recording ``importance`` when one is given."""
    item = f"- {entry}{EntryMeta(importance).render()}"
    doc = MdLines(text)
    _touch(doc, now)
    doc = MdLines(doc.text())
    found = doc.section(title)
    if found is not None:
        heading, end = found
        items = [e for e in doc.entries if heading.index < e.index < end]
        if items:
            at, block = items[-1].end, [item]
        else:
            at = heading.index + 1
            block = [item] if doc.blank(at) else ["", item]
            at += 1 if doc.blank(at) else 0
    else:
        at = doc.region()[1]
        block = ["#" * level + f" {title}", "", item]
        if at > 0 and not doc.blank(at - 1):
            block.insert(0, "")
    if at < len(doc.lines) and not doc.blank(at) and not ITEM.match(doc.content(at)):
        block.append("")
    doc.insert(at, block)
    line = at + block.index(item) + 1
    return _finish(text, doc, where, Edit(doc.text(), line, entry))


def reinforce(text: str, old: str, line: int, now: datetime, where: str) -> Edit | None:
    """Count one more reinforcement of entry ``old`` (seen on 1-based ``line``); None if it is gone.

    The count goes into the entry's marker (the entry's text stays as the user may have edited it);
    a count kept in the front matter by an older memoryd is added to it and its key dropped.
    """
    hint = line - 1
    doc = MdLines(text)
    if _find(doc, old, hint) is None:
        return None
    key = entry_id(old)
    legacy = _legacy_count(doc, key)
    _touch(doc, now, drop=key)
    doc = MdLines(doc.text())
    e = _find(doc, old, hint + len(doc.lines) - len(MdLines(text).lines))
    assert e is not None
    meta = e.meta or EntryMeta()
    count = meta.reinforced + legacy + 1
    doc.replace_line(e.index, _prefix(doc, e) + e.text + EntryMeta(meta.importance, count, meta.extra).render())
    return _finish(text, doc, where, Edit(doc.text(), e.index + 1, e.text, reinforcement=count))


def replace(text: str, old: str, line: int, new: str, now: datetime, where: str) -> Edit | None:
    """Put ``new`` in place of entry ``old`` (seen on 1-based ``line``), keeping its marker; None if gone."""
    hint = line - 1
    before = len(MdLines(text).lines)
    doc = MdLines(text)
    if _find(doc, old, hint) is None:
        return None
    _touch(doc, now, drop=entry_id(old))
    doc = MdLines(doc.text())
    e = _find(doc, old, hint + len(doc.lines) - before)
    assert e is not None
    block = _block(doc, e)
    kept = EntryMeta(e.meta.importance) if e.meta is not None else EntryMeta()  # the new fact starts unreinforced
    doc.replace_line(e.index, _prefix(doc, e) + new + kept.render())
    doc.delete(e.index + 1, e.end)
    return _finish(text, doc, where, Edit(doc.text(), e.index + 1, new, previous=e.text, block=block))


def same_entry(expect: str, text: str) -> bool:
    """True if ``expect`` (as a client last saw the entry, maybe with its marker) is the entry ``text``.

    Why: a line number alone names whatever sits there now; a peer that wrote one more
    entry meanwhile moved the one the owner meant (forget and promote both guard with it).
    """
    return fold(strip(expect)) == fold(text)


def remove(text: str, line: int, expect: str | None, now: datetime, where: str) -> Edit | None:
    """Delete the entry on 1-based ``line`` (if ``expect`` is given, only if its text matches); else None."""
    doc = MdLines(text)
    e = next((x for x in doc.entries if x.index == line - 1), None)
    if e is None or (expect is not None and not same_entry(expect, e.text)):  # a marker copied along is fine
        return None
    before = len(doc.lines)
    _touch(doc, now, drop=entry_id(e.text))
    doc = MdLines(doc.text())
    e2 = _find(doc, e.text, line - 1 + len(doc.lines) - before)
    assert e2 is not None
    block = _block(doc, e2)
    doc.delete(e2.index, e2.end)
    return _finish(text, doc, where, Edit(doc.text(), e2.index + 1, "", previous=e.text, block=block))


@dataclass(frozen=True)
class Removed:
    """One entry :func:`remove_all` took out: its 1-based line before, its text and its exact lines."""

    line: int
    text: str
    block: tuple[str, ...]


def remove_all(text: str, now: datetime, where: str) -> tuple[Edit, list[Removed]] | None:
    """Delete every entry of ``text`` in one pass (``clear``), last to first; None if it has none.

    Linear in the file: the file is parsed once and its entries' line ranges deleted bottom-up, so a
    2,000-entry file costs one parse, not one per entry.
    """
    doc = MdLines(text)
    found = list(doc.entries)
    if not found:
        return None
    removed = [Removed(e.index + 1, e.text, _block(doc, e)) for e in found]
    for e in reversed(found):
        doc.delete(e.index, e.end)
    _touch(doc, now)
    return _finish(text, doc, where, Edit(doc.text(), 1, "")), removed


def restore(text: str | None, line: int, block: list[str], now: datetime, where: str) -> Edit:
    """Put the lines of a removed entry back before 1-based ``line`` (undo of a forget).

    Where that line is no longer a place memoryd may write (inside a USER block,
    a code fence, the front matter, past the end), the lines go to the end of the
    writable region instead. A missing file is created with front matter.
    """
    base = text if text is not None else new_file(now)
    doc = MdLines(base)
    _touch(doc, now)
    doc = MdLines(doc.text())
    lo, hi = doc.region()
    at = min(max(line - 1, lo), hi)
    if at < hi and not doc.editable(at):
        at = hi
    doc.insert(at, list(block))
    return _finish(base, doc, where, Edit(doc.text(), at + 1, block[0] if block else ""))


def insert_after(text: str | None, old: str, line: int, entry: str, now: datetime, where: str) -> Edit:
    """Add ``- entry`` right after entry ``old`` (seen on 1-based ``line``), or at the end if ``old`` is gone.

    The undo of a reinforcement: the memory that was absorbed is written after all.
    """
    doc = MdLines(text) if text is not None else MdLines(new_file(now))
    _touch(doc, now)  # first: a missing ``updated:`` line restore would add must not move the place found below
    doc = MdLines(doc.text())
    e = _find(doc, old, line - 1)
    if e is None:
        return restore(text, 1 << 30, [f"- {entry}"], now, where)
    if e.meta is not None and e.meta.reinforced > 0:  # the reinforcement being undone no longer counts
        less = EntryMeta(e.meta.importance, e.meta.reinforced - 1, e.meta.extra)
        doc.replace_line(e.index, _prefix(doc, e) + e.text + less.render())
    return restore(doc.text(), e.end + 1, [e.prefix.lstrip("\ufeff") + entry], now, where)


def revert(text: str, new: str, line: int, block: list[str], now: datetime, where: str) -> Edit | None:
    """Put the old entry's lines back in place of entry ``new`` (undo of a replace); None if ``new`` is gone."""
    before = len(MdLines(text).lines)
    doc = MdLines(text)
    if _find(doc, new, line - 1) is None:
        return None
    _touch(doc, now, drop=entry_id(new))
    doc = MdLines(doc.text())
    e = _find(doc, new, line - 1 + len(doc.lines) - before)
    assert e is not None
    replaced = _block(doc, e)
    doc.delete(e.index, e.end)
    doc.insert(e.index, list(block))
    return _finish(text, doc, where, Edit(doc.text(), e.index + 1, block[0] if block else "", previous=e.text,
                                          block=replaced))


def edited_line(before: str, after: str, entry: str | None, hint: int) -> int:
    """The 1-based line of entry ``entry`` in ``after`` among the lines an edit of ``before`` changed.

    An edit's line must come from the text it wrote, not from where its hunks were recorded or where
    the first byte differs: an exact undo also puts back the old ``updated:`` stamp (line 2), and lines
    added above since move everything. The lines changed outside front matter are diffed afresh; of the
    entries among them with ``entry``'s text (markers aside), the one nearest ``hint`` (the line the edit
    meant: an undone reinforcement changes the absorbing entry's marker and adds a line of the same
    words under it). Without such an entry: the first changed line outside front matter, else ``hint``.
    """
    spans = [(h.at, h.at + len(h.new)) for h in Patch.between(before, after, 0).hunks if not h.meta]
    if entry is not None:
        want = fold(strip(entry))
        found = [e.index + 1 for e in MdLines(after).entries
                 if fold(e.text) == want and any(lo < e.end and e.index < hi for lo, hi in spans)]
        if found:
            return min(found, key=lambda n: abs(n - hint))
    return spans[0][0] + 1 if spans else hint


def _block(doc: MdLines, e: Entry) -> tuple[str, ...]:
    return tuple(doc.lines[i][0] for i in range(e.index, e.end))


def _prefix(doc: MdLines, e: Entry) -> str:
    bom = "\ufeff" if e.index == 0 and doc.lines[0][0].startswith("\ufeff") else ""
    return bom + e.prefix


def _find(doc: MdLines, text: str, hint: int) -> Entry | None:
    """The entry whose folded text equals ``text``'s, nearest to 0-based line ``hint``."""
    want = fold(text)
    same = [e for e in doc.entries if fold(e.text) == want]
    return min(same, key=lambda e: abs(e.index - hint), default=None)


def _finish(before: str, doc: MdLines, where: str, edit: Edit) -> Edit:
    assert_user_blocks_unchanged(before, doc.text(), where)
    return edit


# -- front matter ---------------------------------------------------------------


def _front_matter(doc: MdLines) -> tuple[int, int] | None:
    """(first line inside, closing delimiter line) of YAML front matter, or None."""
    if doc.body_start < 2 or doc.content(0).rstrip() != "---":
        return None
    return 1, doc.body_start - 1


def _touch(doc: MdLines, now: datetime, drop: str | None = None) -> None:
    """Update ``updated:`` in place, and drop entry ``drop`` from an older memoryd's reinforcement mapping."""
    fm = _front_matter(doc)
    if fm is None:
        return
    lo, close = fm
    top = {m.re: (i, m) for i in range(lo, close) for m in (_UPDATED.match(doc.content(i)),
                                                            _REINFORCEMENT.match(doc.content(i))) if m}
    _drop_legacy(doc, top.get(_REINFORCEMENT), close, drop)
    if _UPDATED in top:
        i, m = top[_UPDATED]
        doc.replace_line(i, f"updated: {_stamp(now, m.group(1).strip())}")
    else:
        doc.insert(_front_matter_end(doc), [f"updated: {_stamp(now, None)}"])


def _legacy_count(doc: MdLines, key: str) -> int:
    """The count an older memoryd kept for entry ``key`` in the front-matter mapping (0 if none)."""
    fm = _front_matter(doc)
    if fm is None:
        return 0
    inside = False
    for i in range(*fm):
        c = doc.content(i)
        top = _REINFORCEMENT.match(c)
        if top is not None:
            inside = not top.group(1)
            continue
        child = _CHILD.match(c) if inside else None
        if child is None:
            inside = False
        elif child.group(1) == key:
            return int(child.group(2))
    return 0


def _front_matter_end(doc: MdLines) -> int:
    fm = _front_matter(MdLines(doc.text()))
    assert fm is not None
    return fm[1]


def _drop_legacy(doc: MdLines, found: tuple[int, re.Match[str]] | None, close: int, drop: str | None) -> None:
    """Remove key ``drop`` from a ``reinforcement:`` mapping (and the mapping once empty); a scalar
    (the seed's file-level counter) is left as it is."""
    if found is None or drop is None or found[1].group(1):
        return
    i = found[0]
    j = i + 1
    while j < close and (child := _CHILD.match(doc.content(j))):
        if child.group(1) == drop:
            doc.delete(j, j + 1)
            close -= 1
            continue
        j += 1
    if j == i + 1 and (j >= close or not doc.content(j)[:1].isspace()):
        doc.delete(i, i + 1)  # the mapping is empty now: drop its key too


def _stamp(now: datetime, previous: str | None) -> str:
    """``now`` as the previous value was written: a date stays a date, else ISO 8601 UTC seconds."""
    if previous is not None and _DATE_ONLY.match(previous):
        return now.date().isoformat()
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")
