"""Restoring exported entries to their own file and section: what ``import`` does with a line that has a ``path``.

An export line says where an entry was (``path``, ``section``, ``start_line``) and
what its lines were (``lines``). A restore puts those lines back there, without the
router (the file is named) and without dedup's embedding (the only question is
"is this entry already in that file?", answered by its text):

* an entry of the file with the same text → ``unchanged``: nothing is written, no
  count is bumped, so importing an export into the store it came from changes no byte
  and a re-run after an interruption adds nothing twice;
* else the lines go back inside the named section (the heading with that title; no
  section: above the first heading), at ``start_line`` when that place lies inside
  the section and outside code fences, USER blocks and other entries — which is where
  it was, when the file is otherwise as it was (after a ``clear``, say) — else after the
  section's last entry; a section the file lacks is added at the end of the file.

:func:`place` works on all the restores of one file at once: the file is parsed once
and rebuilt once (a 2,000-entry file costs one parse, not one per entry), and it is
the same pure function for a dry run (on the text read now) and a real run (inside
the writer's conditional write, re-applied to the new text if the file changed).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memoryd.indexer.access import REMEMBER, Session, authorize, check_relative, namespace_of
from memoryd.indexer.errors import BadTarget, WriteError
from memoryd.indexer.markdown import mdedit
from memoryd.indexer.markdown.entrymeta import EntryMeta, split
from memoryd.indexer.markdown.mdlines import ITEM, MdLines
from memoryd.indexer.markdown.memblocks import USER_END, assert_user_blocks_unchanged
from memoryd.indexer.write.transfer import ImportItem

RESTORED, UNCHANGED = "restored", "unchanged"


@dataclass(frozen=True)
class Restore:
    """One entry to put back: the file, the section (None: above the first heading), where it began
    (0-based, None: unknown), its exact lines (no terminators) and its text (what identifies it)."""

    path: str
    section: str | None
    hint: int | None
    block: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class Placed:
    decision: str  # RESTORED | UNCHANGED
    line: int  # 1-based line of the entry in the new text


class BadEntry(ValueError):
    """An import line's ``lines``/``text`` that are not one memory entry (the message says why)."""


def entry_block(text: str, lines: tuple[str, ...] | None, importance: int | None,
                reinforcements: int | None) -> tuple[str, ...]:
    """The lines a restore writes: ``lines`` checked to be exactly one entry whose text is ``text``;
    without them, ``- text`` and a marker for ``importance`` / ``reinforcements``. Raises BadEntry."""
    if lines is None:
        if "\n" in text or "\r" in text:
            raise BadEntry("'text' of a restore spans several lines; give them as 'lines'")
        lines = (f"- {text}{EntryMeta(importance, reinforcements or 0).render()}",)
    if any("\n" in x or "\r" in x for x in lines):
        raise BadEntry("each of 'lines' must be one line (no line breaks inside)")
    if len(lines) == 1 and (m := ITEM.match(lines[0])) is not None:  # the usual entry: one line, no parse
        if split(m.group(2))[0] != text:
            raise BadEntry("'lines' hold another entry than 'text'")
        return tuple(lines)
    try:
        found = MdLines("\n".join(lines) + "\n").entries
    except ValueError as exc:
        raise BadEntry(f"'lines' are not one entry ({exc})") from None
    if len(found) != 1 or found[0].index != 0 or found[0].end != len(lines):
        raise BadEntry(f"'lines' are not exactly one list entry ({len(found)} entries in {len(lines)} lines)")
    if found[0].text != text:
        raise BadEntry("'lines' hold another entry than 'text'")
    return tuple(lines)


def check_restore(item: ImportItem, session: Session, max_bytes: int) -> Restore | dict[str, Any]:
    """An import line with a ``path`` as a :class:`Restore`, or its report line: the same refusals as any
    write — the path guard (relative, ``.md``; links and the root are checked where the file is), the
    session's permission on the path's namespace, the size limit. The privacy filter runs over every line
    a restore writes, when the plan finds it must (:func:`memoryd.indexer.write.importer.plan`)."""
    assert item.path is not None
    n = item.line
    try:
        rel = check_relative(item.path)
        if any(part.startswith(".") for part in rel.split("/")):
            raise BadTarget(f"{rel[:200]!r}: a hidden file or folder; memoryd neither indexes nor exports those, "
                            "so it does not restore into them")
        ns = namespace_of(rel)
        if item.namespace is not None and item.namespace != str(ns):
            return {"input_line": n, "decision": "invalid", "reason": f"'namespace' {item.namespace[:60]!r} is not "
                    f"the namespace of {rel[:200]!r} ({ns})"}
        authorize(session, REMEMBER, ns)
    except WriteError as exc:
        return {"input_line": n, "decision": "rejected", "stage": "path", "reason": str(exc)}
    if len(item.text.encode("utf-8", "surrogatepass")) > max_bytes:
        return {"input_line": n, "decision": "rejected", "stage": "limit", "rule": "write.max_content_bytes",
                "reason": f"over {max_bytes} bytes"}
    try:
        block = entry_block(item.text, item.lines, item.importance, item.reinforcements)
    except BadEntry as exc:
        return {"input_line": n, "decision": "invalid", "reason": str(exc)}
    hint = item.start_line - 1 if item.start_line else None
    return Restore(rel, item.section, hint, block, item.text)


def place(text: str | None, items: list[Restore], now: datetime, where: str) -> tuple[str | None, list[Placed]]:
    """``text`` with every entry of ``items`` that it lacks put back; the new text (None: nothing to
    write) and, per item, what happened and on which line. Raises BlockError (broken block markers)."""
    base = text if text is not None else mdedit.new_file(now)
    doc = MdLines(base)
    have = {e.text for e in doc.entries}
    starts = [e.index for e in doc.entries]
    ins: list[tuple[int, int, tuple[str, ...]]] = []  # (before original line, order, lines)
    tail: dict[str, list[tuple[int, tuple[str, ...]]]] = {}  # sections the file lacks: added at its end
    out: list[tuple[str, tuple[str, int, int] | None]] = []
    for seq, item in enumerate(items):
        if item.text in have:
            out.append((UNCHANGED, None))
            continue
        have.add(item.text)
        span = _span(doc, item.section, item.hint)
        if span is None:
            tail.setdefault(item.section or "", []).append((seq, item.block))
            out.append((RESTORED, ("tail", seq, 0)))
            continue
        at = _spot(doc, starts, span, _original(ins, item.hint) if item.hint is not None else None)
        bisect.insort(ins, (at, seq, item.block))
        out.append((RESTORED, ("at", seq, at)))
    if not ins and not tail:
        found = _lines_by_text(doc)
        return None, [Placed(UNCHANGED, found.get(item.text, 0)) for item in items]
    new, lines = _rebuild(doc, ins, tail)
    doc = MdLines(new)
    grew = len(doc.lines)
    mdedit._touch(doc, now)  # the front matter's updated:, as every write does
    shift = len(doc.lines) - grew
    final = doc.text()
    assert_user_blocks_unchanged(base, final, where)
    found = _lines_by_text(doc)
    return final, [Placed(d, lines[ref[1]] + shift if ref is not None else found.get(item.text, 0))
                   for (d, ref), item in zip(out, items, strict=True)]


def _lines_by_text(doc: MdLines) -> dict[str, int]:
    """Each entry text's first 1-based line (where an ``unchanged`` entry is)."""
    out: dict[str, int] = {}
    for e in doc.entries:
        out.setdefault(e.text, e.index + 1)
    return out


def _span(doc: MdLines, section: str | None, hint: int | None) -> tuple[int, int, int] | None:
    """(first line, end, heading line or -1) of the section entries go in; None: the file lacks it."""
    first = min((h.index for h in doc.headings), default=len(doc.lines))
    if section is None:
        return doc.body_start, first, -1
    want = section.casefold().strip()
    same = [h for h in doc.headings if h.title.casefold() == want]
    if not same:
        return None
    h = min(same, key=lambda x: abs(x.index - (hint if hint is not None else x.index)))
    end = next((x.index for x in doc.headings if x.index > h.index and x.level <= h.level), len(doc.lines))
    return h.index + 1, end, h.index


def _original(ins: list[tuple[int, int, tuple[str, ...]]], hint: int) -> int:
    """The line of the file as read before which an entry that was on line ``hint`` of the file as it will
    be goes: the blocks restored above it so far are not in the file as read."""
    acc, last = 0, 0
    for at, _seq, block in ins:
        if at + acc >= hint:
            break
        acc += len(block)
        last = at
    return max(hint - acc, last)


def _spot(doc: MdLines, starts: list[int], span: tuple[int, int, int], want: int | None) -> int:
    """Where in ``span`` an entry goes: ``want`` when that is a free place there, else after the
    section's last entry (or below its heading, past one blank line)."""
    lo, hi, heading = span
    if want is not None and lo <= want <= hi and _free(doc, starts, want):
        return want
    inside = [e for e in doc.entries if lo <= e.index < hi]
    if inside:
        return inside[-1].end
    at = lo
    if heading >= 0 and doc.blank(at) and at < hi:
        at += 1
    return at


def _free(doc: MdLines, starts: list[int], at: int) -> bool:
    """Whether lines may be inserted before line ``at``: not in the front matter, inside a code fence or a
    USER block (two of them back to back have a free place between them), nor between an entry and its
    continuation lines."""
    if at < doc.body_start:
        return False
    if at - 1 in doc.fenced and at in doc.fenced and not _fence_closes(doc, at - 1):
        return False
    if at - 1 in doc.user_lines and at in doc.user_lines and USER_END not in doc.lines[at - 1][0]:
        return False
    i = bisect.bisect_left(starts, at) - 1
    return not (i >= 0 and doc.entries[i].index < at < doc.entries[i].end)


def _fence_closes(doc: MdLines, i: int) -> bool:
    """Whether fenced line ``i`` closes its fence (an odd count of fence lines from the fence's start)."""
    j = i
    while j - 1 in doc.fenced:
        j -= 1
    fence = [k for k in range(j, i + 1) if doc.content(k).lstrip().startswith(("```", "~~~"))]
    return len(fence) % 2 == 0 and bool(fence) and fence[-1] == i


def _rebuild(doc: MdLines, ins: list[tuple[int, int, tuple[str, ...]]],
             tail: dict[str, list[tuple[int, tuple[str, ...]]]]) -> tuple[str, dict[int, int]]:
    """The file with the inserted blocks and the new sections; and each item's 1-based line."""
    nl = doc.newline
    parts: list[str] = []
    lines: dict[int, int] = {}
    row, j = 0, 0
    for i, (content, term) in enumerate([*doc.lines, ["", ""]]):
        while j < len(ins) and ins[j][0] == i:
            _at, seq, block = ins[j]
            if i == len(doc.lines) and doc.lines and not doc.lines[-1][1]:
                parts.append(nl)  # the file lacked a final newline: the entry starts a line of its own
            lines[seq] = row + 1
            parts += [x + nl for x in block]
            row, j = row + len(block), j + 1
        if i < len(doc.lines):
            parts.append(content + term)
            row += 1
    if doc.lines and not doc.lines[-1][1] and parts and parts[-1] != doc.lines[-1][0]:
        parts[-1] = parts[-1][: -len(nl)]  # the file had no final newline: it still has none
    for title, blocks in tail.items():
        if parts and not parts[-1].endswith(("\n", "\r")):
            parts.append(nl)
        head = [f"## {title}", ""] if title else []
        if parts and parts[-1].strip():
            head.insert(0, "")
        parts += [x + nl for x in head]
        row += len(head)
        for seq, block in blocks:
            lines[seq] = row + 1
            parts += [x + nl for x in block]
            row += len(block)
    return "".join(parts), lines
