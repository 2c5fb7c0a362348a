"""Mapping the old entry files onto v7.1 sections (the migration flow of docs/memory-bank.md, step 2).

``brief.md`` becomes Project Snapshot, ``active.md`` Current Focus, and the
decisions in ``patterns.md`` become Decision Highlights rows (a summary:
``patterns.md`` itself moves to ``details/``). ``_index.md`` is not migrated:
its routing is archived as "Legacy Routing (Topic)" in ``legacy.md``. Bodies
are re-used verbatim except that their title goes and their headings move one
level down, so they nest under the new ``## `` section instead of ending it.
"""

from __future__ import annotations

import re

from memoryd.indexer.bank.sections import demote_headings, lines_outside_fences, strip_title_and_markers
from memoryd.indexer.markdown.memblocks import MACHINE_END, MACHINE_START, USER_END, USER_START

MAX_HIGHLIGHTS = 20  # the v7.1 template keeps Decision Highlights within 10-20 rows
_DATE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")
_ROW = re.compile(r"^\s*\|(.+)\|\s*$")
_RULE = re.compile(r"^\s*\|?\s*:?-{2,}")
_BOLD_ITEM = re.compile(r"^\s*[-*]\s+\*\*(.+?)\*\*\s*[:：—-]?\s*(.*)$")
_HEADER_KEYS = {
    "decision": ("decision", "决策", "pattern", "模式", "choice"),
    "date": ("date", "日期", "when"),
    "why": ("reason", "why", "原因", "constraint", "约束", "impact", "影响"),
}


def section_body(text: str) -> str:
    """An old file's body ready to sit under a ``## `` heading (empty if nothing is left)."""
    return demote_headings(strip_title_and_markers(text)).strip("\n")


def decision_rows(patterns: str, pointer: str) -> list[str]:
    """Decision Highlights table rows from ``patterns.md`` text: its first table, else bold list items,
    else its ``##``/``###`` headings; at most :data:`MAX_HIGHLIGHTS`. ``pointer`` is the details path."""
    found = _from_table(patterns) or _from_items(patterns) or _from_headings(patterns)
    return [f"| {_cell(d)} | {_cell(date) or '–'} | {_cell(why) or f'see `{pointer}`'} |"
            for d, date, why in found[:MAX_HIGHLIGHTS]]


def _lines(text: str) -> list[str]:
    return [line.rstrip("\n") for _, line in lines_outside_fences(text)
            if line.strip() not in (MACHINE_START, MACHINE_END, USER_START, USER_END)]


def _from_table(text: str) -> list[tuple[str, str, str]]:
    rows: list[list[str]] = []
    for line in _lines(text):
        m = _ROW.match(line)
        if m is None:
            if rows:
                break
            continue
        if not _RULE.match(line):
            rows.append([c.strip() for c in m.group(1).split("|")])
    if len(rows) < 2:
        return []
    header, body = [h.lower() for h in rows[0]], rows[1:]
    col = {key: next((i for i, h in enumerate(header) if any(k in h for k in keys)), None)
           for key, keys in _HEADER_KEYS.items()}
    dec = col["decision"] if col["decision"] is not None else next(
        (i for i, c in enumerate(body[0]) if not _DATE.match(c)), 0)
    out = []
    for r in body:
        def at(i: int | None, r: list[str] = r) -> str:
            return r[i] if i is not None and i < len(r) else ""
        if at(dec):
            out.append((at(dec), at(col["date"]), at(col["why"])))
    return out


def _from_items(text: str) -> list[tuple[str, str, str]]:
    return [(m.group(1), "", m.group(2)) for line in _lines(text) if (m := _BOLD_ITEM.match(line))]


def _from_headings(text: str) -> list[tuple[str, str, str]]:
    return [(line.lstrip("#").strip(), "", "") for line in _lines(text) if line.startswith(("## ", "### "))]


def _cell(s: str) -> str:
    s = " ".join(s.split()).replace("|", "\\|")
    return s if len(s) <= 160 else s[:159].rstrip() + "…"
