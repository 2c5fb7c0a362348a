"""A Markdown file as exact lines, with the structure the writer needs.

The file is held as ``[content, terminator]`` pairs, so joining them gives back
the very same bytes — ``\\r\\n``, ``\\r``, a missing final newline, a BOM, CJK
text all survive. Edits are line-level inserts, replacements and deletions on
that list (:meth:`MdLines.insert`, :meth:`MdLines.delete`); nothing else is
ever re-serialised. New lines use the file's own line ending.

Structure comes from :func:`memoryd.indexer.markdown.outline.parse_outline` (front
matter, headings, code fences) and :mod:`memoryd.indexer.markdown.memblocks` (USER and MACHINE
blocks). *Entries* are list items outside code fences and USER blocks, with
their indented continuation lines; an entry's importance/reinforcement marker
(:mod:`memoryd.indexer.markdown.entrymeta`) is split off its text.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from memoryd.indexer.markdown.entrymeta import EntryMeta, split
from memoryd.indexer.markdown.memblocks import MACHINE_END, MACHINE_START, BlockError, user_spans
from memoryd.indexer.markdown.outline import parse_outline

ITEM = re.compile(r"^([ \t]{0,8}(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?)(\S.*)$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*(?:[ \t]#+[ \t]*)?$")
_BREAK = re.compile(r"\r\n|\n|\r")


def fold(text: str) -> str:
    """Case-, width- and punctuation-insensitive form (NFKC, lowercase, letters/digits/CJK only): what
    "the same entry" means when an edit finds its line again, a bank row is deduplicated or dedup
    compares two texts; here, below both the editor and dedup, so neither imports the other for it."""
    text = unicodedata.normalize("NFKC", text).lower()
    return "".join(ch for ch in text if ch.isalnum())


@dataclass(frozen=True)
class Entry:
    index: int  # 0-based line of the item
    end: int  # exclusive: the item's line plus its continuation lines
    prefix: str  # indentation, marker, spaces (and a task box)
    text: str  # the item's text on its first line, without its entry marker
    meta: EntryMeta | None = None  # the entry marker's content (markdown.entrymeta), None if it has none


@dataclass(frozen=True)
class Heading:
    index: int
    level: int
    title: str


class MdLines:
    """One file's lines and structure; mutate with :meth:`insert`/:meth:`delete`, then :meth:`text`."""

    def __init__(self, text: str) -> None:
        self.original = text
        self.lines: list[list[str]] = _split_keep(text)
        first_break = _BREAK.search(text)
        self.newline = first_break.group() if first_break else "\n"
        self._analyse(text)

    def _analyse(self, text: str) -> None:
        outline = parse_outline(text)
        self.body_start = outline.body_start
        self.fenced: set[int] = set()
        for a, b in outline.fence_ends.items():
            self.fenced.update(range(a, b + 1))
        self.user_lines = self._user_lines(text)
        self.headings = [h for h in (self._heading(i) for i in outline.heading_lines) if h is not None]
        self.machine = self._machine_lines()
        self.entries = self._entries()

    def text(self) -> str:
        return "".join(c + t for c, t in self.lines)

    # -- structure --------------------------------------------------------------

    def content(self, i: int) -> str:
        c = self.lines[i][0]
        return c[1:] if i == 0 and c.startswith("\ufeff") else c

    def _user_lines(self, text: str) -> set[int]:
        spans = user_spans(text)  # raises BlockError for unbalanced markers: never guess
        out: set[int] = set()
        pos = 0
        for i, (c, t) in enumerate(self.lines):
            end = pos + len(c) + len(t)
            if any(a < end and pos < b for a, b in spans):
                out.add(i)
            pos = end
        return out

    def _heading(self, i: int) -> Heading | None:
        if i in self.user_lines or i >= len(self.lines):
            return None
        m = _HEADING.match(self.content(i))
        return Heading(i, len(m.group(1)), (m.group(2) or "").strip()) if m else None

    def _machine_lines(self) -> tuple[int, int] | None:
        """(line of the START marker, line of the END marker), or None without a MACHINE block."""
        start = next((i for i, (c, _) in enumerate(self.lines) if MACHINE_START in c), None)
        end = next((i for i, (c, _) in enumerate(self.lines) if MACHINE_END in c), None)
        if start is None and end is None:
            return None
        if start is None or end is None or end <= start:
            raise BlockError("MACHINE block markers are missing, reversed or on one line; fix them by hand")
        return start, end

    def _entries(self) -> list[Entry]:
        out = []
        n = len(self.lines)
        i = self.body_start
        while i < n:
            m = ITEM.match(self.content(i)) if self._editable(i) else None
            if m is None:
                i += 1
                continue
            indent = len(m.group(1)) - len(m.group(1).lstrip())
            end = i + 1
            while end < n and self._continues(end, indent):
                end += 1
            text, meta = split(m.group(2))
            out.append(Entry(i, end, m.group(1), text, meta))
            i = end
        return out

    def _editable(self, i: int) -> bool:
        return i >= self.body_start and i not in self.fenced and i not in self.user_lines

    def editable(self, i: int) -> bool:
        """Whether line ``i`` is body text memoryd may edit (not front matter, a code fence or a USER block)."""
        return self._editable(i)

    def _continues(self, i: int, indent: int) -> bool:
        c = self.content(i)
        stripped = c.lstrip()
        return (self._editable(i) and bool(stripped) and len(c) - len(stripped) > indent
                and not ITEM.match(c) and not _HEADING.match(c))

    def region(self) -> tuple[int, int]:
        """Lines memoryd may add to: inside the MACHINE block if there is one, else the whole body."""
        if self.machine is not None:
            return self.machine[0] + 1, self.machine[1]
        return self.body_start, len(self.lines)

    def section(self, title: str) -> tuple[Heading, int] | None:
        """The heading titled ``title`` (case-insensitive) in the region, and where its section ends."""
        lo, hi = self.region()
        want = title.casefold().strip()
        for h in self.headings:
            if lo <= h.index < hi and h.title.casefold() == want:
                return h, self._section_end(h, hi)
        return None

    def _section_end(self, h: Heading, hi: int) -> int:
        for i in range(h.index + 1, hi):
            if i in self.user_lines:
                return i
            other = next((x for x in self.headings if x.index == i), None)
            if other is not None and other.level <= h.level:
                return i
        return hi

    def blank(self, i: int) -> bool:
        return 0 <= i < len(self.lines) and not self.lines[i][0].strip()

    # -- edits --------------------------------------------------------------------

    def insert(self, at: int, contents: list[str]) -> None:
        """Insert lines before line ``at`` (``len`` = at the end), keeping a missing final newline missing."""
        new = [[c, self.newline] for c in contents]
        if not new:
            return
        if at == len(self.lines) and self.lines and self.lines[-1][1] == "":
            self.lines[-1][1] = self.newline
            new[-1][1] = ""
        self.lines[at:at] = new

    def delete(self, a: int, b: int) -> None:
        """Delete lines ``[a, b)``, keeping a missing final newline missing."""
        if b >= len(self.lines) and self.lines and self.lines[-1][1] == "" and a > 0:
            self.lines[a - 1][1] = ""
        del self.lines[a:b]

    def replace_line(self, i: int, content: str) -> None:
        self.lines[i][0] = content


def _split_keep(text: str) -> list[list[str]]:
    out: list[list[str]] = []
    pos = 0
    for m in _BREAK.finditer(text):
        out.append([text[pos : m.start()], m.group()])
        pos = m.end()
    if pos < len(text):
        out.append([text[pos:], ""])
    return out
