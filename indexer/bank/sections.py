"""Finding ``## `` sections and memoryd-generated regions in a Memory Bank file.

Headings inside fenced code and inside USER blocks are not headings here: a
USER block is the user's, and a ``## Routing Rules`` line in a code sample is
an example, not a section. A section runs from its heading line to the next
level-1/2 heading, a block marker, or the end of the file.

A *generated region* is the part of a section memoryd wrote and may rewrite:

    <!-- memoryd:generated sha256=0123456789ab -->
    ...content...
    <!-- memoryd:generated-end -->

The sha256 (first 12 hex digits) is of the content as memoryd wrote it. If
the content no longer matches it, someone edited it, and memoryd leaves it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator

from memoryd.indexer.markdown.memblocks import MACHINE_END, MACHINE_START, USER_END, USER_START, user_spans

GEN_START = re.compile(r"<!-- memoryd:generated sha256=([0-9a-f]{12}) -->\n")
GEN_END = "<!-- memoryd:generated-end -->\n"
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s")


def lines_outside_fences(text: str) -> Iterator[tuple[int, str]]:
    """``(offset, line)`` for each line (newline kept) that is not inside a fenced code block."""
    fence: str | None = None
    offset = 0
    for line in text.splitlines(keepends=True):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and m and m.group(1) == fence:
            fence = None
        elif fence is None:
            yield offset, line
        offset += len(line)


def headings(text: str, level: int = 2) -> list[tuple[int, str]]:
    """``(offset, heading line without trailing whitespace)`` of level-``level`` headings outside USER blocks."""
    spans = user_spans(text)
    prefix = "#" * level + " "
    return [(off, line.rstrip()) for off, line in lines_outside_fences(text)
            if line.startswith(prefix) and not any(a <= off < b for a, b in spans)]


def find_section(text: str, names: Iterable[str]) -> tuple[int, int] | None:
    """``[start, end)`` of the first section whose heading line equals one of ``names`` exactly."""
    wanted = set(names)
    for off, line in headings(text):
        if line in wanted:
            return off, _section_end(text, off)
    return None


def _section_end(text: str, start: int) -> int:
    first = True
    for off, line in lines_outside_fences(text[start:]):
        if first:
            first = False
            continue
        m = _HEADING.match(line)
        if (m and len(m.group(1)) <= 2) or line.startswith((MACHINE_END, MACHINE_START, USER_START, USER_END)):
            return start + off
    return len(text)


def short_sha(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:12]


def wrap_generated(content: str) -> str:
    """``content`` (ending in a newline) between generated-region markers carrying its hash."""
    if not content.endswith("\n"):
        content += "\n"
    return f"<!-- memoryd:generated sha256={short_sha(content)} -->\n{content}{GEN_END}"


def generated_region(text: str, start: int, end: int) -> tuple[int, int, bool] | None:
    """The generated region in ``text[start:end]``: ``(content_start, content_end, untouched)``, or None.

    ``untouched`` is True when the content still has the hash memoryd recorded.
    """
    m = GEN_START.search(text, start, end)
    if m is None:
        return None
    close = text.find(GEN_END, m.end(), end)
    if close < 0:
        return None
    content = text[m.end():close]
    return m.end(), close, short_sha(content) == m.group(1)


def replace_generated(text: str, content_start: int, content_end: int, new_content: str) -> str:
    """``text`` with one generated region's content (and its recorded hash) replaced."""
    marker_start = text.rfind("<!-- memoryd:generated", 0, content_start)
    end = content_end + len(GEN_END)
    return text[:marker_start] + wrap_generated(new_content) + text[end:]


def demote_headings(md: str, levels: int = 1) -> str:
    """Every ATX heading outside fences pushed down ``levels`` (capped at ``######``)."""
    out: list[str] = []
    fence: str | None = None
    for line in md.splitlines(keepends=True):
        m = _FENCE.match(line)
        if m and (fence is None or m.group(1) == fence):
            fence = m.group(1) if fence is None else None
        elif fence is None and (h := _HEADING.match(line)):
            depth = min(6, len(h.group(1)) + levels)
            line = "#" * depth + line[len(h.group(1)):]
        out.append(line)
    return "".join(out)


def strip_title_and_markers(md: str) -> str:
    """File body for re-use elsewhere: no level-1 title, no block or template markers, no USER blocks."""
    for a, b in reversed(user_spans(md)):
        md = md[:a] + md[b:]
    out: list[str] = []
    for off, line in _all_lines(md):
        stripped = line.strip()
        if stripped in (MACHINE_START, MACHINE_END) or stripped.startswith("<!-- MEMORY_BANK_TEMPLATE"):
            continue
        if line.startswith("# ") and off == _first_content_offset(md):
            continue
        out.append(line)
    return "".join(out).strip("\n")


def _all_lines(text: str) -> Iterator[tuple[int, str]]:
    offset = 0
    for line in text.splitlines(keepends=True):
        yield offset, line
        offset += len(line)


def _first_content_offset(text: str) -> int:
    for off, line in _all_lines(text):
        s = line.strip()
        if s and s not in (MACHINE_START, MACHINE_END) and not s.startswith("<!--"):
            return off
    return -1
