"""``update_section``'s edit: replace the body of one named section, and put it back (undo).

An agent keeps some sections current rather than appending to them ("Current
Focus", "Next Steps" …): appending there leaves stale lines behind. Only the
sections named in ``write.sections`` may be replaced (the caller checks the
list: :func:`check_allowed`), only inside the region memoryd writes (the MACHINE
block when the file has one), and never a section that holds a USER block: the
user's text is not ours to drop, even when it sits under a heading we own.

The body is everything between the heading and the next heading of the same or
a higher level (or the end of the region). The heading line itself, and every
line outside the body, stay byte-identical; :func:`memoryd.indexer.markdown.memblocks.assert_user_blocks_unchanged`
proves it for the USER blocks before anything is written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memoryd.indexer.errors import EntryNotFound, WriteConflict, WriteError
from memoryd.indexer.markdown.mdlines import Heading, MdLines
from memoryd.indexer.markdown.memblocks import (
    MACHINE_END,
    MACHINE_START,
    USER_END,
    USER_START,
    assert_user_blocks_unchanged,
)

_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]|$)")
_MARKERS = (MACHINE_START, MACHINE_END, USER_START, USER_END)


class SectionRefused(WriteError):
    """The section may not be replaced: not on ``write.sections``, holds a USER block, or the body is unsafe.

    ``rule`` names which: ``write.sections``, ``user_block`` or ``body``.
    """

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass(frozen=True)
class SectionEdit:
    """The new file text, the 1-based line of the heading, and the body's lines before and after."""

    text: str
    line: int
    old: tuple[str, ...]
    new: tuple[str, ...]


def check_allowed(title: str, allowed: Sequence[str]) -> str:
    """``title`` if it is on the whitelist (case-insensitive); else :class:`SectionRefused`."""
    want = title.strip().casefold()
    if not want or want not in {a.strip().casefold() for a in allowed}:
        raise SectionRefused(f"section {title[:80]!r} is not writable; write.sections allows "
                             f"{', '.join(repr(a) for a in allowed) or 'none'}", "write.sections")
    return title.strip()


def body_lines(content: str, level: int) -> list[str]:
    """The section body to write for ``content``: its lines, trailing blank lines dropped.

    Refuses (:class:`SectionRefused`, rule ``body``) block markers, and headings of the
    section's level or higher, which would end the section early and orphan what follows.
    """
    lines = content.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    for line in lines:
        if any(m in line for m in _MARKERS):
            raise SectionRefused("the new body may not contain MACHINE or USER block markers", "body")
        m = _HEADING.match(line)
        if m and len(m.group(1)) <= level:
            raise SectionRefused(f"the new body may not contain a level-{len(m.group(1))} heading: it would end "
                                 f"the level-{level} section", "body")
    return lines


def replace_body(text: str, title: str, content: str, where: str) -> SectionEdit:
    """Put ``content`` as the body of section ``title``. Raises EntryNotFound (no such section),
    SectionRefused (a USER block inside it, or an unsafe body)."""
    doc = MdLines(text)
    heading, end = _find(doc, title, where)
    new = body_lines(content, heading.level)
    old = _lines(doc, heading.index + 1, end)
    block = ["", *new] if new else []
    if end < len(doc.lines) and block:
        block.append("")
    doc.delete(heading.index + 1, end)
    doc.insert(heading.index + 1, block)
    after = doc.text()
    assert_user_blocks_unchanged(text, after, where)
    return SectionEdit(after, heading.index + 1, old, tuple(block))


def restore_body(text: str, title: str, expect: Sequence[str], old: Sequence[str], where: str) -> SectionEdit:
    """Undo :func:`replace_body`: put ``old`` back, but only while the body is still ``expect``
    (what the update wrote); a body edited since is the user's and raises WriteConflict."""
    doc = MdLines(text)
    heading, end = _find(doc, title, where)
    current = _lines(doc, heading.index + 1, end)
    if list(current) != list(expect):
        raise WriteConflict(f"{where}: section {title!r} changed after the update; nothing was restored "
                            "(the old body is in the history)")
    doc.delete(heading.index + 1, end)
    doc.insert(heading.index + 1, list(old))
    after = doc.text()
    assert_user_blocks_unchanged(text, after, where)
    return SectionEdit(after, heading.index + 1, current, tuple(old))


def _find(doc: MdLines, title: str, where: str) -> tuple[Heading, int]:
    """The section's heading and the end of its body; refuses a section that holds a USER block."""
    found = doc.section(title)
    if found is None:
        raise EntryNotFound(f"{where}: no section {title[:80]!r} where memoryd writes (outside USER blocks, "
                            "inside the MACHINE block if there is one)")
    heading, _ = found
    end = _logical_end(doc, heading)
    if any(heading.index < i < end for i in doc.user_lines):
        raise SectionRefused(f"{where}: section {title[:80]!r} holds a USER block; memoryd never replaces it",
                             "user_block")
    return heading, end


def _logical_end(doc: MdLines, h: Heading) -> int:
    """Where the section ends if USER blocks are read through: the next heading of its level or
    higher, or the end of the region (a USER block does not end a section here)."""
    hi = doc.region()[1]
    return next((x.index for x in doc.headings if h.index < x.index < hi and x.level <= h.level), hi)


def _lines(doc: MdLines, a: int, b: int) -> tuple[str, ...]:
    return tuple(doc.lines[i][0] for i in range(a, b))
