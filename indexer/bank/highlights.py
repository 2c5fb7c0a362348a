"""``remember`` into a Memory Bank's Decision Highlights table, with its cap.

Decision Highlights keeps only decisions that still bind (v7.1: 10–20 rows);
the full history lives in ``details/patterns.md``. A remembered decision is
added as a row ``| decision | date | — |`` at the end of the table (inside the
MACHINE block, never in a USER block). Once the table holds more than
:data:`MAX_ROWS` rows, the oldest rows (the top ones: rows are added at the
bottom) move to ``details/patterns.md`` — rows of its Technical Decisions
table, or list items under :data:`HISTORY_SECTION` in a file without one —
so the table stays at 20 and nothing is lost.

Seed 002 sends every technical decision to both places ("技术决策 → MEMORY.md →
Decision Highlights + details/patterns.md"): the writer adds the row to the
table and to ``patterns.md`` in one write-ahead edit of the two files
(:meth:`memoryd.indexer.write.writer.MemoryWriter._write_all`), ``patterns.md``
first; rows past the cap leave the table in that same edit. All of these are
pure text edits (:class:`~memoryd.indexer.markdown.mdedit.Edit`).
"""

from __future__ import annotations

import re
from datetime import datetime

from memoryd.indexer.bank.templates import HIGHLIGHTS, HIGHLIGHTS_HEADER
from memoryd.indexer.markdown import mdedit
from memoryd.indexer.markdown.mdlines import MdLines, fold
from memoryd.indexer.markdown.memblocks import BlockError, assert_user_blocks_unchanged

MAX_ROWS = 20
HISTORY_SECTION = "Decision history (moved from Decision Highlights)"
DECISIONS = ("## Technical Decisions",)  # details/patterns.md's table (indexer/bank/templates.py)
_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}")


def rows(text: str) -> list[tuple[int, str]]:
    """(0-based line, row) of the data rows of the Decision Highlights table; [] without the section."""
    doc = MdLines(text)
    found = _section(doc, HIGHLIGHTS)
    return [] if found is None else _data_rows(doc, *found)


def first_cell(row: str) -> str:
    """A row's decision text (its first cell)."""
    return _cells(row)[0]


def has_decision(text: str, decision: str) -> int | None:
    """1-based line of a row stating ``decision`` already (compared folded), else None."""
    want = fold(decision)
    return next((i + 1 for i, r in rows(text) if fold(first_cell(r)) == want), None)


def add_row(text: str, decision: str, now: datetime, where: str) -> mdedit.Edit:
    """``text`` with a row for ``decision`` at the end of the table (a table is started when missing).

    Raises :class:`BlockError` when the file has no Decision Highlights section inside its MACHINE block.
    """
    row = f"| {_cell(decision)} | {now.date().isoformat()} | — |"
    edit = _append_rows(text, HIGHLIGHTS, [row], HIGHLIGHTS_HEADER, where)
    if edit is None:
        raise BlockError(f"{where}: no Decision Highlights section inside the MACHINE block; "
                         "run 'memoryd bank apply' to add it")
    return mdedit.Edit(edit.text, edit.line, decision)


def overflow(text: str) -> list[str]:
    """The rows beyond :data:`MAX_ROWS`, oldest first: the ones that move to ``details/patterns.md``."""
    data = rows(text)
    return [r for _, r in data[: max(0, len(data) - MAX_ROWS)]]


def drop_rows(text: str, moved: list[str], where: str) -> mdedit.Edit:
    """``text`` without the table rows in ``moved`` (rows already copied to ``details/patterns.md``)."""
    doc = MdLines(text)
    gone = set(moved)
    for i, r in reversed(rows(text)):
        if r in gone:
            doc.delete(i, i + 1)
    return _finish(text, doc, where, mdedit.Edit(doc.text(), 1, ""))


def history_item(row: str) -> str:
    """A moved row as a ``patterns.md`` list entry: ``decision (date) — constraint``."""
    decision, date, constraint = _cells(row)
    return decision + (f" ({date})" if date else "") + (f" — {constraint}" if constraint else "")


def add_history(text: str | None, moved: list[str], now: datetime, where: str) -> mdedit.Edit | None:
    """``patterns.md`` with the moved rows added (those not there yet); None when nothing is new.

    They become rows of its Technical Decisions table (``| Date | Decision | Reason |``, the v7.1
    ``details/patterns.md``) when it has one, else list items under :data:`HISTORY_SECTION`.
    """
    base = text if text is not None else "# Patterns & Decisions\n"
    present = {fold(t) for _, t in mdedit.entries(base)} | {fold(_cells(r)[1]) for r in _table_rows(base, DECISIONS)}
    fresh = [r for r in moved if fold(_cells(r)[0]) not in present and fold(history_item(r)) not in present]
    if not fresh:
        return None
    as_rows = [f"| {d or '—'} | {_cell(x)} | {c or '—'} |" for x, d, c in map(_cells, fresh)]
    edit = _append_rows(base, DECISIONS, as_rows, None, where)
    if edit is not None:
        return edit
    for item in map(history_item, fresh):
        edit = mdedit.append(edit.text if edit else base, HISTORY_SECTION, 2, item, now, where)
    return edit


def history_line(text: str, decision: str) -> int | None:
    """1-based line of ``decision`` in ``patterns.md``: a Technical Decisions row, or a history list item."""
    want = fold(decision)
    doc = MdLines(text)
    found = _section(doc, DECISIONS)
    if found is not None:
        for i, r in _data_rows(doc, *found):
            if fold(_cells(r)[1]) == want:
                return i + 1
    for line, item in mdedit.entries(text):
        if fold(item).startswith(want):
            return line
    return None


def _cells(row: str) -> tuple[str, str, str]:
    """(decision, date, constraint) of a Decision Highlights row; "—" cells read as empty."""
    cells = [c.strip() for c in row.strip().strip("|").split("|")] + ["", ""]
    decision, date, constraint = cells[0], cells[1], cells[2]
    return decision, "" if date == "—" else date, "" if constraint == "—" else constraint


def _cell(text: str) -> str:
    return text.replace("|", "/")


def _table_rows(text: str, names: tuple[str, ...]) -> list[str]:
    doc = MdLines(text)
    found = _section(doc, names)
    return [] if found is None else [r for _, r in _data_rows(doc, *found)]


def _append_rows(text: str, names: tuple[str, ...], new: list[str], header: str | None,
                 where: str) -> mdedit.Edit | None:
    """``new`` rows after the table of section ``names``; None without the section, or (``header``
    None) without a table. With ``header``, a missing table is started at the section's end."""
    doc = MdLines(text)
    found = _section(doc, names)
    if found is None:
        return None
    last = _last_table_line(doc, *found)
    if last is not None:
        at, block = last + 1, list(new)
    elif header is None:
        return None
    else:
        at = found[1]
        while at - 1 > found[0] and doc.blank(at - 1):
            at -= 1
        block = ["", *header.splitlines(), *new]
        if at < len(doc.lines) and not doc.blank(at):
            block.append("")
    doc.insert(at, block)
    return _finish(text, doc, where, mdedit.Edit(doc.text(), at + block.index(new[0]) + 1, new[0]))


def _last_table_line(doc: MdLines, lo: int, hi: int) -> int | None:
    """The last line of the section's table once its separator is seen (header-only tables count)."""
    last, seen = None, False
    for i in range(lo, hi):
        c = doc.content(i)
        if i in doc.user_lines or not c.lstrip().startswith("|"):
            continue
        seen = seen or bool(_SEPARATOR.match(c))
        if seen:
            last = i
    return last


def _data_rows(doc: MdLines, lo: int, hi: int) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    seen_separator = False
    for i in range(lo, hi):
        c = doc.content(i)
        if i in doc.user_lines or not c.lstrip().startswith("|"):
            continue
        if _SEPARATOR.match(c):
            seen_separator = True
        elif seen_separator:
            out.append((i, c))
    return out


def _section(doc: MdLines, names: tuple[str, ...]) -> tuple[int, int] | None:
    """(first line after the heading, end) of the first section called one of ``names`` in the writable region."""
    for name in names:
        found = doc.section(name.removeprefix("## "))
        if found is not None:
            return found[0].index + 1, found[1]
    return None


def _finish(before: str, doc: MdLines, where: str, edit: mdedit.Edit) -> mdedit.Edit:
    assert_user_blocks_unchanged(before, doc.text(), where)
    return edit
