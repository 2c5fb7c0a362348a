"""The Markdown structure the chunker needs, read line by line.

The chunker only has to know three things about a file: which lines belong to
YAML front matter (kept out of chunks), which heading path is in force at a line,
and how good a place the start of each line is to begin a window (its boundary
*strength*). A line scan answers all three without a full CommonMark parse, which
keeps a 20,000-line file to a few tens of milliseconds.

It also cuts a line too long for one window into pieces (``split_long_texts``),
since where a line may be cut is a question of text structure too.

Line indices here are 0-based positions in the file as it is on disk (front
matter included); the chunker adds 1 for its 1-based spans. Line breaks are
``\\n``, ``\\r\\n`` and a lone ``\\r`` (Python's universal newlines, so line numbers
agree with ``Path.read_text()``); no ``\\r`` is left in a line.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from memoryd.indexer.types import TokenCounter

# Boundary strength before a line: higher is a better place to start a window.
NONE = 0  # blank, or inside a fenced code block: never a window edge
LINE = 1  # a line break inside a paragraph
SENTENCE = 2  # the previous line ended a sentence
BLOCK = 3  # after a blank line, a heading or a code fence; a list item; a fence opener
HEADING = 4  # a heading: ATX (``# Title``) or Setext (``Title`` underlined by ``===`` or ``---``)

_HEADING = re.compile(r" {0,3}(#{1,6})(?:[ \t]+|$)(.*)")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t])#+[ \t]*$")
_SETEXT = re.compile(r" {0,3}(=+|-+)[ \t]*$")
# A line that cannot be a Setext title: a quote, a list item, or indented code.
_NOT_PARAGRAPH = re.compile(r" {0,3}(?:>|[-*+](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$))| {4}|\t")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+]|\d{1,9}[.)])(?:[ \t]|$)")
# A sentence end at the end of a line, closing quotes/brackets allowed after it.
_SENTENCE_END = re.compile(r"(?:[.!?][\"'”’)\]]*|[。！？][」』”’）)]*)[ \t]*$")
_FRONT_MATTER_CLOSE = ("---", "...")


@dataclass(frozen=True)
class Outline:
    """A file's lines with their structure; see the module docstring for indices.

    ``strengths[i]`` is the boundary strength before line ``i`` (``NONE`` for
    blank lines, front matter and the inside of code fences). ``fence_ends`` maps
    the opening line of every *closed* code fence to its closing line.
    """

    lines: list[str]
    body_start: int
    front_matter: str
    strengths: list[int]
    fence_ends: dict[int, int]
    heading_lines: list[int]
    heading_paths: list[str]
    warnings: list[str]

    def heading_at(self, index: int) -> str:
        """The heading path (`` > ``-joined) in force at line ``index``; "" before any heading."""
        k = bisect_right(self.heading_lines, index) - 1
        return self.heading_paths[k] if k >= 0 else ""

    def section_start(self, index: int) -> int:
        """The line of the heading in force at ``index`` (the body start when there is none)."""
        k = bisect_right(self.heading_lines, index) - 1
        return self.heading_lines[k] if k >= 0 else self.body_start


def split_lines(text: str) -> list[str]:
    """The file's lines without terminators (a leading BOM dropped)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.split("\n")


def parse_outline(text: str) -> Outline:
    """Split ``text`` into lines and read its structure. Never raises; odd input
    (an unclosed fence or front matter) is read as plain text and noted in
    ``Outline.warnings``."""
    lines = split_lines(text)
    warnings: list[str] = []
    body_start, front_matter = _front_matter(lines, warnings)
    fence_ends = _match_fences(lines, body_start, warnings)
    strengths, heading_lines, heading_paths = _scan(lines, body_start, fence_ends)
    return Outline(
        lines, body_start, front_matter, strengths, fence_ends, heading_lines, heading_paths, warnings
    )


def _front_matter(lines: list[str], warnings: list[str]) -> tuple[int, str]:
    """(first body line, YAML text between the delimiters) for a file opening with ``---``."""
    if not lines or lines[0].rstrip() != "---":
        return 0, ""
    for j in range(1, len(lines)):
        if lines[j].rstrip() in _FRONT_MATTER_CLOSE:
            return j + 1, "\n".join(lines[1:j])
    warnings.append("line 1: front matter opened by '---' is never closed; read as text")
    return 0, ""


def _fence_candidates(lines: list[str], start: int) -> list[tuple[int, str, int, bool]]:
    """(line, fence char, run length, can close) for every line that looks like a fence."""
    found: list[tuple[int, str, int, bool]] = []
    for i in range(start, len(lines)):
        line = lines[i]
        head = line[:6]  # a fence is indented by at most 3 spaces
        if "```" not in head and "~~~" not in head:
            continue
        m = _FENCE.match(line)
        if m is None or (m.group(1)[0] == "`" and "`" in m.group(2)):
            continue
        found.append((i, m.group(1)[0], len(m.group(1)), not m.group(2).strip()))
    return found


def _match_fences(lines: list[str], start: int, warnings: list[str]) -> dict[int, int]:
    """Pair fence openers with closers (same char, run at least as long, nothing after).

    An opener with no closer anywhere after it is read as text (a warning), so
    that one stray fence does not swallow the rest of the file. The suffix maxima
    make that test O(1), keeping the whole pass linear even on hostile input.
    """
    cands = _fence_candidates(lines, start)
    longest_after = {"`": [0] * (len(cands) + 1), "~": [0] * (len(cands) + 1)}
    for k in range(len(cands) - 1, -1, -1):
        _, char, run, can_close = cands[k]
        for c, arr in longest_after.items():
            arr[k] = max(arr[k + 1], run) if (can_close and c == char) else arr[k + 1]
    ends: dict[int, int] = {}
    k = 0
    while k < len(cands):
        line, char, run, _ = cands[k]
        if longest_after[char][k + 1] < run:
            warnings.append(f"line {line + 1}: code fence {char * run!r} is never closed; read as text")
            k += 1
            continue
        j = k + 1
        while not (cands[j][1] == char and cands[j][2] >= run and cands[j][3]):
            j += 1
        ends[line] = cands[j][0]
        k = j + 1
    return ends


def _heading(line: str) -> tuple[int, str] | None:
    """(level, title) of an ATX heading line, else None (``#tag`` is not a heading)."""
    m = _HEADING.match(line)
    if m is None:
        return None
    return len(m.group(1)), _CLOSING_HASHES.sub("", m.group(2)).strip()


def _text_strength(lines: list[str], i: int, after_break: bool) -> int:
    """Boundary strength before a non-blank, non-heading line outside fences."""
    if after_break or _LIST_ITEM.match(lines[i]):
        return BLOCK
    prev = lines[i - 1]
    if _SENTENCE_END.search(prev, max(0, len(prev) - 12)):
        return SENTENCE
    return LINE


def _setext_level(lines: list[str], i: int, para_start: int | None) -> int:
    """1 (``===``) or 2 (``---``) when line ``i`` underlines the one-line paragraph at ``para_start``; else 0.

    Only a plain one-line paragraph qualifies (not a list item, quote or indented line): a ``---``
    under a longer paragraph is far more often meant as a rule in notes, and reading it as a
    thematic break (what the scan did before) keeps those files' chunks where they were.
    """
    if para_start is None or para_start != i - 1 or _NOT_PARAGRAPH.match(lines[para_start]):
        return 0
    m = _SETEXT.match(lines[i])
    if m is None:
        return 0
    return 1 if m.group(1)[0] == "=" else 2


class _Headings:
    """The heading stack while scanning: the line and the `` > ``-joined path of each heading seen."""

    def __init__(self) -> None:
        self.stack: list[tuple[int, str]] = []
        self.lines: list[int] = []
        self.paths: list[str] = []

    def add(self, line: int, level: int, title: str) -> None:
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, title))
        self.lines.append(line)
        self.paths.append(" > ".join(t for _, t in self.stack if t))


def _scan(lines: list[str], start: int, fence_ends: dict[int, int]) -> tuple[list[int], list[int], list[str]]:
    """Boundary strengths of every line, and the heading lines with their paths.

    A Setext heading is found at its underline and recorded at its title line (the
    line before), which becomes the ``HEADING`` boundary; the underline itself is no
    window edge (``NONE``), so a window never starts between a title and its rule.
    """
    strengths = [NONE] * len(lines)
    headings = _Headings()
    after_break = True
    para_start: int | None = None  # first line of the paragraph being read
    i = start
    while i < len(lines):
        line = lines[i]
        if not line or line.isspace():
            after_break, para_start = True, None
        elif i in fence_ends:
            strengths[i] = BLOCK
            after_break, para_start = True, None
            i = fence_ends[i]  # the inside of a fence has no headings and no boundaries
        elif line[0] in "# " and (heading := _heading(line)) is not None:
            headings.add(i, *heading)
            strengths[i] = HEADING
            after_break, para_start = True, None
        elif level := _setext_level(lines, i, para_start):
            headings.add(i - 1, level, lines[i - 1].strip())
            strengths[i - 1] = HEADING
            after_break, para_start = True, None
        else:
            strengths[i] = _text_strength(lines, i, after_break)
            if after_break:
                para_start = i
            after_break = False
        i += 1
    return strengths, headings.lines, headings.paths


# --- Splitting a line too long for one window -------------------------------------------------------

_SENTENCE_BREAK = re.compile(r"[.!?][\"'”’)\]]*\s+|[。！？]+[」』”’）)]*\s*")
_WORD_BREAK = re.compile(r"\s+")
_CHAR_FILL = 0.9  # aim a character cut this far under the limit: token density varies along a line
_MAX_ROUNDS = 64  # each round at least halves or re-levels every over-limit piece; never reached


@dataclass(slots=True)
class _Piece:
    """Consecutive segments of one line; ``tokens`` counts ``text`` (None: not yet counted)."""

    parts: list[str]
    level: int  # how it was cut: 0 whole line, 1 sentences, 2 words, 3+ characters
    tokens: int | None
    group: int = -1  # siblings from one cut share it and may be merged once (-1: never)

    @property
    def text(self) -> str:
        return "".join(self.parts).strip()


def split_long_texts(
    texts: Sequence[str], count_tokens: TokenCounter, limit: int
) -> list[list[tuple[str, int]]]:
    """Cut each text into pieces of at most ``limit`` tokens: at sentence ends
    (``. ! ?`` + space, ``。！？``), else between words, else between characters.

    Each piece is a stripped substring of its text, in order, with its exact
    count. Consecutive sentences (words, ...) are merged back while they fit, so
    pieces are near ``limit``. All texts are handled together, one
    ``count_tokens`` batch per round (about five rounds). Only a single
    character worth more than ``limit`` tokens can come out over it.
    """
    pieces = [[_Piece([t], 0, None)] for t in texts]
    groups = iter(range(1 << 62))
    for _ in range(_MAX_ROUNDS):
        unknown = [p for row in pieces for p in row if p.tokens is None]
        for p, n in zip(unknown, count_tokens([p.text for p in unknown]) if unknown else [], strict=True):
            p.tokens = n
        pieces = [_merge_siblings(row, limit) for row in pieces]
        pending = [p for row in pieces for p in row if p.tokens is None or _splittable(p, limit)]
        if not pending:
            break
        pieces = [[q for p in row for q in (_refine(p, limit, groups) if _splittable(p, limit) else [p])]
                  for row in pieces]
    return [[(p.text, p.tokens or 0) for p in row if p.text] for row in pieces]


def _splittable(p: _Piece, limit: int) -> bool:
    return p.tokens is not None and p.tokens > limit and len(p.text) > 1


def _merge_siblings(row: list[_Piece], limit: int) -> list[_Piece]:
    """Greedily join runs of counted siblings while their summed counts fit ``limit``;
    a joined piece is re-counted (the sum is only an estimate) and not joined again."""
    out: list[_Piece] = []
    for p in row:
        last = out[-1] if out else None
        if (
            last is not None and p.group >= 0 and last.group == p.group
            and last.tokens is not None and p.tokens is not None and last.tokens + p.tokens <= limit
        ):
            out[-1] = _Piece(last.parts + p.parts, last.level, last.tokens + p.tokens, last.group)
            continue
        out.append(p)
    for k, p in enumerate(out):
        if p.group >= 0:
            merged = len(p.parts) > 1
            out[k] = _Piece(p.parts, p.level, None if merged else p.tokens, -1)
    return out


def _refine(p: _Piece, limit: int, groups: Iterator[int]) -> list[_Piece]:
    """Cut an over-limit piece one step finer: halve a joined piece, else segment
    its text at the next level (sentences, words, then characters)."""
    if len(p.parts) > 1:
        half = len(p.parts) // 2
        return [_Piece(p.parts[:half], p.level, None), _Piece(p.parts[half:], p.level, None)]
    text, level = p.text, p.level + 1
    if level == 1:
        segments = _segments(text, _SENTENCE_BREAK)
    elif level == 2:
        segments = _segments(text, _WORD_BREAK)
    else:
        size = max(1, min(len(text) // 2, int(len(text) * limit * _CHAR_FILL / (p.tokens or 1))))
        segments = [text[k : k + size] for k in range(0, len(text), size)]
    if len(segments) == 1:
        return [_Piece([text], level, p.tokens)]
    group = next(groups)
    return [_Piece([s], level, None, group) for s in segments]


def _segments(text: str, breaks: re.Pattern[str]) -> list[str]:
    """``text`` cut after every match of ``breaks``; the segments concatenate to ``text``."""
    out: list[str] = []
    pos = 0
    for m in breaks.finditer(text):
        if m.end() > pos:
            out.append(text[pos : m.end()])
            pos = m.end()
    if pos < len(text):
        out.append(text[pos:])
    return out
